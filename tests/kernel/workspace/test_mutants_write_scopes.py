"""Write-scope folding does not depend on how names sort as strings (mutation-testing gaps)."""

from __future__ import annotations

from mmo_kernel.workspace.write_scopes import normalize_write_scopes


def test_the_whole_workspace_absorbs_a_scope_whose_name_sorts_before_a_dot(tmp_path):
    # "#" and "-" sort before "." as characters: folding must still keep the whole workspace
    # (a parent is folded in before its children, compared by path components).
    (tmp_path / "#notes").mkdir()
    (tmp_path / "-build").mkdir()
    assert normalize_write_scopes(tmp_path, ["#notes", ".", "-build"]) == ["."]

