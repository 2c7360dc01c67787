"""The import structure is part of the build: layers, no cycles, plugins on public surfaces.

The contracts live in pyproject.toml (``[tool.importlinter]``); these tests run
them and pin the few rules import-linter cannot express.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import tomlkit

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "mmo_kernel"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
MAX_KERNEL_MODULES = 10


def lint_imports(config: Path, cwd: Path, extra_path: Path | None = None):
    env = None if extra_path is None else {**os.environ, "PYTHONPATH": str(extra_path)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)],
        capture_output=True, text=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL, timeout=120,
    )


def test_every_import_contract_is_kept():
    result = lint_imports(ROOT / "pyproject.toml", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_cycle_through_an_import_inside_a_function_breaks_the_build(tmp_path):
    """Lazy imports hid three cycles before; the checker must see them."""
    pkg = tmp_path / "src" / "demo_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from demo_pkg import b\n")
    (pkg / "b.py").write_text(textwrap.dedent("""
        def later():
            from demo_pkg import a  # the cycle hides in a function
            return a
    """))
    config = tmp_path / "contracts.toml"
    config.write_text(textwrap.dedent("""
        [tool.importlinter]
        root_packages = ["demo_pkg"]
        [[tool.importlinter.contracts]]
        name = "no cycles"
        type = "acyclic_siblings"
        ancestors = ["demo_pkg"]
    """))
    result = lint_imports(config, tmp_path, extra_path=tmp_path / "src")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "No cycles are allowed in demo_pkg" in result.stdout


def test_an_upward_import_breaks_the_layers(tmp_path):
    """A copy of the kernel where the state store imports the CLI fails the layer contract."""
    src = tmp_path / "src"
    shutil.copytree(KERNEL, src / "mmo_kernel", ignore=shutil.ignore_patterns("__pycache__"))
    records = src / "mmo_kernel" / "state" / "records.py"
    records.write_text(records.read_text() + "\n\ndef _upward():\n    from mmo_kernel import cli\n")
    layers = next(c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "importlinter"]["contracts"] if c["id"] == "kernel-layers")
    config = tmp_path / "contracts.toml"
    config.write_text(tomlkit.dumps({"tool": {"importlinter": {
        "root_packages": ["mmo_kernel"], "contracts": [layers]}}}))
    result = lint_imports(config, tmp_path, extra_path=src)
    assert result.returncode == 1
    assert "mmo_kernel.state is not allowed to import mmo_kernel.cli" in result.stdout


def test_kernel_has_at_most_ten_top_level_modules():
    modules = sorted(p.name for p in KERNEL.glob("*.py"))
    assert len(modules) <= MAX_KERNEL_MODULES, modules


def test_the_codex_standin_is_not_part_of_the_kernel():
    """A test double with its own console script is a package of its own (the
    ``kernel-never-imports-plugins`` contract keeps the kernel from importing it)."""
    assert not (KERNEL / "standin").exists()
    assert (ROOT / "plugins" / "mmo_codex_standin" / "main.py").is_file()


# Strings that equal a driver's name but mean something else in that module.
NOT_DRIVER_NAMES = {
    ("config/settings.py", "copy"): "auth_link_mode = copy (a private copy of auth.json)",
    ("sessions/homes.py", "copy"): "auth_link_mode = copy",
}


def _builtin_driver_names() -> set[str]:
    from mmo_kernel.plugin.drivers import CONCERNS
    from mmo_kernel.plugin.manager import build_plugin_system

    registry = build_plugin_system().registry
    return {name for concern in CONCERNS for name in registry.names(concern)}


@pytest.mark.parametrize("path", sorted(
    p for p in KERNEL.rglob("*.py")
    if p.relative_to(KERNEL).parts[0] != "cli" and p.relative_to(KERNEL).as_posix()
    != "profiles/schema.py"
), ids=lambda p: p.relative_to(KERNEL).as_posix())
def test_no_kernel_module_names_a_driver(path):
    """Drivers are chosen by TOML (profile defaults included), never by a name in kernel code."""
    names = _builtin_driver_names()
    rel = path.relative_to(KERNEL).as_posix()
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    named = sorted(
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and node.value in names and id(node) not in docstrings
        and (rel, node.value) not in NOT_DRIVER_NAMES
    )
    assert named == [], f"{rel} names drivers {named}"
