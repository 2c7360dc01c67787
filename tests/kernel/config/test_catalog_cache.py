"""The in-process catalog cache: a changed catalog is seen at once, an unchanged one parsed once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mmo_kernel.config import catalog_load
from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.config.toml_input import DocumentError
from mmo_kernel.plugin import manager as plugins
from mmo_kernel.state import redaction

ROUTE = """\
schema_version = 1
[routes.{route}]
name = "Cached test route"
driver = "codex_custom"
api_operator = "example"
access_product = "example_api"
wire_protocol = "openai_responses"
billing_mode = "api"
base_url = "https://example.invalid/v1"
credential_env = "{credential}"
transport_modalities = ["text"]
tool_result_modalities = ["text"]

[models.{route}__m]
route = "{route}"
upstream_id = "m"
maker = "example"
modalities = ["text"]
"""


def fragment_text(route: str = "route_aaaa", credential: str = "CACHED_API_KEY") -> str:
    return ROUTE.format(route=route, credential=credential)


def write_fragment(config_dir: Path, text: str, name: str = "50-cached.toml") -> Path:
    folder = config_dir / "catalog.d"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def parses(monkeypatch) -> list[Path]:
    """Every file the loader parses, in order."""
    seen: list[Path] = []
    real = catalog_load.read_toml

    def counting(path: Path):
        seen.append(Path(path))
        return real(path)

    monkeypatch.setattr(catalog_load, "read_toml", counting)
    return seen


@pytest.fixture
def trusting(monkeypatch):
    """Files are trusted however recently they changed (the identity alone decides)."""
    monkeypatch.setattr(catalog_load, "RACY_SECONDS", 0.0)


def test_the_same_files_are_parsed_once(mmo_env, parses, trusting):
    path = write_fragment(mmo_env.config_dir, fragment_text())
    first = load_catalog(isolate_fragments=True)
    parsed = list(parses)
    assert path in parsed and catalog_load.builtin_catalog_path() in parsed
    second = load_catalog(isolate_fragments=True)
    assert parses == parsed  # nothing parsed again
    assert second == first and second is not first
    assert "route_aaaa" in second.routes


def test_strict_and_isolated_loads_are_kept_apart(mmo_env, parses, trusting):
    write_fragment(mmo_env.config_dir, fragment_text())
    isolated = load_catalog(isolate_fragments=True)
    count = len(parses)
    strict = load_catalog()
    assert len(parses) > count  # a strict load is not served an isolated one
    count = len(parses)
    assert load_catalog() == strict == isolated
    assert len(parses) == count


def test_a_file_rewritten_in_place_is_seen_at_once(mmo_env):
    path = write_fragment(mmo_env.config_dir, fragment_text("route_aaaa"))
    assert "route_aaaa" in load_catalog(isolate_fragments=True).routes
    inode = path.stat().st_ino
    path.write_text(fragment_text("route_bbbb"), encoding="utf-8")  # same size, same inode
    assert path.stat().st_ino == inode
    routes = load_catalog(isolate_fragments=True).routes
    assert "route_bbbb" in routes and "route_aaaa" not in routes


def test_a_recently_changed_file_is_not_trusted_to_show_its_next_change(mmo_env, parses):
    write_fragment(mmo_env.config_dir, fragment_text())
    load_catalog(isolate_fragments=True)
    count = len(parses)
    load_catalog(isolate_fragments=True)
    assert len(parses) > count  # within RACY_SECONDS of its change: parsed again


def test_an_old_file_is_trusted_once_its_change_is_racy_no_more(mmo_env, parses, monkeypatch):
    write_fragment(mmo_env.config_dir, fragment_text())
    later = catalog_load._now_ns() + int((catalog_load.RACY_SECONDS + 1) * 1e9)
    monkeypatch.setattr(catalog_load, "_now_ns", lambda: later)
    load_catalog(isolate_fragments=True)
    count = len(parses)
    load_catalog(isolate_fragments=True)
    assert len(parses) == count


def test_a_replaced_file_with_the_same_size_and_mtime_is_seen(mmo_env, trusting):
    path = write_fragment(mmo_env.config_dir, fragment_text("route_aaaa"))
    assert "route_aaaa" in load_catalog(isolate_fragments=True).routes
    before = path.stat()
    replacement = path.with_name(".replacement")
    replacement.write_text(fragment_text("route_bbbb"), encoding="utf-8")
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, path)  # a new inode, same size and mtime
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    routes = load_catalog(isolate_fragments=True).routes
    assert "route_bbbb" in routes and "route_aaaa" not in routes


def test_an_in_place_edit_with_its_mtime_set_back_is_seen(mmo_env, trusting):
    path = write_fragment(mmo_env.config_dir, fragment_text("route_aaaa"))
    assert "route_aaaa" in load_catalog(isolate_fragments=True).routes
    before = path.stat()
    path.write_text(fragment_text("route_bbbb"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the ctime still moves
    routes = load_catalog(isolate_fragments=True).routes
    assert "route_bbbb" in routes and "route_aaaa" not in routes


def test_an_added_or_removed_fragment_is_seen(mmo_env, trusting):
    assert "route_aaaa" not in load_catalog(isolate_fragments=True).routes
    path = write_fragment(mmo_env.config_dir, fragment_text("route_aaaa"))
    assert "route_aaaa" in load_catalog(isolate_fragments=True).routes
    other = write_fragment(mmo_env.config_dir, fragment_text("route_cccc", "OTHER_API_KEY"),
                           name="60-other.toml")
    assert {"route_aaaa", "route_cccc"} <= set(load_catalog(isolate_fragments=True).routes)
    path.unlink()
    routes = load_catalog(isolate_fragments=True).routes
    assert "route_aaaa" not in routes and "route_cccc" in routes
    other.unlink()
    assert "route_cccc" not in load_catalog(isolate_fragments=True).routes


def test_a_broken_file_keeps_failing_a_strict_load_until_fixed(mmo_env, trusting):
    path = write_fragment(mmo_env.config_dir, fragment_text())
    load_catalog()
    path.write_text(fragment_text().replace('maker = "example"', "maker = 1"),
                    encoding="utf-8")
    for _ in range(2):
        with pytest.raises(DocumentError, match="maker"):
            load_catalog()
    assert "route_aaaa" in load_catalog(isolate_fragments=True).disabled
    path.write_text(fragment_text(), encoding="utf-8")
    assert "route_aaaa" in load_catalog().routes


def test_other_config_dirs_have_their_own_catalog(mmo_env, tmp_path, trusting):
    write_fragment(mmo_env.config_dir, fragment_text("route_aaaa"))
    other = tmp_path / "other-config"
    other.mkdir()
    write_fragment(other, fragment_text("route_bbbb"))
    assert "route_aaaa" in load_catalog(isolate_fragments=True).routes
    routes = load_catalog(other, isolate_fragments=True).routes
    assert "route_bbbb" in routes and "route_aaaa" not in routes
    assert "route_aaaa" in load_catalog(isolate_fragments=True).routes


def test_another_plugin_system_validates_again(mmo_env, parses, trusting, monkeypatch):
    write_fragment(mmo_env.config_dir, fragment_text())
    load_catalog(isolate_fragments=True)
    count = len(parses)
    monkeypatch.setattr(plugins, "_system", plugins.build_plugin_system())
    load_catalog(isolate_fragments=True)
    assert len(parses) > count
    count = len(parses)
    load_catalog(isolate_fragments=True)
    assert len(parses) == count


def test_a_served_catalog_is_the_callers_own_and_still_names_its_credentials(
        mmo_env, trusting, monkeypatch):
    write_fragment(mmo_env.config_dir, fragment_text(credential="CACHED_ROUTE_PASSPHRASE"))
    first = load_catalog(isolate_fragments=True)
    first.routes.clear()  # type: ignore[attr-defined]
    first.models.clear()  # type: ignore[attr-defined]
    monkeypatch.setattr(redaction, "_names", set())  # as in a process that never loaded it
    second = load_catalog(isolate_fragments=True)
    assert "route_aaaa" in second.routes and second.models
    assert "CACHED_ROUTE_PASSPHRASE" in redaction._names


def test_clear_catalog_cache_parses_again(mmo_env, parses, trusting):
    load_catalog(isolate_fragments=True)
    count = len(parses)
    catalog_load.clear_catalog_cache()
    load_catalog(isolate_fragments=True)
    assert len(parses) > count
