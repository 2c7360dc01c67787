"""Patch reversal edges found by mutation testing (spec 06 integration)."""

from __future__ import annotations

import os

import pytest

from mmo_kernel.state import redaction
from mmo_kernel.workspace.patches import begin_receipt, finish_receipt, reverse_apply

SECRET = "s3cr3t-value-that-mmo-knows-0123456789"


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src/a.txt").write_bytes(b"A")
    return root


def test_reversal_succeeds_when_the_user_already_removed_created_files_and_dirs(ws):
    receipt = begin_receipt(ws, ["new/deep/n.txt"])
    (ws / "new/deep").mkdir(parents=True)
    (ws / "new/deep/n.txt").write_bytes(b"N")
    done = finish_receipt(receipt)
    (ws / "new/deep/n.txt").unlink()  # the user tidied up part of the change by hand
    (ws / "new/deep").rmdir()
    reverse_apply(ws, done)
    assert not (ws / "new").exists()
    assert sorted(os.listdir(ws)) == ["src"]


def test_reversal_restores_the_users_bytes_verbatim_even_a_known_credential(ws, monkeypatch):
    monkeypatch.setattr(redaction, "_cache", None)
    monkeypatch.setenv("MUTANTS_API_TOKEN", SECRET)
    content = f"token = {SECRET}\n".encode()
    (ws / "src/a.txt").write_bytes(content)
    receipt = begin_receipt(ws, ["src/a.txt"])
    (ws / "src/a.txt").write_bytes(b"changed by the patch")
    reverse_apply(ws, finish_receipt(receipt))
    assert (ws / "src/a.txt").read_bytes() == content
    monkeypatch.setattr(redaction, "_cache", None)


def test_a_directory_where_none_was_does_not_hide_a_later_moved_path(ws):
    import hashlib

    from mmo_kernel.workspace.patches import Patch, PathState, PreimageMismatch, check_preimage

    (ws / "dir").mkdir()
    preimage = [PathState(relative_path="dir", kind="absent"),  # a dir where none was: fine
                PathState(relative_path="src/a.txt", kind="file",
                          sha256=hashlib.sha256(b"other").hexdigest())]
    patch = Patch(isolator="t", format="mmo-file-set", label="job-1", base="b",
                  changed_paths=["dir", "src/a.txt"], diff="", artifacts=[], preimage=preimage)
    with pytest.raises(PreimageMismatch) as info:
        check_preimage(ws, patch)
    assert info.value.paths == ["src/a.txt"]


def test_reversal_restores_an_empty_file_as_empty(ws):
    (ws / "src/empty.txt").write_bytes(b"")
    receipt = begin_receipt(ws, ["src/empty.txt"])
    (ws / "src/empty.txt").write_bytes(b"filled by the patch")
    reverse_apply(ws, finish_receipt(receipt))
    assert (ws / "src/empty.txt").read_bytes() == b""


def test_a_label_may_start_with_a_capital_x():
    from mmo_kernel.workspace.patches import check_label

    assert check_label("X1-job") == "X1-job"
