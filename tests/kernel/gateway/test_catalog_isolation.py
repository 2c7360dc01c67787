"""One broken catalog fragment disables only its own routes (spec 08, issue 14 item 7).

Through the real surfaces: the ``mmo catalog`` CLI and the real gateway process,
with fragments that cannot be read, name a driver that is not installed, or
carry an invalid entry, next to fragments that are fine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.gateway_harness import Gateway

from mmo_kernel.config.catalog_load import load_catalog
from mmo_kernel.config.toml_input import DocumentError

MMO = Path(sys.executable).with_name("mmo")
GOOD = """\
schema_version = 1
[routes.good_route]
name = "Good"
driver = "codex_custom"
api_operator = "acme"
access_product = "acme_api"
wire_protocol = "openai_chat"
base_url = "https://api.acme.example/v1"

[models.good_route__coder]
route = "good_route"
upstream_id = "coder-1"
maker = "acme"
"""
UNREADABLE = "schema_version = 1\n[routes.half\nname = 1\n"
NO_DRIVER = """\
schema_version = 1
[routes.teleported]
name = "Teleported"
driver = "teleport"
api_operator = "me"
access_product = "mine"

[models.teleported__fast]
route = "teleported"
upstream_id = "fast"
maker = "me"

[routes.sibling]
name = "Sibling"
driver = "codex_custom"
api_operator = "me"
access_product = "mine"
wire_protocol = "openai_chat"
base_url = "https://api.sibling.example/v1"
"""
BAD_ENTRY = """\
schema_version = 1
[routes.typo_route]
name = "Typo"
driver = "codex_custom"
api_operator = "me"
access_product = "mine"
base_url = "https://api.typo.example/v1"
stream_max_retries = 2

