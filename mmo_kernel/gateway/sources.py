"""Where the gateway reads credentials, settings and catalog entries.

They come from ``mmo_kernel.config.credentials``, ``mmo_kernel.config.settings`` and
``mmo_kernel.config.catalog_load.load_catalog``. The gateway checks them per request but
re-reads a file only when its ``stat`` changes (catalog files by mtime and
size, ``credentials.env`` by mtime, size, inode, mode and owner), so a
fragment added to ``catalog.d/`` or a key added to ``credentials.env`` is seen
without restarting the shared gateway, at the cost of a few ``stat`` calls.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mmo_kernel.config.catalog import Model, Route
from mmo_kernel.config.catalog_load import builtin_catalog_path, load_catalog
from mmo_kernel.gateway.request_log import now_iso
from mmo_kernel.state.paths import config_dir

_CONTROL = re.compile("[\x00-\x1f\x7f]")
_CONFIG_ENV = ("MMO_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME")
_config_dirs: dict[tuple[str | None, ...], str] = {}


def config_path(*parts: str) -> str:
    """``config_dir()/parts`` as a string, memoised on the variables that decide it.

    Building the ``Path`` on every request was a visible share of the
    gateway's per-request cost; the answer only changes with these variables.
    """
    key = tuple(os.environ.get(name) for name in _CONFIG_ENV)
    base = _config_dirs.get(key)
    if base is None:
        base = _config_dirs[key] = str(config_dir())
    return os.path.join(base, *parts)


class _CredentialsFile:
    """``credentials.env`` parsed once per version of the file (path, stat identity).

    The gateway looks a credential up on every request; re-reading and
    re-parsing the file each time was measurable. Any change of content
    (mtime, size, inode), mode or owner re-parses it, so edits, permission
    fixes and atomic replacements are seen on the next request, and the
    kernel's permission and syntax errors still apply.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._values: dict[str, str] = {}

    def values(self) -> dict[str, str]:
        from mmo_kernel.config.credentials import parse_credentials

        path = config_path("credentials.env")
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return {}
        key = (path, info.st_mtime_ns, info.st_size, info.st_ino, info.st_mode, info.st_uid)
        with self._lock:
            if key != self._key:
                self._values = parse_credentials(Path(path))
                self._key = key
            return self._values


_credentials_file = _CredentialsFile()


def credential_value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A non-empty environment value wins, else ``credentials.env`` (spec 02)."""
    from mmo_kernel.config.credentials import check_credential_value, valid_env_name

    if not valid_env_name(name):
        raise ValueError(f"invalid credential name {name!r}")
    env = os.environ if environ is None else environ
    value = env.get(name) or _credentials_file.values().get(name)
    if value and _CONTROL.search(value):
        check_credential_value(name, value)  # raises the kernel's error, naming only ``name``
    return value or None


class CredentialEnv(Mapping[str, str]):
    """The ``env`` a driver gets: request-supplied header values, then credentials.

    Codex sends ``env_http_headers`` values itself (from the agent's
    environment); the gateway puts them under their env var names so a driver
    looks every name up the same way. Values are resolved lazily and never
    enumerated, so nothing is read that the driver does not ask for.
    """

    def __init__(self, supplied: Mapping[str, str] | None = None) -> None:
        self._supplied = dict(supplied or {})

    def __getitem__(self, name: str) -> str:
        value = self._supplied.get(name) or credential_value(name)
        if not value:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._supplied)

    def __len__(self) -> int:
        return len(self._supplied)


def gateway_address() -> tuple[str, int]:
    """``(gateway_host, gateway_port)`` from settings.toml (defaults when absent)."""
    from mmo_kernel.config.settings import load_settings

    settings = load_settings()
    return settings.gateway_host, settings.gateway_port


class CatalogView:
    """Routes and models by id, reloaded when a catalog file changes.

    The catalog is loaded isolated: a broken fragment leaves out only its own
    routes (``disabled`` says why), and the problems are written to stderr
    (``gateway.log``) each time they change.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] | None = None
        self._routes: dict[str, Route] = {}
        self._models: dict[str, Model] = {}
        self.disabled: dict[str, str] = {}
        self._problems: tuple[str, ...] = ()
        self._dir_stamp: tuple[str, int | None] | None = None
        self._files: list[str] | None = None

    def _files_stamp(self) -> tuple[Any, ...]:
        """Cheap change detector: the fragment dir's mtime plus each catalog file's stat."""
        fragments = config_path("catalog.d")
        try:
            dir_stamp = os.stat(fragments).st_mtime_ns
        except OSError:
            dir_stamp = None
        key = (fragments, dir_stamp)
        if key != self._dir_stamp or self._files is None:
            builtin = builtin_catalog_path().parent
            self._files = [str(p) for p in sorted(builtin.glob("catalog*.toml"))
                           + sorted(Path(fragments).glob("*.toml"))]
            self._dir_stamp = key
        stamp: list[Any] = [key]
        for name in self._files:
            try:
                info = os.stat(name)
            except OSError:
                stamp.append((name, None))
                continue
            stamp.append((name, info.st_mtime_ns, info.st_size))
        return tuple(stamp)

    def _reload(self) -> None:
        loaded = load_catalog(isolate_fragments=True)
        self._routes = {rid: r for rid, r in loaded.routes.items() if isinstance(r, Route)}
        self._models = {mid: m for mid, m in loaded.models.items() if isinstance(m, Model)}
        self.disabled = dict(loaded.disabled)
        if loaded.problems != self._problems:
            self._problems = loaded.problems
            _report(loaded.problems)

    def current(self) -> tuple[dict[str, Route], dict[str, Model]]:
        with self._lock:
            stamp = self._files_stamp()
            if stamp != self._stamp:
                self._reload()
                self._stamp = stamp
            return self._routes, self._models


def _report(problems: tuple[str, ...]) -> None:
    """Catalog problems into the gateway's own log (its stderr is ``gateway.log``)."""
    if not problems:
        print(f"{now_iso()} mmo gateway: catalog problems fixed; every route is loaded",
              file=sys.stderr, flush=True)
        return
    print(f"{now_iso()} mmo gateway: catalog entries disabled until these problems are fixed:",
          file=sys.stderr)
    for found in problems:
        print(f"  {found}", file=sys.stderr)
    sys.stderr.flush()


class StaticCatalog:
    """A fixed set of routes and models (tests, benchmarks, embedding)."""

    def __init__(self, routes: list[Route], models: list[Model]) -> None:
        self._routes = {r.id: r for r in routes}
        self._models = {m.id: m for m in models}
        self.disabled: dict[str, str] = {}

    def current(self) -> tuple[dict[str, Route], dict[str, Model]]:
        return self._routes, self._models
