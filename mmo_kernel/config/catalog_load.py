"""Reading the catalog: the built-in TOML plus the user's ``catalog.d`` fragments.

Fragments never override silently: a route or model id defined twice is an
error naming both files. Each route is then checked by its own route driver,
so driver-specific keys are validated by the plugin that understands them.

Two ways to load. Strict (``load_catalog()``): every problem of every file is
raised at once, the way to check a catalog. Isolated
(``load_catalog(isolate_fragments=True)``, what runs and the gateway use): a
problem disables only what it concerns, so one broken fragment never takes
the other routes down. A file that cannot be read, or whose entries are
invalid (a bad key, a duplicate id, a model of an unknown route), is left out
whole; a route its driver refuses (or whose driver is not installed) is left
out alone with its models. ``Catalog.disabled`` says why for each route.

A successful load is kept in-process and served again while every source
file has the same identity (inode, size, mtime_ns and ctime_ns of the
built-in file and of each ``catalog.d`` fragment, the same set of fragments)
and the same plugin system validated it. A file changed within
``RACY_SECONDS`` of a load is not trusted to show a later change in its
timestamps (a filesystem's clock is coarse), so that load is not kept: a
changed catalog is always seen at once, never a stale one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mmo_kernel.config.catalog import Catalog, Model, Route
from mmo_kernel.config.toml_input import (
    DOCUMENT_KEY,
    DocumentError,
    problem,
    read_toml,
    schema_version_problem,
    validation_problems,
)
from mmo_kernel.errors import UnknownDriverError
from mmo_kernel.plugin import manager as plugin_manager
from mmo_kernel.plugin.drivers import RouteDriver
from mmo_kernel.plugin.manager import route_driver
from mmo_kernel.state import paths, redaction

BUILTIN_CATALOG = "catalog_builtin.toml"
FRAGMENT_DIR = "catalog.d"
TOP_LEVEL_KEYS = ("schema_version", "routes", "models")
RACY_SECONDS = 2.0
"""A load is kept only when every source file is older than this (see the module docstring)."""


def builtin_catalog_path() -> Path:
    """The catalog TOML shipped as package data of ``mmo_kernel``."""
    return Path(str(resources.files("mmo_kernel.config") / BUILTIN_CATALOG))


def fragment_paths(config_dir: Path | None = None) -> list[Path]:
    """``<config dir>/catalog.d/*.toml`` sorted by file name (the merge order)."""
    folder = (config_dir if config_dir is not None else paths.config_dir()) / FRAGMENT_DIR
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("*.toml") if p.is_file()), key=lambda p: p.name)


class _Merge:
    """Accumulates entries from several files, remembering where each came from."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.models: dict[str, Model] = {}
        self.sources: dict[str, Path] = {}
        self.problems: list[str] = []
        self.file_problems: dict[Path, list[str]] = {}
        """The same problems by the file they make unusable."""
        self.route_problems: dict[str, list[str]] = {}
        """Problems a route's driver found (route id -> problems); only that route is affected."""

    def report(self, file: Path, texts: Iterable[str]) -> None:
        texts = list(texts)
        self.problems.extend(texts)
        self.file_problems.setdefault(file, []).extend(texts)

    def report_route(self, route_id: str, text: str) -> None:
        self.problems.append(text)
        self.route_problems.setdefault(route_id, []).append(text)

    def claim(self, key: str, file: Path) -> bool:
        """Record ``key`` as defined in ``file``; a second definition is a problem."""
        if key in self.sources:
            self.report(file, [
                problem(file, key, f"already defined in {self.sources[key]} (ids must be unique)")
            ])
            return False
        self.sources[key] = file
        return True

    def add_file(self, file: Path) -> None:
        try:
            data = read_toml(file)
        except DocumentError as exc:
            self.report(file, exc.problems)
            return
        found = schema_version_problem(data, file, "catalog")
        if found:
            self.report(file, [found])
            return
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                self.report(file, [
                    problem(
                        file, key, f"unknown key (a catalog file has {', '.join(TOP_LEVEL_KEYS)})"
                    )
                ])
        for section in ("routes", "models"):
            for key, table in self._tables(data, section, file).items():
                self._add(section, key, table, file)

    def _tables(self, data: dict[str, Any], section: str, file: Path) -> dict[str, dict]:
        value = data.get(section, {})
        if not isinstance(value, dict):
            self.report(file, [problem(file, section, "must be a table of tables")])
            return {}
        out = {}
        for key, table in value.items():
            if isinstance(table, dict):
                out[key] = table
            else:
                self.report(file, [problem(file, f"{section}.{key}", "must be a table")])
        return out

    def _add(self, section: str, key: str, table: dict[str, Any], file: Path) -> None:
        """Validate one ``routes.<id>`` / ``models.<key>`` table and claim its id."""
        where = f"{section}.{key}"
        if "id" in table:
            self.report(file, [
                problem(file, f"{where}.id", "unknown key (the id is the table name)")
            ])
            return
        entry_class: type[Route] | type[Model] = Route if section == "routes" else Model
        try:
            entry = entry_class.model_validate({"id": key, **table})
        except ValidationError as exc:
            self.report(file, validation_problems(exc, file, where))
            return
        if not self.claim(where, file):
            return
        if isinstance(entry, Route):
            self.routes[key] = entry
        else:
            self.models[key] = entry


def _cross_check(merge: _Merge, left_out: Iterable[str] = ()) -> None:
    """Models name known routes, modalities fit their route, defaults exist.

    A model of a route in ``left_out`` (declared by a file that was left out)
    is dropped quietly: it goes with its route.
    """
    left_out = set(left_out)
    for key, model in list(merge.models.items()):
        file = merge.sources[f"models.{key}"]
        route = merge.routes.get(model.route)
        if route is None and model.route in left_out:
            del merge.models[key]
            continue
        if route is None:
            merge.report(file, [
                problem(
                    file,
                    f"models.{key}.route",
                    f"unknown route {model.route!r}; "
                    f"known routes: {', '.join(sorted(merge.routes))}",
                )
            ])
            continue
        extra = sorted(set(model.modalities) - set(route.transport_modalities))
        if extra:
            merge.report(file, [
                problem(
                    file,
                    f"models.{key}.modalities",
                    f"{extra} not carried by route {route.id!r} (transport_modalities "
                    f"{route.transport_modalities})",
                )
            ])
    for route_id, route in merge.routes.items():
        default = route.default_model
        if default is not None and getattr(merge.models.get(default), "route", None) != route_id:
            file = merge.sources[f"routes.{route_id}"]
            merge.report(file, [
                problem(
                    file,
                    f"routes.{route_id}.default_model",
                    f"{default!r} is not a model of route {route_id!r}",
                )
            ])


def _driver_message(exc: ValueError, file: Path, key: str) -> str:
    text = str(exc)
    return text if text.startswith(str(file)) else problem(file, key, text)


def _check_with_drivers(merge: _Merge) -> None:
    """Each route and model is validated by the route driver its route names."""
    drivers: dict[str, RouteDriver] = {}
    for route_id, route in merge.routes.items():
        file = merge.sources[f"routes.{route_id}"]
        where = f"{file}: routes.{route_id}"
        try:
            driver = route_driver(route.driver)
        except UnknownDriverError as exc:
            merge.report_route(route_id, problem(file, f"routes.{route_id}.driver", str(exc)))
            continue
        try:
            driver.validate_options(route.options, where)
            driver.validate_route(route, where)
        except ValueError as exc:
            merge.report_route(route_id, _driver_message(exc, file, f"routes.{route_id}"))
            continue
        drivers[route_id] = driver
    for key, model in merge.models.items():
        if model.route not in drivers:
            continue
        file = merge.sources[f"models.{key}"]
        try:
            route = merge.routes[model.route]
            drivers[model.route].validate_model(model, route, f"{file}: models.{key}")
        except ValueError as exc:
            merge.report_route(model.route, _driver_message(exc, file, f"models.{key}"))


def _declared_routes(file: Path) -> list[str]:
    """The route ids a file that was left out declares, as far as it can be read."""
    try:
        routes = read_toml(file).get("routes")
    except DocumentError:
        return []
    return [str(key) for key in routes] if isinstance(routes, dict) else []


def _reason(problems: list[str]) -> str:
    """One line for a disabled route: its first problem, and how many more there are."""
    more = len(problems) - 1
    return problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _register_credentials(routes: Iterable[Route]) -> None:
    # the values of every credential the catalog names are redacted from MMO's files
    redaction.register_names(name for route in routes
                             for name in (route.credential_env, *route.env_http_headers.values())
                             if name)


def _catalog(merge: _Merge, disabled: dict[str, str], problems: list[str]) -> Catalog:
    _register_credentials(merge.routes.values())
    return Catalog(routes=dict(merge.routes), models=dict(merge.models),
                   sources=dict(merge.sources), disabled=disabled, problems=tuple(problems))


def _load_isolated(files: list[Path]) -> Catalog:
    """Leave out what is broken, keep the rest (see the module docstring)."""
    left_out: dict[Path, list[str]] = {}
    while True:  # each round leaves out at least one more file, so this ends
        merge = _Merge()
        for file in files:
            if file not in left_out:
                merge.add_file(file)
        declared = {rid: file for file in left_out for rid in _declared_routes(file)
                    if rid not in merge.routes}
        _cross_check(merge, declared)
        if not merge.file_problems:
            break
        left_out.update(merge.file_problems)
    _check_with_drivers(merge)
    disabled = {rid: _reason(left_out[file]) for rid, file in declared.items()}
    for route_id, found in merge.route_problems.items():
        disabled[route_id] = _reason(found)
        del merge.routes[route_id]
        for key in [k for k, m in merge.models.items() if m.route == route_id]:
            del merge.models[key]
    problems = [text for found in left_out.values() for text in found]
    problems += [text for found in merge.route_problems.values() for text in found]
    return _catalog(merge, dict(sorted(disabled.items())), problems)


Stamp = tuple[tuple[str, int, int, int, int, int], ...]
"""Each source file's ``(path, device, inode, size, mtime_ns, ctime_ns)``, in merge order."""

_cache_lock = threading.Lock()
_cache: dict[tuple[str, bool], tuple[Stamp, object, Catalog]] = {}
"""``(fragment dir, isolate_fragments)`` -> the stamp and plugin system of a kept load."""


def _now_ns() -> int:
    return time.time_ns()


def _stamp(files: list[Path]) -> tuple[Stamp, bool]:
    """The files' identities, and whether all are old enough to be trusted (not racy)."""
    trusted_before = _now_ns() - int(RACY_SECONDS * 1e9)
    stamp: list[tuple[str, int, int, int, int, int]] = []
    trusted = True
    for file in files:
        info = os.stat(file)
        stamp.append((str(file), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
                      info.st_ctime_ns))
        if max(info.st_mtime_ns, info.st_ctime_ns) >= trusted_before:
            trusted = False
    return tuple(stamp), trusted


def _copy(catalog: Catalog) -> Catalog:
    """A kept catalog as a fresh object (its mappings are the caller's to keep)."""
    _register_credentials(catalog.routes.values())
    return Catalog(routes=dict(catalog.routes), models=dict(catalog.models),
                   sources=dict(catalog.sources), disabled=dict(catalog.disabled),
                   problems=catalog.problems)


def clear_catalog_cache() -> None:
    """Forget every kept load (the next ``load_catalog`` parses the files again)."""
    with _cache_lock:
        _cache.clear()


def load_catalog(config_dir: Path | None = None, *, isolate_fragments: bool = False) -> Catalog:
    """Merge, cross-check and driver-validate.

    By default every problem is raised at once (``DocumentError``). With
    ``isolate_fragments`` nothing is raised for a broken file or route: it is
    left out, listed in ``Catalog.disabled`` / ``Catalog.problems``. A load
    whose source files are unchanged since a kept one is served from memory
    (see the module docstring).
    """
    builtin = builtin_catalog_path()
    if not builtin.is_file():
        raise DocumentError([problem(builtin, DOCUMENT_KEY, "built-in catalog is missing")])
    folder = (config_dir if config_dir is not None else paths.config_dir()) / FRAGMENT_DIR
    files = [builtin, *fragment_paths(config_dir)]
    try:
        stamp, trusted = _stamp(files)
    except OSError:  # a file went away meanwhile: load it the usual way (it reports it)
        stamp, trusted = (), False
    key = (str(folder.absolute()), isolate_fragments)
    system = plugin_manager._system
    with _cache_lock:
        kept = _cache.get(key)
    if kept is not None and trusted and kept[0] == stamp and kept[1] is system \
            and system is not None:
        return _copy(kept[2])
    catalog = _load(files, isolate_fragments)
    system = plugin_manager._system  # the drivers that validated it
    with _cache_lock:
        if trusted and system is not None:
            _cache[key] = (stamp, system, catalog)
        else:
            _cache.pop(key, None)
    return _copy(catalog)


def _load(files: list[Path], isolate_fragments: bool) -> Catalog:
    if isolate_fragments:
        return _load_isolated(files)
    merge = _Merge()
    for file in files:
        merge.add_file(file)
    _cross_check(merge)
    if not merge.problems:
        _check_with_drivers(merge)
    if merge.problems:
        raise DocumentError(merge.problems)
    return _catalog(merge, {}, [])