[routes.typo_sibling]
name = "Typo sibling"
driver = "codex_custom"
api_operator = "me"
access_product = "mine"
base_url = "https://api.typo.example/v1"
"""


def write_fragments(config_dir: Path, **fragments: str) -> dict[str, Path]:
    folder = config_dir / "catalog.d"
    folder.mkdir(exist_ok=True)
    paths = {}
    for name, text in fragments.items():
        paths[name] = folder / f"{name}.toml"
        paths[name].write_text(textwrap.dedent(text), encoding="utf-8")
    return paths


def mmo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(MMO), *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=dict(os.environ))


@pytest.fixture
def broken_catalog(mmo_env) -> dict[str, Path]:
    return write_fragments(mmo_env.config_dir, a_good=GOOD, b_unreadable=UNREADABLE,
                           c_no_driver=NO_DRIVER, d_bad_entry=BAD_ENTRY)


def test_catalog_routes_lists_the_working_routes_and_why_the_others_are_disabled(
        broken_catalog):
    result = mmo("catalog", "routes", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {row["id"]: row for row in report["routes"]}
    assert rows["local_scripted"]["available"] is True
    assert rows["good_route"]["models"] == 1 and rows["good_route"]["disabled"] is False
    teleported = rows["teleported"]
    assert teleported["available"] is False and teleported["disabled"] is True
    assert str(broken_catalog["c_no_driver"]) in teleported["reason"]
    assert "unknown route drivers driver 'teleport'" in teleported["reason"]
    assert rows["sibling"]["disabled"] is False  # its driver is installed
    for route_id in ("typo_route", "typo_sibling"):  # an invalid entry: the whole file is out
        assert rows[route_id]["disabled"] is True
        assert "routes.typo_route.stream_max_retries: unknown key" in rows[route_id]["reason"]
    assert any(str(broken_catalog["b_unreadable"]) in p and "invalid TOML" in p
               for p in report["problems"])

    table = mmo("catalog", "routes")
    assert table.returncode == 0, table.stderr
    [line] = [line for line in table.stdout.splitlines() if line.startswith("teleported")]
    assert "no: disabled: " in line
    assert f"{broken_catalog['b_unreadable']}" in table.stderr  # every problem, on stderr


def test_catalog_models_keeps_the_working_models(broken_catalog):
    result = mmo("catalog", "models", "--json")
    assert result.returncode == 0, result.stderr
    keys = {model["id"] for model in json.loads(result.stdout)["models"]}
    assert {"local_scripted__scripted", "good_route__coder"} <= keys
    assert "teleported__fast" not in keys
    assert "invalid TOML" in mmo("catalog", "models").stderr


def test_checking_the_catalog_still_reports_every_problem(broken_catalog, mmo_env):
    with pytest.raises(DocumentError) as info:
        load_catalog(mmo_env.config_dir)
    text = str(info.value)
    assert "invalid TOML" in text and "stream_max_retries: unknown key" in text
    isolated = load_catalog(mmo_env.config_dir, isolate_fragments=True)
    assert isolated.route("good_route").id == "good_route"
    with pytest.raises(ValueError, match="route 'teleported' is disabled: .*teleport"):
        isolated.route("teleported")
    with pytest.raises(ValueError, match="model 'teleported__fast' is disabled"):
        isolated.model("teleported__fast")


def test_the_gateway_keeps_serving_other_routes_and_logs_the_disabled_one(
        mmo_env, gateway_process):
    # the gateway was started with a good catalog; fragments break while it runs
    paths = write_fragments(mmo_env.config_dir, b_unreadable=UNREADABLE, c_no_driver=NO_DRIVER)
    client = Gateway(gateway_process.url, mmo_env.state_dir / "gateway" / "requests.jsonl")
    body = {"model": "local_scripted__scripted", "stream": True, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
    scripted = client.responses("local_scripted", body)
    assert scripted.status == 200 and scripted.frames()[-1]["type"] == "response.completed"
    disabled = client.responses("teleported", {**body, "model": "teleported__fast"})
    assert disabled.status == 400
    error = disabled.json()["error"]
    assert error["code"] == "route_disabled"
    assert error["message"].startswith("route 'teleported' is disabled: ")
    assert "unknown route drivers driver 'teleport'" in error["message"]
    models = {m["id"] for m in client.request("GET", "/v1/models").json()["data"]}
    assert "local_scripted__scripted" in models and "sdk_chat__m1" in models
    assert "teleported__fast" not in models

    records = gateway_process.log()
    assert [(r["route"], r["status"]) for r in records] == [("local_scripted", 200),
                                                           ("teleported", 400)]
    assert "unknown route drivers driver 'teleport'" in records[1]["error"]
    log = gateway_process.gateway_log()
    assert str(paths["b_unreadable"]) in log and str(paths["c_no_driver"]) in log


def test_a_profile_still_compiles_and_names_the_disabled_model_it_needs(broken_catalog,
                                                                        mmo_env):
    compiled = mmo("profiles", "compile", "adaptive-engineering", "--offline", "--json")
    assert compiled.returncode == 0, compiled.stderr
    shown = mmo("profiles", "show", "adaptive-engineering")
    assert shown.returncode == 0, shown.stderr

    assert mmo("profiles", "clone", "adaptive-engineering", "my-team").returncode == 0
    profile = mmo_env.config_dir / "profiles" / "my-team" / "profile.toml"
    text = profile.read_text(encoding="utf-8")
    profile.write_text(text.replace('model = "opencode_go_openai_chat__glm_5_1"',
                                    'model = "teleported__fast"'), encoding="utf-8")
    checked = mmo("profiles", "validate", "my-team")
    assert checked.returncode == 1
    assert "model 'teleported__fast' is disabled with its route 'teleported': " in checked.stdout
    assert "unknown route drivers driver 'teleport'" in checked.stdout


def test_a_catalog_the_gateway_cannot_load_at_all_is_a_logged_500(mmo_env, mmo_process_guard,
                                                                   monkeypatch, tmp_path):
    from mmo_kernel.gateway import ensure_gateway, stop_gateway

    site = tmp_path / "site"
    dist = site / "mmo_broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mmo-broken-plugin\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text("[mmo.plugins]\nbroken = mmo_broken_plugin\n")
    (site / "mmo_broken_plugin.py").write_text("raise ImportError('this plugin is broken')\n")
    monkeypatch.setenv("PYTHONPATH", str(site))  # only the gateway process sees it
    record = ensure_gateway()
    try:
        client = Gateway(record["url"], mmo_env.state_dir / "gateway" / "requests.jsonl")
        answer = client.responses("local_scripted", {"model": "local_scripted__scripted",
                                                     "stream": True, "input": []})
    finally:
        stop_gateway()
    assert answer.status == 500 and answer.json()["error"]["code"] == "catalog_unavailable"
    assert "this plugin is broken" in answer.json()["error"]["message"]
    [logged] = client.log()
    assert logged["route"] == "local_scripted" and logged["status"] == 500
    assert "this plugin is broken" in logged["error"]
    gateway_log = (mmo_env.state_dir / "gateway" / "gateway.log").read_text()
    assert "HTTP 500: catalog unavailable" in gateway_log and "this plugin is broken" in gateway_log
