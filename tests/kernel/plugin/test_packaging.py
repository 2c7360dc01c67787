"""The distribution ships every package, profile and contract of the source tree."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[3]


def test_every_python_package_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {p for p in find_packages(ROOT, include=["mmo_kernel*"])}
    found |= set(find_packages(ROOT / "plugins"))
    found |= {"mmo_profiles", "mmo_contracts"}
    assert found == listed


STANDIN = "mmo_codex_standin"
"""The one package under plugins/ that is not a driver plugin: the stand-in executable."""


def test_every_builtin_plugin_package_has_an_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    targets = set(project["entry-points"]["mmo.plugins"].values())
    packages = {p.name for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists()}
    assert targets == packages - {STANDIN}


def test_the_standin_ships_as_its_own_console_script_and_pytest_plugin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["mmo-codex-standin"] == f"{STANDIN}.main:main"
    assert project["entry-points"]["pytest11"][STANDIN] == f"{STANDIN}.fixtures"
    assert not (ROOT / "mmo_kernel" / "standin").exists()


def test_the_license_is_an_spdx_expression():
    """A table is deprecated by setuptools and printed a warning on every install."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
