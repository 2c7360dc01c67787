"""Write-scope normalization, overlap and membership (spec 04 admission, spec 06 enforcement)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmo_kernel.errors import AdmissionError
from mmo_kernel.workspace.write_scopes import (
    OutOfScopeMutation,
    assert_no_scope_conflicts,
    enforce_write_scope,
    normalize_write_scopes,
    path_in_scopes,
    paths_outside_scopes,
    resolve_write_scopes,
    scopes_overlap,
)


@pytest.fixture
def cwd(tmp_path):
    root = tmp_path / "project"
    (root / "src/pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    return root


@pytest.mark.parametrize("values", [None, [], ()])
def test_omitted_scope_is_the_whole_workspace_unless_required(cwd, values):
    assert normalize_write_scopes(cwd, values) == ["."]
    with pytest.raises(ValueError, match="requires an explicit write scope"):
        normalize_write_scopes(cwd, values, required=True)


def test_scopes_are_normalized_relative_sorted_and_folded(cwd):
    assert normalize_write_scopes(cwd, ["./src/", "docs//", "src/pkg/../pkg/x"]) == ["docs", "src"]
    absolute = [str(cwd / "docs"), "new/file.py"]
    assert normalize_write_scopes(cwd, absolute) == ["docs", "new/file.py"]
    assert normalize_write_scopes(cwd, ["src", "."]) == ["."]
    assert normalize_write_scopes(cwd, "src") == ["src"]
    assert resolve_write_scopes(cwd, ["."]) == [str(cwd)]
    assert resolve_write_scopes(cwd, ["src"]) == [str(cwd / "src")]


def test_absolute_scope_through_a_symlinked_cwd_is_accepted(cwd, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(cwd, alias)
    assert normalize_write_scopes(alias, [str(cwd / "src")]) == ["src"]


@pytest.mark.parametrize(("value", "message"), [
    ("../other", "escapes the workspace"),
    ("src/../../other", "escapes the workspace"),
    ("/etc", "outside the workspace"),
    ("", "must not be empty"),
    ("   ", "must not be empty"),
    ("src/*.py", "not patterns"),
    (".git/hooks", "git metadata"),
    (7, "must be a string"),
])
def test_bad_scopes_are_refused_with_a_specific_error(cwd, value, message):
    with pytest.raises(ValueError, match=message):
        normalize_write_scopes(cwd, [value])


def test_symlink_escape_is_refused(cwd, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, cwd / "escape")
    with pytest.raises(ValueError, match="leaves the workspace through a symlink"):
        normalize_write_scopes(cwd, ["escape/sub"])


def test_overlap_is_equal_ancestor_or_descendant():
    assert scopes_overlap("src", "src")
    assert scopes_overlap("src", "src/pkg/mod.py")
    assert scopes_overlap("src/pkg", "src")
    assert scopes_overlap(".", "docs")
    assert not scopes_overlap("src", "src2")
    assert not scopes_overlap("src/a", "src/b")
    assert scopes_overlap(["docs", "tests"], ["src", "tests/unit"])
    assert scopes_overlap("/w/project", "/w/project/src")
    assert not scopes_overlap("/w/project/src", "/w/project/docs")
    with pytest.raises(ValueError, match="relative scope with absolute"):
        scopes_overlap("src", "/w/project/src")


def test_membership_and_out_of_scope_paths():
    assert path_in_scopes("src/pkg/mod.py", ["src"])
    assert path_in_scopes("anything/at/all", ["."])
    assert not path_in_scopes("src2/x", ["src"])
    assert not path_in_scopes("../README.md", ["."])
    assert paths_outside_scopes(["src/a", "notes.txt", "docs/b", "notes.txt"], ["src", "docs"]) == [
        "notes.txt"]
    with pytest.raises(OutOfScopeMutation, match="^out-of-scope mutation: a.txt, z/b.txt$") as info:
        enforce_write_scope(["z/b.txt", "src/ok", "a.txt"], ["src"])
    assert info.value.paths == ["a.txt", "z/b.txt"]
    enforce_write_scope(["src/ok"], ["src"])


def test_conflicting_live_writer_is_refused_and_named():
    assert_no_scope_conflicts(["src"], {"job-docs": ["docs"]})
    with pytest.raises(AdmissionError, match="write scope conflicts: 'src/pkg' overlaps 'src' of "
                                             "live writer job-src") as info:
        assert_no_scope_conflicts(["src/pkg"], {"job-docs": ["docs"], "job-src": ["src"]})
    assert info.value.reason == "write_scope_conflict"


_segment = st.sampled_from(["a", "b", "src", "x.py"])
_scope = st.lists(_segment, min_size=0, max_size=3).map(lambda parts: "/".join(parts) or ".")


@given(_scope, _scope)
def test_overlap_is_symmetric_and_matches_membership(a, b):
    assert scopes_overlap(a, b) == scopes_overlap(b, a)
    assert scopes_overlap(a, b) == (path_in_scopes(a, [b]) or path_in_scopes(b, [a]))
