"""Write scopes at their edges: every refusal's exact message, folding and ordering (spec 04/06).

``test_write_scopes.py`` covers the rules; these pin each message, the
absolute-path forms (through the cwd or its resolved path), folding order and
every clash of a conflict, so a changed comparison or phrase in
``workspace.write_scopes`` fails a test (``make mutate``).
"""

from __future__ import annotations

import os

import pytest

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
    (root / "src" / "pkg").mkdir(parents=True)
    return root


def _refusal(cwd, value):
    with pytest.raises(ValueError) as info:
        normalize_write_scopes(cwd, [value])
    return str(info.value)


def test_each_refusal_names_the_scope(cwd):
    assert _refusal(cwd, 7) == "write scope must be a string path, got int"
    assert _refusal(cwd, None) == "write scope must be a string path, got NoneType"
    assert _refusal(cwd, " \t") == "write scope must not be empty"
    assert _refusal(cwd, "a\0b") == "write scope 'a\\x00b' contains a NUL byte"
    for glob in ("src/*", "a?", "[ab]"):
        assert _refusal(cwd, glob) == (
            f"write scope {glob!r} is a glob; write scopes are paths, not patterns")
    assert _refusal(cwd, "/elsewhere") == (
        f"write scope '/elsewhere' is outside the workspace {str(cwd)!r}")
    for escape in ("..", "../x", "src/../../x"):
        assert _refusal(cwd, escape) == (
            f"write scope {escape!r} escapes the workspace {str(cwd)!r}")
    for git in (".git", "src/.git", "src/.git/hooks", str(cwd / ".git")):
        assert _refusal(cwd, git) == f"write scope {git!r} points into git metadata (.git)"


def test_names_that_only_look_special_are_scopes(cwd):
    assert normalize_write_scopes(cwd, [".github", "src/..x", "..hidden", "git"]) == [
        "..hidden", ".github", "git", "src/..x"]
    assert normalize_write_scopes(cwd, ["  src/pkg  "]) == ["src/pkg"]


def test_a_symlink_out_of_the_workspace_is_named_with_its_target(cwd, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, cwd / "out")
    assert _refusal(cwd, "out") == (
        f"write scope 'out' leaves the workspace through a symlink (resolves to "
        f"{str(outside)!r})")
    os.symlink(cwd / "src", cwd / "inner")  # a link that stays inside is a scope
    assert normalize_write_scopes(cwd, ["inner/pkg"]) == ["inner/pkg"]


def test_absolute_scopes_through_the_cwd_or_its_real_path(cwd, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(cwd, alias)
    assert normalize_write_scopes(alias, [str(alias)]) == ["."]
    assert normalize_write_scopes(alias, [str(alias / "src")]) == ["src"]
    assert normalize_write_scopes(alias, [str(cwd / "src" / "pkg")]) == ["src/pkg"]
    assert normalize_write_scopes(cwd, [str(cwd)]) == ["."]
    assert normalize_write_scopes(cwd, [str(cwd) + "/src/./pkg/"]) == ["src/pkg"]
    assert _refusal(alias, str(tmp_path)) == (
        f"write scope {str(tmp_path)!r} is outside the workspace {str(alias)!r}")


def test_the_workspace_must_be_a_directory(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(ValueError) as info:
        normalize_write_scopes(missing, ["src"])
    assert str(info.value) == f"workspace {str(missing)!r} is not a directory"
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        normalize_write_scopes(afile, ["src"])
    assert normalize_write_scopes(missing, None) == ["."]  # nothing to check without scopes


def test_a_required_scope_message(cwd):
    for values in (None, [], "", ()):
        if values == "":
            continue
        with pytest.raises(ValueError) as info:
            normalize_write_scopes(cwd, values, required=True)
        assert str(info.value) == (
            "this agent requires an explicit write scope (write_scopes) for workspace-write")
    assert normalize_write_scopes(cwd, ["src"], required=True) == ["src"]


def test_folding_keeps_the_outermost_scope_in_sorted_order(cwd):
    assert normalize_write_scopes(cwd, ["src/pkg/a", "b", "src/pkg", "src/pkg/b", "a/x"]) == [
        "a/x", "b", "src/pkg"]
    assert normalize_write_scopes(cwd, ["z", "a/b/c", "a/b", "a/bc"]) == ["a/b", "a/bc", "z"]
    assert normalize_write_scopes(cwd, ["src", "src"]) == ["src"]
    assert normalize_write_scopes(cwd, ("docs", ".")) == ["."]


def test_resolved_scopes_are_absolute_under_the_cwd(cwd):
    relative = os.path.relpath(cwd)
    assert resolve_write_scopes(relative, [".", "src/pkg"]) == [str(cwd), str(cwd / "src/pkg")]


def test_overlap_of_lists_and_of_absolute_scopes():
    assert scopes_overlap(["a", "b"], ["c", "b/x"]) is True
    assert scopes_overlap(["a", "b"], ["c", "d"]) is False
    assert scopes_overlap(".", ".") is True
    assert scopes_overlap("/", "/w") is True
    assert scopes_overlap("/w/a", "/w/ab") is False
    assert scopes_overlap("/w/a/../b", "/w/b/c") is True
    with pytest.raises(ValueError) as info:
        scopes_overlap(["a"], ["b", "/w"])
    assert str(info.value) == "cannot compare relative scope with absolute scope: 'a', '/w'"


def test_membership_of_paths():
    assert path_in_scopes("a", ["a"]) and path_in_scopes("a/b/c", ["x", "a/b"])
    assert not path_in_scopes("a", ["a/b"])
    assert not path_in_scopes("ab", ["a"])
    assert not path_in_scopes("../a", ["."]) and not path_in_scopes("..", ["."])
    assert path_in_scopes("..a", ["."]) and path_in_scopes("./a/./b", ["a"])
    assert not path_in_scopes("a", [])
    assert paths_outside_scopes(["z", "a/1", "y", "z"], ["a"]) == ["y", "z"]
    assert paths_outside_scopes([], ["a"]) == []


def test_every_clash_is_named_in_job_order():
    live = {"job-b": ["src", "docs"], "job-a": ["src/pkg"], "job-c": ["tests"]}
    with pytest.raises(AdmissionError) as info:
        assert_no_scope_conflicts(["src/pkg/mod.py", "docs/x"], live)
    assert str(info.value) == (
        "write scope conflicts: 'src/pkg/mod.py' overlaps 'src/pkg' of live writer job-a; "
        "'src/pkg/mod.py' overlaps 'src' of live writer job-b; "
        "'docs/x' overlaps 'docs' of live writer job-b")
    assert info.value.reason == "write_scope_conflict"
    assert_no_scope_conflicts(["other"], live)
    assert_no_scope_conflicts(["src"], {})


def test_out_of_scope_mutation_names_every_path_sorted():
    error = OutOfScopeMutation(["b", "a"])
    assert error.paths == ["a", "b"] and str(error) == "out-of-scope mutation: a, b"
    with pytest.raises(OutOfScopeMutation) as info:
        enforce_write_scope(["src/x", "top", "top"], ["src"])
    assert info.value.paths == ["top"]
    assert enforce_write_scope([], ["src"]) is None
