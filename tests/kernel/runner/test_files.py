"""Runner file executors against real files (spec 12 "Files", path rules, limits)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.project_tools.paths import display_path, resolve_in_project, scrub
from mmo_kernel.runner import dispatch as dispatch_module
from mmo_kernel.runner.context import CallContext, Project, RunnerConfig
from mmo_kernel.runner.files import (
    artifact_read,
    artifact_write,
    edit_project_files,
    read_files,
    transfer_project_artifact,
)


def _config(tmp: Path) -> RunnerConfig:
    return RunnerConfig(server_url="http://127.0.0.1:1", token="mmo_rt_x", client_id="laptop",
                        owner="alice", project_registry_dir=tmp / "projects.d")


def _project(root: Path, pid: str) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    return Project(id=pid, name=pid, description="", root=Path(os.path.realpath(root)),
                   vcs="none")


@pytest.fixture
def projects(tmp_path: Path) -> dict[str, Project]:
    return {"code": _project(tmp_path / "code", "code"),
            "data": _project(tmp_path / "data", "data")}


def ctx_for(projects: dict[str, Project], pid: str = "code") -> CallContext:
    tmp = projects[pid].root.parent
    config = _config(tmp)
    return CallContext(project=projects[pid], projects=projects, session_id="sess1",
                       user="alice", policy=config.policy, config=config, jobs=None,
                       state_dir=tmp / "state")


def root_of(projects: dict[str, Project], pid: str = "code") -> Path:
    return projects[pid].root


def failure(fn, arguments: dict[str, Any], ctx: CallContext) -> ToolFailure:
    with pytest.raises(ToolFailure) as caught:
        fn(arguments, ctx)
    return caught.value


def rev(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` with its bytes (temp files included)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


# ---------------------------------------------------------------- read_files

def test_five_line_file_with_limit_two_takes_three_calls_following_suggested_call(projects):
    ctx = ctx_for(projects)
    content = b"one\ntwo\nthree\nfour\nfive\n"
    (root_of(projects) / "notes.txt").write_bytes(content)
    arguments: dict[str, Any] = {"project": "code", "session_id": "sess1",
                                 "items": [{"path": "notes.txt", "limit": 2}]}
    texts, revisions, calls = [], set(), 0
    while True:
        calls += 1
        out = read_files(arguments, ctx)
        item = out["items"][0]["output"]
        texts.append(item["text"])
        revisions.add(item["read_revision"])
        if "suggested_call" not in out:
            assert item["has_more"] is False and "next_cursor" not in item
            break
        call = out["suggested_call"]
        assert call["tool"] == "read_files"
        assert call["follow_up_kind"] == "mechanically_followable"
        assert call["arguments"]["project"] == "code"
        assert call["arguments"]["session_id"] == "sess1"
        assert call["arguments"]["items"][0]["expected_read_revision"] == item["read_revision"]
        assert call["arguments"]["items"][0]["cursor"] == item["next_cursor"] == item["end_line"]
        arguments = call["arguments"]
        assert calls < 10
    assert calls == 3
    assert "".join(texts).encode() == content
    assert revisions == {rev(content)}


def test_page_fields_describe_lines_bytes_and_revision(projects):
    ctx = ctx_for(projects)
    (root_of(projects) / "a.txt").write_bytes(b"x\ny\nz")  # last line without newline
    (root_of(projects) / "empty.txt").write_bytes(b"")
    out = read_files({"items": [{"path": "a.txt", "cursor": 1},
                                {"path": "./empty.txt"}]}, ctx)
    first = out["items"][0]
    assert first["path"] == "a.txt"
    assert first["output"] == {"text": "y\nz", "read_revision": rev(b"x\ny\nz"), "has_more": False,
                               "start_line": 2, "end_line": 3, "total_lines": 3, "file_bytes": 5}
    empty = out["items"][1]["output"]
    assert (empty["text"], empty["total_lines"], empty["file_bytes"], empty["has_more"]) == (
        "", 0, 0, False)
    assert "suggested_call" not in out


def test_default_limit_is_400_lines(projects):
    ctx = ctx_for(projects)
    (root_of(projects) / "long.txt").write_text("".join(f"{i}\n" for i in range(1000)))
    item = read_files({"items": [{"path": "long.txt"}]}, ctx)["items"][0]["output"]
    assert (item["start_line"], item["end_line"], item["next_cursor"]) == (1, 400, 400)
    assert item["text"].splitlines()[-1] == "399"


def test_a_page_holds_at_most_256_kib_and_ends_at_a_line_boundary(projects):
    ctx = ctx_for(projects)
    line = "é" * 99 + "\n"  # 199 bytes
    content = (line * 3000).encode()
    (root_of(projects) / "wide.txt").write_bytes(content)
    arguments: dict[str, Any] = {"items": [{"path": "wide.txt", "limit": 2000}]}
    pages = []
    while True:
        out = read_files(arguments, ctx)
        page = out["items"][0]["output"]
        data = page["text"].encode()
        assert len(data) <= 256 * 1024 and data.endswith(b"\n")
        assert page["end_line"] - page["start_line"] + 1 == len(data) // 199
        pages.append(data)
        if "suggested_call" not in out:
            break
        arguments = out["suggested_call"]["arguments"]
    assert len(pages) == 3 and len(pages[0]) == (256 * 1024 // 199) * 199
    assert b"".join(pages) == content


def test_a_line_longer_than_a_page_is_cut_and_flagged(projects):
    ctx = ctx_for(projects)
    (root_of(projects) / "min.js").write_bytes(b"a" * (300 * 1024) + b"\nend\n")
    out = read_files({"items": [{"path": "min.js"}]}, ctx)
    page = out["items"][0]["output"]
    assert page["line_truncated"] is True and len(page["text"]) == 256 * 1024
    assert (page["end_line"], page["next_cursor"], page["total_lines"]) == (1, 1, 2)
    follow = read_files(out["suggested_call"]["arguments"], ctx)["items"][0]["output"]
    assert follow["text"] == "end\n"


def test_stale_revision_and_bad_items_fail_per_item_and_finished_items_are_dropped(projects):
    ctx = ctx_for(projects)
    root = root_of(projects)
    (root / "big.txt").write_text("1\n2\n3\n")
    (root / "small.txt").write_text("only\n")
    (root / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    (root / "nul.txt").write_bytes(b"a\x00b\n")
    out = read_files({"project": "code", "items": [
        {"path": "big.txt", "limit": 1},
        {"path": "small.txt", "expected_read_revision": "sha256:" + "0" * 64},
        {"path": "image.bin"}, {"path": "nul.txt"}, {"path": "missing.txt"},
        {"path": "small.txt"}]}, ctx)
    kinds = [item.get("error_kind") for item in out["items"]]
    assert kinds == [None, "stale_file_revision", "not_a_text_file", "not_a_text_file",
                     "file_not_found", None]
    assert all(set(i) == {"path", "error_kind", "error"} for i in out["items"] if "error" in i)
    follow = out["suggested_call"]["arguments"]["items"]
    assert follow == [{"path": "big.txt", "limit": 1, "cursor": 1,
                       "expected_read_revision": rev(b"1\n2\n3\n")}]


def test_following_a_read_after_an_external_change_reports_stale(projects):
    ctx = ctx_for(projects)
    path = root_of(projects) / "f.txt"
    path.write_text("a\nb\nc\n")
    out = read_files({"items": [{"path": "f.txt", "limit": 1}]}, ctx)
    path.write_text("a\nX\nb\nc\n")
    again = read_files(out["suggested_call"]["arguments"], ctx)
    assert again["items"][0]["error_kind"] == "stale_file_revision"
    assert "suggested_call" not in again


@pytest.mark.parametrize("arguments, field", [
    ({"items": []}, "items"),
    ({"items": [{"path": f"f{i}"} for i in range(21)]}, "items"),
    ({"items": [{"path": "f", "limit": 2001}]}, "items.0.limit"),
    ({"items": [{"path": "f", "limit": 0}]}, "items.0.limit"),
    ({"items": [{"path": "f", "cursor": -1}]}, "items.0.cursor"),
    ({"items": [{"path": "f", "colour": "red"}]}, "items.0.colour"),
])
def test_read_limits_are_invalid_arguments_naming_the_field(projects, arguments, field):
    exc = failure(read_files, arguments, ctx_for(projects))
    assert exc.kind == "invalid_arguments" and exc.message.startswith(field)


# ---------------------------------------------------------------- path rules

def test_path_rules_refuse_escapes_symlinks_and_non_files_without_machine_paths(projects,
                                                                                tmp_path):
    ctx = ctx_for(projects)
    root = root_of(projects)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "sub").mkdir()
    (root / "linkdir").symlink_to(outside)
    (root / "link.txt").symlink_to(outside / "secret.txt")
    os.mkfifo(root / "pipe")
    cases = {
        str(outside / "secret.txt"): "path_outside_project",
        "../outside/secret.txt": "path_outside_project",
        "sub/../../outside/secret.txt": "path_outside_project",
        "linkdir/secret.txt": "path_outside_project",
        "link.txt": "not_a_regular_file",
        "sub": "not_a_regular_file",
        ".": "not_a_regular_file",
        "pipe": "not_a_regular_file",
        "sub/nothing.txt": "file_not_found",
        "sub/x/y.txt": "file_not_found",
    }
    out = read_files({"items": [{"path": p} for p in cases]}, ctx)
    assert [i["error_kind"] for i in out["items"]] == list(cases.values())
    text = json.dumps(out)
    assert str(tmp_path) not in text and "secret" not in text.replace("secret.txt", "")
    assert out["items"][0]["path"] == "<path>"


def test_resolve_in_project_and_display_path(projects, tmp_path):
    root = root_of(projects)
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x\n")
    assert resolve_in_project(root, "src//./a.py") == root / "src" / "a.py"
    assert resolve_in_project(root, "src/new.py", must_exist=False) == root / "src" / "new.py"
    assert resolve_in_project(root, "src", regular=False) == root / "src"
    with pytest.raises(ToolFailure) as caught:
        resolve_in_project(root, ".git/hooks/pre-commit", must_exist=False, write=True)
    assert caught.value.kind == "path_outside_project"
    with pytest.raises(ToolFailure) as caught:
        resolve_in_project(root, "/etc/passwd")
    assert caught.value.kind == "path_outside_project" and "/etc" not in caught.value.message
    assert display_path(root, root / "src" / "a.py") == "src/a.py"
    assert scrub(f"fatal: {root}/src/a.py vs /etc/hosts, ok", root) == \
        "fatal: src/a.py vs <path>, ok"
    assert display_path(root, tmp_path / "elsewhere") == "<path>"


# ---------------------------------------------------------------- edit_project_files

def test_create_and_edit_succeed_with_the_exact_output(projects):
    ctx = ctx_for(projects)
    root = root_of(projects)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    before = (root / "calc.py").read_bytes()
    out = edit_project_files({"project": "code", "changes": [
        {"kind": "create", "path": "pkg/deep/new.py", "content": "VALUE = 1\n"},
        {"kind": "edit", "path": "calc.py", "expected_read_revision": rev(before),
         "edits": [{"kind": "replace_exact", "old_text": "a - b", "new_text": "a + b"},
                   {"kind": "replace_exact", "old_text": "def add", "new_text": "def plus"}]},
    ]}, ctx)
    after = b"def plus(a, b):\n    return a + b\n"
    assert out == {"changed": True, "state_changed": True, "items": [
        {"path": "pkg/deep/new.py", "kind": "create", "read_revision": rev(b"VALUE = 1\n"),
         "file_bytes": 10},
        {"path": "calc.py", "kind": "edit", "read_revision": rev(after), "file_bytes": len(after)},
    ]}
    assert (root / "calc.py").read_bytes() == after
    assert (root / "pkg/deep/new.py").read_text() == "VALUE = 1\n"
    assert sorted(tree(root)) == ["calc.py", "pkg/deep/new.py"]  # no temp file left
    read = read_files({"items": [{"path": "calc.py"}]}, ctx)["items"][0]["output"]
    assert read["read_revision"] == out["items"][1]["read_revision"]


def test_edit_keeps_the_file_mode_and_create_uses_the_default_mode(projects):
    ctx = ctx_for(projects)
    root = root_of(projects)
    script = root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    edit_project_files({"changes": [
        {"kind": "edit", "path": "run.sh", "expected_read_revision": rev(b"echo old\n"),
         "edits": [{"kind": "replace_exact", "old_text": "old", "new_text": "new"}]},
        {"kind": "create", "path": "plain.txt", "content": ""}]}, ctx)
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE((root / "plain.txt").stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("change, kind", [
    ({"kind": "create", "path": "exists.txt", "content": "x"}, "file_exists"),
    ({"kind": "edit", "path": "exists.txt", "expected_read_revision": None,
      "edits": [{"kind": "replace_exact", "old_text": "absent", "new_text": "y"}]},
     "edit_text_not_found"),
    ({"kind": "edit", "path": "exists.txt", "expected_read_revision": None,
      "edits": [{"kind": "replace_exact", "old_text": "line", "new_text": "y"}]},
     "edit_text_not_unique"),
    ({"kind": "edit", "path": "exists.txt", "expected_read_revision": None,
      "edits": [{"kind": "replace_exact", "old_text": "aa", "new_text": "y"}]},
     "edit_text_not_unique"),  # overlapping occurrences count too
    ({"kind": "edit", "path": "exists.txt", "expected_read_revision": "sha256:" + "1" * 64,
      "edits": [{"kind": "replace_exact", "old_text": "one", "new_text": "y"}]},
     "stale_file_revision"),
    ({"kind": "edit", "path": "missing.txt", "expected_read_revision": "sha256:" + "1" * 64,
      "edits": [{"kind": "replace_exact", "old_text": "one", "new_text": "y"}]},
     "file_not_found"),
    ({"kind": "edit", "path": "binary.dat", "expected_read_revision": None,
      "edits": [{"kind": "replace_exact", "old_text": "a", "new_text": "y"}]},
     "not_a_text_file"),
    ({"kind": "create", "path": "../escape.txt", "content": "x"}, "path_outside_project"),
    ({"kind": "create", "path": ".git/hooks/pre-commit", "content": "x"},
     "path_outside_project"),
    ({"kind": "create", "path": "exists.txt/inner.txt", "content": "x"},
     "not_a_regular_file"),
    ({"kind": "create", "path": "dir", "content": "x"}, "not_a_regular_file"),
])
def test_one_failing_change_writes_nothing(projects, change, kind):
    """The first change is valid; the second fails; nothing at all is written."""
    ctx = ctx_for(projects)
    root = root_of(projects)
    (root / "exists.txt").write_bytes(b"line one\nline two aaa\n")
    (root / "binary.dat").write_bytes(b"a\xff\xfe")
    (root / "dir").mkdir()
    (root / "keep.txt").write_bytes(b"keep\n")
    if change.get("expected_read_revision", "") is None:
        target = root / change["path"]
        change = {**change, "expected_read_revision": rev(target.read_bytes())}
    snapshot = tree(root)
    dirs = sorted(p for p in root.rglob("*") if p.is_dir())
    exc = failure(edit_project_files, {"changes": [
        {"kind": "create", "path": "newdir/first.txt", "content": "first\n"},
        {"kind": "edit", "path": "keep.txt", "expected_read_revision": rev(b"keep\n"),
         "edits": [{"kind": "replace_exact", "old_text": "keep", "new_text": "changed"}]},
        change]}, ctx)
    assert exc.kind == kind and exc.state_changed is False
    assert exc.extra["change_index"] == 2 and exc.message.startswith("changes[2]")
    assert tree(root) == snapshot
    assert sorted(p for p in root.rglob("*") if p.is_dir()) == dirs


def test_a_rename_failing_midway_undoes_the_changes_already_installed(projects, monkeypatch):
    """Fault injection: the third rename fails (an I/O error cannot be produced on demand);
    the two changes already in place are put back, so nothing is written."""
    from mmo_kernel.runner import files

    ctx = ctx_for(projects)
    root = root_of(projects)
    (root / "a.txt").write_bytes(b"old a\n")
    (root / "a.txt").chmod(0o600)
    snapshot = tree(root)
    real_install, calls = files._install, []

    def failing_install(staged, *, clobber):
        calls.append(staged.rel)
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        real_install(staged, clobber=clobber)

    monkeypatch.setattr(files, "_install", failing_install)
    exc = failure(edit_project_files, {"changes": [
        {"kind": "edit", "path": "a.txt", "expected_read_revision": rev(b"old a\n"),
         "edits": [{"kind": "replace_exact", "old_text": "old", "new_text": "new"}]},
        {"kind": "create", "path": "made/b.txt", "content": "b"},
        {"kind": "create", "path": "c.txt", "content": "c"}]}, ctx)
    assert calls == ["a.txt", "made/b.txt", "c.txt"]
    assert exc.kind == "runner_unavailable" and exc.state_changed is False
    assert "Input/output error" in exc.message
    assert tree(root) == snapshot and not (root / "made").exists()
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == 0o600


def test_stale_edit_keeps_an_external_writers_bytes_and_a_fresh_read_edit_keeps_them(projects):
    ctx = ctx_for(projects)
    path = root_of(projects) / "notes.md"
    path.write_text("first line\n")
    read = read_files({"items": [{"path": "notes.md"}]}, ctx)["items"][0]["output"]
    path.write_text("first line\nexternal line\n")  # another writer, after our read
    external = path.read_bytes()
    change = {"kind": "edit", "path": "notes.md", "expected_read_revision": read["read_revision"],
              "edits": [{"kind": "replace_exact", "old_text": "first", "new_text": "1st"}]}
    exc = failure(edit_project_files, {"changes": [change]}, ctx)
    assert exc.kind == "stale_file_revision" and exc.state_changed is False
    assert "notes.md" in exc.message
    assert path.read_bytes() == external
    fresh = read_files({"items": [{"path": "notes.md"}]}, ctx)["items"][0]["output"]
    edit_project_files({"changes": [{**change, "expected_read_revision": fresh["read_revision"]}]},
                       ctx)
    assert path.read_text() == "1st line\nexternal line\n"


def test_writes_never_follow_a_symlink_component(projects, tmp_path):
    ctx = ctx_for(projects)
    root = root_of(projects)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "target.txt").write_text("outside\n")
    (root / "out").symlink_to(outside)
    (root / "leaf.txt").symlink_to(outside / "target.txt")
    exc = failure(edit_project_files, {"changes": [
        {"kind": "create", "path": "out/new.txt", "content": "x"}]}, ctx)
    assert exc.kind == "path_outside_project" and str(tmp_path) not in exc.message
    exc = failure(edit_project_files, {"changes": [
        {"kind": "edit", "path": "leaf.txt", "expected_read_revision": rev(b"outside\n"),
         "edits": [{"kind": "replace_exact", "old_text": "outside", "new_text": "pwned"}]}]},
        ctx)
    assert exc.kind == "not_a_regular_file"
    exc = failure(edit_project_files, {"changes": [
        {"kind": "create", "path": "leaf.txt", "content": "x"}]}, ctx)
    assert exc.kind == "not_a_regular_file"
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    assert (outside / "target.txt").read_text() == "outside\n"


def test_edit_limits_and_duplicates_are_invalid_arguments(projects):
    ctx = ctx_for(projects)
    cases = [
        {"changes": []},
        {"changes": [{"kind": "create", "path": f"f{i}", "content": ""} for i in range(51)]},
        {"changes": [{"kind": "create", "path": "big", "content": "x" * (4 * 1024 * 1024 + 1)}]},
        {"changes": [{"kind": "create", "path": "a", "content": ""},
                     {"kind": "create", "path": "./a", "content": ""}]},
        {"changes": [{"kind": "delete", "path": "a"}]},
        {"changes": [{"kind": "edit", "path": "a", "expected_read_revision": "x", "edits": []}]},
        {"changes": [{"kind": "edit", "path": "a", "expected_read_revision": "x",
                      "edits": [{"kind": "replace_exact", "old_text": "", "new_text": "y"}]}]},
        {"changes": [{"kind": "create", "path": "s", "content": "lone \ud800 surrogate"}]},
    ]
    for arguments in cases:
        exc = failure(edit_project_files, arguments, ctx)
        assert exc.kind == "invalid_arguments", arguments
        assert "\n" not in exc.message
    assert tree(root_of(projects)) == {}
    ok = edit_project_files({"changes": [{"kind": "create", "path": f"f{i}", "content": ""}
                                         for i in range(50)]}, ctx)
    assert len(ok["items"]) == 50


# ---------------------------------------------------------------- transfers

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
       b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N"
       b"\x00\x00\x00\x00IEND\xaeB`\x82")
PDF = (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\r\n"
       b"trailer\n<< /Root 1 0 R >>\n%%EOF\n")


def test_transfer_copies_png_pdf_and_random_bytes_exactly(projects):
    ctx = ctx_for(projects, "data")
    source = root_of(projects, "data")
    files = {"img/logo.png": PNG, "doc.pdf": PDF, "blob.bin": os.urandom(1024)}
    for rel, data in files.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_bytes(data)
    for rel, data in files.items():
        out = transfer_project_artifact({"source_project": "data", "source_path": rel,
                                         "destination_project": "code",
                                         "destination_path": "inbox/" + rel}, ctx)
        assert out == {"file_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                       "state_changed": True}
        assert (root_of(projects) / "inbox" / rel).read_bytes() == data
    assert tree(source) == files  # inputs unchanged


def test_transfer_refuses_an_existing_destination_unless_overwrite(projects):
    ctx = ctx_for(projects, "data")
    (root_of(projects, "data") / "note.txt").write_bytes(b"new note\n")
    dest = root_of(projects) / "note.txt"
    dest.write_bytes(b"conflicting\n")
    dest.chmod(0o640)
    arguments = {"source_project": "data", "source_path": "note.txt",
                 "destination_project": "code", "destination_path": "note.txt"}
    exc = failure(transfer_project_artifact, arguments, ctx)
    assert exc.kind == "destination_exists" and exc.state_changed is False
    assert dest.read_bytes() == b"conflicting\n"
    assert sorted(tree(root_of(projects))) == ["note.txt"]
    out = transfer_project_artifact({**arguments, "overwrite": True}, ctx)
    assert out["file_bytes"] == 9 and dest.read_bytes() == b"new note\n"
    assert stat.S_IMODE(dest.stat().st_mode) == 0o640
    same = transfer_project_artifact({**arguments, "destination_project": "data",
                                      "destination_path": "copies/note-2.txt"}, ctx)
    assert same["sha256"] == hashlib.sha256(b"new note\n").hexdigest()


def test_transfer_path_and_project_errors(projects, tmp_path):
    ctx = ctx_for(projects, "data")
    data = root_of(projects, "data")
    (data / "a.bin").write_bytes(b"\x00\x01")
    (data / "link.bin").symlink_to(data / "a.bin")
    base = {"source_project": "data", "source_path": "a.bin", "destination_project": "code",
            "destination_path": "a.bin"}
    cases = [
        ({**base, "source_project": "nope"}, "project_not_found"),
        ({**base, "source_path": "missing.bin"}, "file_not_found"),
        ({**base, "source_path": "link.bin"}, "not_a_regular_file"),
        ({**base, "source_path": str(data / "a.bin")}, "path_outside_project"),
        ({**base, "destination_path": "../x.bin"}, "path_outside_project"),
        ({**base, "destination_path": ".git/objects/x"}, "path_outside_project"),
    ]
    for arguments, kind in cases:
        exc = failure(transfer_project_artifact, arguments, ctx)
        assert exc.kind == kind, arguments
        assert str(tmp_path) not in exc.message
    assert tree(root_of(projects)) == {}


def test_artifact_read_and_write_carry_bytes_between_runners(projects):
    ctx_data, ctx_code = ctx_for(projects, "data"), ctx_for(projects, "code")
    payload = os.urandom(1024) + PNG
    (root_of(projects, "data") / "pic.png").write_bytes(payload)
    read = artifact_read({"project": "data", "path": "pic.png"}, ctx_data)
    assert read["file_bytes"] == len(payload)
    assert read["sha256"] == hashlib.sha256(payload).hexdigest()
    arguments = {"project": "code", "path": "in/pic.png", "data_b64": read["data_b64"],
                 "overwrite": False}
    wrote = artifact_write(arguments, ctx_code)
    assert wrote == {"file_bytes": len(payload), "sha256": read["sha256"], "state_changed": True}
    assert (root_of(projects) / "in/pic.png").read_bytes() == payload
    assert failure(artifact_write, arguments, ctx_code).kind == "destination_exists"
    bad = failure(artifact_write, {**arguments, "path": "x", "data_b64": "@@@"}, ctx_code)
    assert bad.kind == "invalid_arguments"


def test_executors_are_registered_in_the_runner_dispatch(projects, tmp_path):
    (root_of(projects) / "a.txt").write_text("hi\n")
    config = _config(tmp_path)
    envelope = dispatch_module.dispatch(
        {"type": "call", "tool": "read_files", "user": "alice", "session": None,
         "arguments": {"project": "code", "items": [{"path": "a.txt"}]}},
        config=config, projects=projects, jobs=None, state_dir=tmp_path / "state")
    assert envelope["success"] is True
    assert envelope["output"]["items"][0]["output"]["text"] == "hi\n"
    failed = dispatch_module.dispatch(
        {"type": "call", "tool": "edit_project_files", "user": "alice", "session": None,
         "arguments": {"project": "code", "changes": [
             {"kind": "create", "path": "a.txt", "content": "x"}]}},
        config=config, projects=projects, jobs=None, state_dir=tmp_path / "state")
    assert failed["success"] is False
    assert failed["output"]["error_kind"] == "file_exists"
    assert failed["output"]["state_changed"] is False
    assert str(tmp_path) not in json.dumps(failed)


def test_paging_a_multi_megabyte_file_loses_and_repeats_no_line_across_read_chunks(projects):
    """Lines and multi-byte characters straddle the 1 MiB read chunks."""
    ctx = ctx_for(projects)
    content = "".join(f"{i} " + "ü" * (i % 97) + "\n" for i in range(30000)).encode()
    assert len(content) > 2 * 1024 * 1024
    (root_of(projects) / "big.txt").write_bytes(content)
    arguments: dict[str, Any] = {"items": [{"path": "big.txt", "limit": 2000}]}
    pages, expected_start = [], 1
    while True:
        out = read_files(arguments, ctx)
        page = out["items"][0]["output"]
        assert page["start_line"] == expected_start and page["total_lines"] == 30000
        expected_start = page["end_line"] + 1
        pages.append(page["text"])
        if "suggested_call" not in out:
            break
        arguments = out["suggested_call"]["arguments"]
    assert "".join(pages).encode() == content
