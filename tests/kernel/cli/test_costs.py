"""Costs in ``mmo jobs``, ``mmo job show``, ``mmo sessions`` and ``mmo session show``.

Offline sessions on the stand-in, on a scripted route whose model the catalog
prices: the cost is the recorded tokens times the price, from the snapshot the
session was compiled with; an unpriced model shows ``null`` / ``n/a``.
"""

from __future__ import annotations

from decimal import Decimal

from .conftest import TURN_PROFILE, mmo, mmo_json, wait_until

PRICED = "priced_scripted__priced"
FLAGSHIP = "flagship_escalation"
FRAGMENT = """schema_version = 1
[routes.priced_scripted]
name = "Scripted model with a price"
driver = "scripted"
api_operator = "mmo"
access_product = "offline"
billing_mode = "none"
transport_modalities = ["text", "image"]
preserves_tool_media = true
tool_result_modalities = ["text", "image"]

[models.priced_scripted__priced]
route = "priced_scripted"
upstream_id = "scripted"
maker = "mmo"
modalities = ["text", "image"]
price = {{ input = {input}, output = {output}, cached_input = 0.25 }}
"""


def _price(mmo_env, input: float, output: float) -> None:
    folder = mmo_env.config_dir / "catalog.d"
    folder.mkdir(exist_ok=True)
    (folder / "50-priced.toml").write_text(FRAGMENT.format(input=input, output=output))


def _cost(usage: dict, input: str, output: str) -> float:
    """tokens x USD per million tokens (the stand-in reports no cached input)."""
    return float((usage["input_tokens"] * Decimal(input)
                  + usage["output_tokens"] * Decimal(output)) / 1_000_000)


def _finished_job(session_id: str) -> dict:
    from mmo_kernel.jobs.listing import load_job
    from mmo_kernel.jobs.records import TERMINAL_JOB_STATUSES
    from mmo_kernel.jobs.spawn import spawn_job

    job = spawn_job(session_id, "escalation_lead", None, FLAGSHIP, task_kind="second opinion",
                    task="Review the plan")
    return wait_until(lambda: (lambda j: j["status"] in TERMINAL_JOB_STATUSES and j)(
        load_job(job["job_id"])), timeout=60, what="the job to end")


def _row(stdout: str, job_id: str) -> tuple[list[str], str]:
    lines = stdout.splitlines()
    (row,) = [line for line in lines[1:] if job_id.startswith(line.split()[0])]
    return lines[0].split(), row


def test_a_priced_job_costs_its_tokens_times_the_price_and_keeps_it(live, mmo_env):
    from mmo_kernel.sessions.create import create_session

    _price(mmo_env, 2.5, 10)
    session = create_session(TURN_PROFILE, cwd=live, bindings={"*": PRICED})
    job = _finished_job(session["session_id"])
    usage = job["usage"]
    assert usage["input_tokens"] > 100 and usage["output_tokens"] > 0, usage
    expected = _cost(usage, "2.5", "10")

    (listed,) = mmo_json("jobs")["jobs"]
    assert listed["job_id"] == job["job_id"] and listed["cost_usd"] == expected
    shown = f"${Decimal(str(expected)):.4f}"
    header, row = _row(mmo("jobs").stdout, job["job_id"])
    assert "COST" in header and shown in row.split()
    assert mmo_json("job", "show", job["job_id"])["cost_usd"] == expected
    assert f"cost_usd               {shown}" in mmo("job", "show", job["job_id"]).stdout

    detail = mmo_json("session", "show", session["session_id"])
    assert [j["cost_usd"] for j in detail["jobs"]] == [expected]
    assert detail["session"]["root_cost_usd"] is None  # the root never ran: no usage yet
    text = mmo("session", "show", session["session_id"]).stdout
    assert shown in text.split("\njobs (1)\n")[1]

    # a later price change applies to new sessions, never to work already recorded
    _price(mmo_env, 5, 20)
    assert any(m["id"] == PRICED and m["price"]["input"] == 5.0
               for m in mmo_json("catalog", "models")["models"])
    assert mmo_json("jobs")["jobs"][0]["cost_usd"] == expected
    assert shown in _row(mmo("jobs").stdout, job["job_id"])[1].split()


def test_a_priced_root_shows_its_cost_in_the_session_listings(live, mmo_env):
    from mmo_kernel.lifecycle.root_exec import run_root_exec

    _price(mmo_env, 1.25, 8)
    out = run_root_exec(TURN_PROFILE, live, "Summarize the repo", 60, bindings={"*": PRICED})
    assert out["status"] == "completed", out
    sid = out["session"]["session_id"]
    usage = out["session"]["root_usage"]
    expected = _cost(usage, "1.25", "8")

    (listed,) = mmo_json("sessions", "--all")["sessions"]
    assert listed["session_id"] == sid and listed["root_cost_usd"] == expected
    assert mmo_json("session", "show", sid)["session"]["root_cost_usd"] == expected
    shown = f"${Decimal(str(expected)):.4f}"
    lines = mmo("sessions", "--all").stdout.splitlines()
    assert lines[0].split()[-1] == "COST" and lines[1].split()[-1] == shown
    summary = mmo("session", "show", sid).stdout.splitlines()
    assert any(line.split() == ["cost", shown] for line in summary), summary


def test_without_a_price_the_cost_is_null_and_na(live):
    from mmo_kernel.sessions.create import create_session

    run = mmo("run", TURN_PROFILE, "Summarize the repo", "--offline", "--wall", "60",
              "--cwd", str(live))
    assert run.returncode == 0, run.stderr
    session = create_session(TURN_PROFILE, cwd=live, bindings={"*": "local_scripted"})
    job = _finished_job(session["session_id"])
    assert job["usage"]["input_tokens"] > 0  # usage is known, the price is not

    (listed,) = mmo_json("jobs")["jobs"]
    assert "cost_usd" in listed and listed["cost_usd"] is None
    assert mmo_json("job", "show", job["job_id"])["cost_usd"] is None
    assert "n/a" in _row(mmo("jobs").stdout, job["job_id"])[1].split()
    assert "cost_usd               n/a" in mmo("job", "show", job["job_id"]).stdout
    sessions = mmo_json("sessions", "--all")["sessions"]
    ran = [s for s in sessions if s.get("root_usage")]
    assert len(ran) == 1 and ran[0]["root_cost_usd"] is None
    assert all(s["root_cost_usd"] is None for s in sessions)
    lines = mmo("sessions", "--all").stdout.splitlines()
    assert all(line.split()[-1] == "n/a" for line in lines[1:]), lines
