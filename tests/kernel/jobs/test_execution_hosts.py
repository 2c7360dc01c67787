"""Jobs run on the execution host their agent's profile names (``[agents.<id>] host``).

The host here is a separately distributed plugin (``tests/fixtures/mmo-example-host``),
pip-installed into a private directory that only the mmo processes see: its
``example_host`` runs a worker with the app_server machinery but records every launch
it makes, so the test can tell which host the kernel chose. Everything runs offline on
the Codex stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.example_host import LAUNCH_LOG, install_example_host, with_site

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
JOB_LAB = FIXTURES / "profiles" / "job-lab"
MMO = Path(sys.executable).with_name("mmo")
DELEGATE = "\n".join([
    "Delegate the greeting to a worker, then accept its answer.",
    'FAKE_MCP_CALL mmo_mesh.agent_spawn {"agent": "plain", "task": "Say hello"}',
    'FAKE_MCP_CALL mmo_mesh.agents_wait {"job_ids": ["{{1.job_id}}"], "timeout_seconds": 90}',
    'FAKE_MCP_CALL mmo_mesh.agent_result {"job_id": "{{1.job_id}}"}',
    'FAKE_MCP_CALL mmo_mesh.agent_result_accept '
    '{"job_id": "{{1.job_id}}", "reason": "the worker answered"}',
])


@pytest.fixture(scope="module")
def host_site(tmp_path_factory) -> Path:
    return install_example_host(tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("build"))


@pytest.fixture
def offline(mmo_env, mmo_standin):
    yield mmo_env
    from mmo_kernel.gateway.process import stop_gateway

    stop_gateway()


def run_mmo(args: list[str], site: Path | None, timeout: float = 240):
    return subprocess.run([str(MMO), *args], capture_output=True, text=True, env=with_site(site),
                          stdin=subprocess.DEVNULL, timeout=timeout)


def team_with_worker_host(tmp_path: Path, host: str) -> Path:
    """A copy of the job-lab team whose ``plain`` worker names ``host``."""
    team = tmp_path / f"team-on-{host}"
    shutil.copytree(JOB_LAB, team)
    profile = team / "profile.toml"
    text = profile.read_text()
    assert text.count("[agents.plain]\n") == 1
    text = text.replace('id = "job-lab"', f'id = "team-on-{host.replace("_", "-")}"')
    profile.write_text(text.replace("[agents.plain]\n", f'[agents.plain]\nhost = "{host}"\n'))
    return team


def test_a_worker_whose_profile_names_another_installed_host_runs_on_it(
        host_site, offline, mmo_git_workspace, tmp_path):
    from mmo_kernel.jobs.records import job_file, job_host_name, read_job_record
    from mmo_kernel.state.audit import read_jsonl

    team = team_with_worker_host(tmp_path, "example_host")
    proc = run_mmo(["run", str(team), DELEGATE, "--cwd", str(mmo_git_workspace), "--offline",
                    "--wall", "180", "--json"], host_site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outcome = json.loads(proc.stdout)
    session = outcome["session"]
    assert outcome["status"] == "completed", session.get("error")
    assert session["root_execution_host"] == "app_server"  # the root keeps the default host

    [job_id] = [p.name for p in (offline.state_dir / "jobs").iterdir()]
    record = read_job_record(job_id)
    assert (record["agent"], record["status"], record["host"]) == (
        "plain", "completed", "example_host")
    assert job_file(job_id, "result.md").read_text() == "FAKE_CODEX_OK"
    # the fixture host made the one launch, of a job that already named it
    launches = read_jsonl(job_file(job_id, LAUNCH_LOG))
    assert [(row["host"], row["recorded_host"], row["status"]) for row in launches] == [
        ("example_host", "example_host", "queued")]
    assert job_file(job_id, "runner.log").read_text().startswith(
        f"example_host: launching job {job_id}\n")

    # "is the job's host running the installed code" asks the job's own host: without
    # the plugin there is no such host, so the answer cannot be current
    def listed(site: Path | None) -> dict:
        out = run_mmo(["jobs", "--session", session["session_id"], "--json"], site, 60)
        assert out.returncode == 0, out.stderr
        [job] = json.loads(out.stdout)["jobs"]
        return job

    assert listed(host_site)["runtime_current"] is True
    assert listed(None)["runtime_current"] is False

    # a record from before jobs recorded their host runs on its agent's profile host
    legacy = {k: v for k, v in record.items() if k != "host"}
    assert job_host_name(legacy) == "example_host"


def test_a_profile_naming_an_uninstalled_host_is_refused_at_compile_time(host_site, mmo_env,
                                                                           tmp_path):
    from mmo_kernel.profiles.snapshots import compile_profile

    team = team_with_worker_host(tmp_path, "example_host")
    with pytest.raises(ValueError) as refused:
        compile_profile(team)  # this process does not have the fixture host installed
    message = str(refused.value)
    assert "agents.plain.host" in message and "'example_host'" in message
    assert "installed: app_server." in message

    # the list is what is installed, not a fixed set
    missing = team_with_worker_host(tmp_path, "missing_host")
    script = ("import sys; from mmo_kernel.profiles.snapshots import compile_profile; "
              "compile_profile(sys.argv[1])")
    out = subprocess.run([sys.executable, "-c", script, str(missing)], capture_output=True,
                         text=True, env=with_site(host_site), stdin=subprocess.DEVNULL, timeout=60)
    assert out.returncode != 0
    assert "'missing_host'" in out.stderr and "installed: app_server, example_host." in out.stderr


CREATE_AND_SPAWN = """
import json, sys
from mmo_kernel.jobs.spawn import spawn_job
from mmo_kernel.sessions.create import create_session
session = create_session(sys.argv[1], cwd=sys.argv[2])
job = spawn_job(session["session_id"], "lead", None, "plain", task="Slow work FAKE_SLEEP=8")
print(json.dumps([session["session_id"], job["job_id"]]))
"""


def test_a_lost_worker_is_relaunched_on_the_host_it_runs_on(
        host_site, offline, mmo_git_workspace, tmp_path):
    """``continue`` after the runner died goes back to the job's host, and a record from
    before jobs recorded their host has its agent's profile host written down."""
    from support.waiting import wait_until

    from mmo_kernel.jobs.listing import load_job
    from mmo_kernel.jobs.records import job_file, read_job_record
    from mmo_kernel.jobs.waiting import wait_for_jobs
    from mmo_kernel.state.audit import read_jsonl
    from mmo_kernel.state.files import atomic_write_json
    from mmo_kernel.state.processes import process_matches

    team = team_with_worker_host(tmp_path, "example_host")
    made = subprocess.run([sys.executable, "-c", CREATE_AND_SPAWN, str(team),
                           str(mmo_git_workspace)], capture_output=True, text=True,
                          env=with_site(host_site), stdin=subprocess.DEVNULL, timeout=120)
    assert made.returncode == 0, made.stderr
    sid, job_id = json.loads(made.stdout)
    wait_until(lambda: read_job_record(job_id).get("active_turn_id"), timeout=30,
               what="the job to start a turn")
    running = read_job_record(job_id)
    os.killpg(running["runner_pgid"], signal.SIGKILL)
    wait_until(lambda: load_job(job_id)["status"] == "suspended", timeout=15,
               what="the job to be reconciled to suspended")
    legacy = {k: v for k, v in read_job_record(job_id).items() if k != "host"}
    atomic_write_json(job_file(job_id, "metadata.json"), legacy)

    control = run_mmo(["job", "control", job_id, "continue", "--input", "Finish now.",
                       "--json"], host_site, 60)
    assert control.returncode == 0, control.stdout + control.stderr
    assert json.loads(control.stdout)["result"]["recovery_requested"] is True
    assert not wait_for_jobs([job_id], sid, 60)["timed_out_waiting"]
    done = read_job_record(job_id)
    assert (done["status"], done["host"]) == ("completed", "example_host")
    assert done["app_server_thread_id"] == running["app_server_thread_id"]
    launches = read_jsonl(job_file(job_id, LAUNCH_LOG))
    assert [(row["host"], row["recorded_host"], row["status"]) for row in launches] == [
        ("example_host", "example_host", "queued"), ("example_host", "example_host", "suspended")]
    wait_until(lambda: not process_matches(done.get("runner_pid"), done.get("runner_start_token")),
               timeout=15, what="the relaunched host to exit")
