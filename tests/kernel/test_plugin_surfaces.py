"""Plugins are written against a small public surface of the kernel, as a third party's would be.

A plugin may import only ``mmo_kernel`` (``hookimpl``, ``package_version``),
``mmo_kernel.errors``, ``mmo_kernel.plugin``, ``mmo_kernel.host_api`` and the kit
packages, and at most 8 distinct kernel modules. The imports are read from the
source with ``ast``, so an import inside a function counts like any other.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
EXAMPLE = ROOT / "tests" / "fixtures" / "mmo-example-route" / "mmo_example_route"
MAX_KERNEL_MODULES = 8
KITS = ("mmo_kernel.contracts", "mmo_kernel.gateway", "mmo_kernel.hosts", "mmo_kernel.tools",
        "mmo_kernel.workspace")
SURFACES = {"mmo_kernel", "mmo_kernel.errors", "mmo_kernel.plugin", "mmo_kernel.host_api", *KITS}


def _is_kernel_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported(node: ast.AST) -> list[str]:
    """The kernel modules one statement imports (``from pkg import mod`` imports ``pkg.mod``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "mmo_kernel"]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
            and node.module.split(".")[0] == "mmo_kernel":
        return [f"{node.module}.{a.name}" if _is_kernel_module(f"{node.module}.{a.name}")
                else node.module for a in node.names]
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
            == "import_module" and node.args and isinstance(node.args[0], ast.Constant) \
            and str(node.args[0].value).split(".")[0] == "mmo_kernel":
        return [str(node.args[0].value)]
    return []


def kernel_imports(package: Path) -> dict[str, list[str]]:
    """Kernel module -> the ``file:line`` places a package imports it, functions included."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for module in _imported(node):
                where = f"{path.relative_to(package.parent)}:{getattr(node, 'lineno', 0)}"
                places = found.setdefault(module, [])
                if where not in places:
                    places.append(where)
    return found


def surface_problems(package: Path) -> list[str]:
    imports = kernel_imports(package)
    problems = [f"{module} is not a public surface (imported at {', '.join(places)})"
                for module, places in sorted(imports.items()) if module not in SURFACES]
    if len(imports) > MAX_KERNEL_MODULES:
        problems.append(f"imports {len(imports)} kernel modules (at most {MAX_KERNEL_MODULES}): "
                        f"{sorted(imports)}")
    return problems


@pytest.mark.parametrize("plugin", [
    *sorted(p for p in PLUGINS.iterdir() if (p / "__init__.py").is_file()), EXAMPLE,
], ids=lambda p: p.name)
def test_plugin_imports_only_public_surfaces(plugin):
    """MMO's own plugins and the third-party example are held to the same contract."""
    assert surface_problems(plugin) == []


def test_an_import_inside_a_function_is_seen(tmp_path):
    """A lazy import of a kernel internal is as much a dependency as a top-level one."""
    plugin = tmp_path / "lazy_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("from mmo_kernel import hookimpl\n")
    (plugin / "driver.py").write_text(textwrap.dedent("""
        from mmo_kernel.gateway import GatewayError
        from mmo_kernel.workspace import patches

        def later():
            from mmo_kernel.gateway.faults import fault_headers
            return fault_headers
    """))
    assert surface_problems(plugin) == [
        f"mmo_kernel.{module} is not a public surface (imported at lazy_plugin/driver.py:{line})"
        for module, line in (("gateway.faults", 6), ("workspace.patches", 3))
    ]


def test_more_than_eight_kernel_modules_is_refused(tmp_path):
    plugin = tmp_path / "wide_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("\n".join(f"import {m}" for m in sorted(SURFACES)))
    assert surface_problems(plugin) == [
        f"imports 9 kernel modules (at most 8): {sorted(SURFACES)}"]


@pytest.mark.parametrize("kit", KITS)
def test_every_kit_name_is_the_kernels_own_object(kit):
    """A kit re-exports: each name in ``__all__`` is imported (so type checkers see it) and is
    the very object its defining module holds."""
    package = importlib.import_module(kit)
    tree = ast.parse(Path(package.__file__).read_text())
    defined = {alias.asname or alias.name: node.module for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
    for name in package.__all__:
        assert name in defined, f"{kit}.{name} is not imported from its module"
        assert getattr(package, name) is getattr(importlib.import_module(defined[name]), name)


# The MCP server (``mmo mcp``, started for every agent thread) and the kernel
# import kit modules directly, and each such import runs the kit's ``__init__``:
# a kit must not load what its importer does not use.
FIRST_USE = """
import importlib, json, sys
import {module}
before = sorted(m for m in sys.modules if m.startswith("mmo_kernel."))
getattr(importlib.import_module("{kit}"), "{name}")
print(json.dumps([before, sorted(sys.modules)]))
"""


@pytest.mark.parametrize(("module", "kit", "name", "sibling"), [
    ("mmo_kernel.gateway.errors", "mmo_kernel.gateway", "post_json_async",
     "mmo_kernel.gateway.upstream_async"),
    ("mmo_kernel.gateway.errors", "mmo_kernel.gateway", "ensure_gateway",
     "mmo_kernel.gateway.process"),
    ("mmo_kernel.tools.servers", "mmo_kernel.tools", "connect", "mmo_kernel.tools.mcp_client"),
    ("mmo_kernel.workspace.write_scopes", "mmo_kernel.workspace", "Patch",
     "mmo_kernel.workspace.patches"),
    ("mmo_kernel.contracts.schemas", "mmo_kernel.contracts", "instance_for_schema",
     "mmo_kernel.contracts.instance"),
])
def test_a_kit_name_loads_its_module_on_first_use(module, kit, name, sibling):
    proc = subprocess.run([sys.executable, "-c", FIRST_USE.format(module=module, kit=kit,
                                                                   name=name)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    before, after = json.loads(proc.stdout)
    assert module in before and sibling not in before
    assert sibling in after
