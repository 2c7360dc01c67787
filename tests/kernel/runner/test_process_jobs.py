"""Process jobs on the runner (spec 12 "Process execution") with real processes.

Every call goes through the runner's dispatcher, so each test sees the envelope a
host would get; every test stops its jobs (the manager fixture's teardown, and the
suite's process guard).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mmo_kernel.runner import dispatch
from mmo_kernel.runner.context import Policy, Project, RunnerConfig
from mmo_kernel.runner.process_jobs import ProcessJobs
from mmo_kernel.state import redaction
from mmo_kernel.state.processes import process_alive
from tests.support.waiting import Background, blocked_in, wait_until

PY = sys.executable
OMITTED = re.compile(r"^\[\.\.\. (\d+) bytes omitted \.\.\.\]$", re.M)


@pytest.fixture(autouse=True)
def _private(mmo_env):
    yield mmo_env


class Runner:
    """One runner's process-job side: the manager and a dispatcher for call frames."""

    def __init__(self, tmp_path: Path, policy: Policy, **options) -> None:
        self.project_root = Path(os.path.realpath(tmp_path / "code"))
        self.project_root.mkdir(exist_ok=True)
        self.state_dir = tmp_path / "runner-state"
        self.events: list[dict] = []
        self.policy = policy
        self.config = RunnerConfig(server_url="http://127.0.0.1:9", token="mmo_rt_test",
                                   client_id="laptop", owner="alice",
                                   project_registry_dir=tmp_path / "projects.d", policy=policy)
        self.projects = {"code": Project(id="code", name="code", description="",
                                         root=self.project_root, vcs="none")}
        options.setdefault("stop_grace_secs", 2.0)
        self.jobs = ProcessJobs(self.state_dir, policy, self.events.append, **options)

    def call(self, tool: str, session: str | None = "sess1", **arguments) -> dict:
        frame = {"type": "call", "call_id": "c", "tool": tool, "arguments": arguments,
                 "user": "alice", "session": session, "deadline_unix_ms": None}
        return dispatch.dispatch(frame, config=self.config, projects=self.projects,
                                 jobs=self.jobs, state_dir=self.state_dir)

    def script(self, script: str, **arguments) -> dict:
        arguments.setdefault("language", "python")
        return self.call("run_script", project="code", session_id="sess1",
                         script=textwrap.dedent(script), **arguments)

    def process(self, args: list[str], **arguments) -> dict:
        arguments.setdefault("timeout_secs", 60)
        return self.call("run_process", project="code", session_id="sess1",
                         executable=arguments.pop("executable", PY), args=args, **arguments)

    def observe(self, job_id: str, **arguments) -> dict:
        token = arguments.pop("token", None)
        item = {"job_id": job_id}
        if token is not None:
            item["after_observation_token"] = token
        env = self.call("observe_jobs", items=[item], **arguments)
        assert env["success"], env
        return env["output"]["items"][0]

    def join(self, job_ids: list[str], mode: str = "all") -> dict:
        env = self.call("wait_for_job_readiness", job_ids=job_ids, mode=mode, wait_secs=30)
        assert env["success"], env
        return env["output"]

    def write(self, job_id: str, input_id: str, **arguments) -> dict:
        return self.call("write_job_input", project="code", job_id=job_id, input_id=input_id,
                         **arguments)


@pytest.fixture
def runner(tmp_path):
    made: list[Runner] = []

    def make(**policy) -> Runner:
        options = {k: policy.pop(k) for k in ("keep_per_session",) if k in policy}
        policy.setdefault("allowed_executables", (Path(PY),))
        made.append(Runner(tmp_path, Policy(**policy), **options))
        return made[-1]

    yield make
    for one in made:
        one.jobs.stop_all(grace_secs=1.0)


def test_exit_code_is_kept_and_only_zero_succeeds(runner):
    r = runner()
    failed = r.script("import sys\nprint('half done')\nsys.exit(7)\n")
    assert failed["success"] is False
    out = failed["output"]
    assert out["error_kind"] == "nonzero_exit"
    assert (out["execution_state"], out["status"], out["exit_code"]) == ("completed", "failed", 7)
    assert out["stdout"] == "half done\n" and out["stdout_bytes"] == len("half done\n")
    assert out["stdout_truncated"] is False and out["stderr"] == ""
    assert out["job_id"].startswith("mmo_pjob_") and isinstance(out["duration_ms"], int)
    assert "7" in failed["error"]

    passed = r.script("print('ok')")
    assert passed["success"] is True
    assert passed["output"]["status"] == "completed" and passed["output"]["exit_code"] == 0
    statuses = [(e["job_id"], e["status"]) for e in r.events]
    assert (out["job_id"], "running") in statuses and (out["job_id"], "failed") in statuses


def test_log_pressure_keeps_head_tail_and_the_sentinel(runner):
    r = runner()
    env = r.script("""
        import sys
        for i in range(2500):
            print(f"line {i:04d} " + "x" * 40)
        print("SENTINEL-7f3a")
        print("to stderr", file=sys.stderr)
        sys.exit(7)
    """)
    out = env["output"]
    assert out["error_kind"] == "nonzero_exit" and out["exit_code"] == 7
    assert out["stdout_truncated"] is True and out["stderr"] == "to stderr\n"
    text = out["stdout"]
    assert text.startswith("line 0000 ") and text.rstrip("\n").endswith("SENTINEL-7f3a")
    assert text.count("SENTINEL-7f3a") == 1
    marker = OMITTED.search(text)
    assert marker, text[8000:8300]
    shown = len(text.encode()) - len(marker.group(0).encode()) - 1
    assert int(marker.group(1)) + shown == out["stdout_bytes"]
    head, tail = text[: marker.start()], text[marker.end() + 1:]
    assert len(head.encode()) <= 8 * 1024 and len(tail.encode()) <= 24 * 1024
    assert head.endswith("\n") and tail.startswith("line ")  # whole lines either side
    # the full log stays with the job
    observed = r.observe(out["job_id"], tail_lines=500)
    lines = observed["stdout_tail"].splitlines()
    assert len(lines) == 500 and lines[-1] == "SENTINEL-7f3a"
    assert lines[0] == "line 2001 " + "x" * 40
    log = r.state_dir / "process-jobs" / out["job_id"] / "stdout.log"
    assert log.read_text().count("\n") == 2501


def test_timeout_kills_the_whole_group_with_exit_code_null(runner):
    r = runner()
    env = r.script("""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open("grandchild.pid", "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(120)
    """, timeout_secs=1, wait_secs=30)
    out = env["output"]
    assert env["success"] is False and out["error_kind"] == "timeout"
    assert out["status"] == "timeout" and out["exit_code"] is None
    assert out["stdout"] == "started\n"
    grandchild = int((r.project_root / "grandchild.pid").read_text())
    wait_until(lambda: not process_alive(grandchild), what="the grandchild to be killed")
    assert r.observe(out["job_id"])["status"] == "timeout"


def test_the_group_ends_with_the_job(runner):
    r = runner()
    env = r.script("""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        print(child.pid)
    """)
    assert env["success"] and env["output"]["status"] == "completed"
    grandchild = int(env["output"]["stdout"])
    wait_until(lambda: not process_alive(grandchild), what="the leftover to be killed")


def test_interactive_job_pending_input_close_join_observe(runner):
    r = runner()
    started = r.process(["-c", "import sys\nprint(sys.stdin.read().upper(), end='')"],
                        interactive=True)
    assert started["success"] is True
    out = started["output"]
    assert (out["execution_state"], out["status"], out["interactive"]) == \
        ("pending", "running", True)
    job_id = out["job_id"]
    follow = out["suggested_call"]
    assert follow["tool"] == "wait_for_job_readiness"
    assert follow["follow_up_kind"] == "mechanically_followable"
    assert follow["arguments"]["job_ids"] == [job_id]
    assert r.jobs.live_job_ids() == [job_id] and r.jobs.running_jobs("sess1") == [job_id]

    independent = r.script("print(6 * 7)")
    assert independent["output"]["stdout"] == "42\n"

    wrote = r.write(job_id, "in-1", data="hello\n")
    assert wrote["success"], wrote
    assert wrote["output"] == {"job_id": job_id, "input_id": "in-1", "state": "written",
                               "stdin_closed": False, "bytes_accepted": 6,
                               "state_changed": True}
    closed = r.write(job_id, "in-2", close=True)
    assert closed["output"]["state"] == "closed" and closed["output"]["stdin_closed"] is True

    joined = r.call(follow["tool"], **follow["arguments"])
    assert joined["output"] == {"ready_job_ids": [job_id], "pending_job_ids": [],
                                "timed_out": False}
    seen = r.observe(job_id)
    assert (seen["status"], seen["terminal"], seen["exit_code"]) == ("completed", True, 0)
    assert seen["stdout_tail"] == "HELLO\n" and seen["stdin_closed"] is True
    assert r.jobs.live_job_ids() == []
    assert [e["status"] for e in r.events if e["job_id"] == job_id] == ["running", "completed"]


def test_input_to_a_child_that_never_reads_never_blocks(runner):
    r = runner()
    job_id = r.process(["-c", "import time; time.sleep(120)"], interactive=True)["output"]["job_id"]
    mib = "x" * (1024 * 1024)
    receipts = []
    for n in range(4):  # 4 MiB queued: far beyond any pipe buffer
        call = Background(r.write, job_id, f"in-{n}", data=mib)
        receipts.append(call.join(timeout=30))
    assert all(rc["success"] for rc in receipts), receipts
    assert receipts[-1]["output"]["state"] == "pending"
    assert receipts[-1]["output"]["bytes_accepted"] == 1024 * 1024
    full = Background(r.write, job_id, "in-5", data="more").join(timeout=30)
    assert full["success"] is False and full["output"]["error_kind"] == "job_limit_reached"
    assert full["output"]["state_changed"] is False
    too_big = r.write(job_id, "in-6", data=mib + "y")
    assert too_big["output"]["error_kind"] == "invalid_arguments"
    assert r.observe(job_id)["status"] == "running"


def test_input_receipts_conflict_closed_and_not_running(runner):
    r = runner()
    job_id = r.process(["-c", "import sys\nfor line in sys.stdin: print(line.strip()[::-1],"
                        " flush=True)"], interactive=True)["output"]["job_id"]
    first = r.write(job_id, "a", data="abc\n")
    again = r.write(job_id, "a", data="abc\n")
    assert first["output"]["state"] == "written" and first["output"]["state_changed"] is True
    assert again["output"] == {**first["output"], "state_changed": False}  # the same receipt
    conflict = r.write(job_id, "a", data="abd\n")
    assert conflict["success"] is False
    assert conflict["output"] == {"error_kind": "job_input_conflict", "state_changed": False}
    assert r.write(job_id, "b", close=True)["output"]["state"] == "closed"
    after_close = r.write(job_id, "c", data="late\n")
    assert after_close["output"]["error_kind"] == "job_stdin_closed"
    assert r.join([job_id])["ready_job_ids"] == [job_id]
    assert r.write(job_id, "d", data="x")["output"]["error_kind"] == "job_stdin_closed"
    assert r.write(job_id, "a", data="abc\n")["output"] == again["output"]  # still answers
    assert r.observe(job_id)["stdout_tail"] == "cba\n"

    one_line = r.process(["-c", "import sys; sys.stdin.readline()"], interactive=True)
    other = one_line["output"]["job_id"]
    r.write(other, "only", data="one\n")
    r.join([other])  # it ended by itself, stdin never closed by an input
    finished = r.write(other, "late", data="too late\n")
    assert finished["output"]["error_kind"] == "job_not_running"
    unknown = r.write("mmo_pjob_0000", "a", data="x")
    assert unknown["output"]["error_kind"] == "job_not_found"


def test_non_interactive_stdin_is_fed_and_closed(runner):
    r = runner()
    env = r.process(["-c", "import sys; print(len(sys.stdin.read()))"], stdin="x" * 200_000)
    assert env["success"], env
    assert env["output"]["stdout"] == "200000\n"
    closed = r.write(env["output"]["job_id"], "late", data="x")
    assert closed["output"]["error_kind"] == "job_not_running"


def test_policy_refuses_shell_and_unlisted_executables(runner, tmp_path):
    r = runner()
    shell = r.script("echo hi", language="shell")
    assert shell["success"] is False
    assert shell["output"]["error_kind"] == "policy_denied"
    assert shell["output"]["state_changed"] is False and "allow_raw_shell" in shell["error"]
    other = r.process(["hi"], executable="/bin/echo")
    assert other["output"]["error_kind"] == "policy_denied"
    by_name = r.process(["hi"], executable="echo")
    assert by_name["output"]["error_kind"] == "policy_denied"
    assert r.jobs.live_job_ids() == [] and r.events == []
    assert not any((r.state_dir / "process-jobs").iterdir())


def test_raw_shell_allows_shell_scripts_and_any_executable(runner):
    r = runner(allow_raw_shell=True, allowed_executables=())
    shell = r.script("echo $((3 + 4))\nexit 3\n", language="shell")
    assert shell["output"]["error_kind"] == "nonzero_exit"
    assert shell["output"]["exit_code"] == 3 and shell["output"]["stdout"] == "7\n"
    echo = r.process(["hi"], executable="echo")
    assert echo["success"] and echo["output"]["stdout"] == "hi\n"
    tool = r.project_root / "tools" / "greet.sh"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho \"hello $1 from $(pwd)\"\n")
    tool.chmod(0o755)
    local = r.process(["bob"], executable="./greet.sh", cwd="tools")
    assert local["output"]["stdout"] == "hello bob from tools\n"
    escape = r.process([], executable="../outside.sh")
    assert escape["output"]["error_kind"] == "path_outside_project"


def test_job_limit_reached_until_a_job_ends(runner):
    r = runner(max_concurrent_jobs=1)
    job_id = r.process(["-c", "import sys; sys.stdin.read()"], interactive=True)["output"]["job_id"]
    refused = r.script("print('no room')")
    assert refused["success"] is False
    assert refused["output"]["error_kind"] == "job_limit_reached"
    assert refused["output"]["state_changed"] is False
    r.write(job_id, "close", close=True)
    r.join([job_id])
    assert r.script("print('room')")["output"]["stdout"] == "room\n"


def test_child_environment_has_no_mmo_secrets(runner, monkeypatch, mmo_env):
    token = "mmo_rt_" + "f4k3" * 8
    monkeypatch.setenv("SERVICE_AUTH", "abc123")  # short, but the name says credential
    monkeypatch.setenv("RUNNER_CONFIG_FILE", str(mmo_env.config_dir / "runner.toml"))
    monkeypatch.setenv("MMO_RUNNER_TOKEN", token)
    monkeypatch.setenv("MMO_SERVER_CREDENTIAL", "cred-" + "9" * 20)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "a" * 30)
    monkeypatch.setenv("MMO_LINK_AUTH_VALUE", token)  # a harmless name holding the token
    monkeypatch.setenv("MMO_CALLER_TOKEN", "cap-" + "c" * 20)
    monkeypatch.setenv("MMO_VISIBLE_MARK", "keep-me")
    redaction.register_values({"runner_token": token})
    r = runner()
    env = r.script("import json, os; print(json.dumps(dict(os.environ)))")
    child = json.loads(env["output"]["stdout"])
    assert child["MMO_VISIBLE_MARK"] == "keep-me" and "PATH" in child
    for name in ("MMO_RUNNER_TOKEN", "MMO_SERVER_CREDENTIAL", "OPENAI_API_KEY",
                 "MMO_LINK_AUTH_VALUE", "MMO_CALLER_TOKEN", "MMO_CONFIG_DIR", "SERVICE_AUTH",
                 "RUNNER_CONFIG_FILE"):
        assert name not in child, name
    assert token not in env["output"]["stdout"]


def test_cwd_inside_the_project_and_paths_scrubbed(runner):
    r = runner()
    (r.project_root / "sub").mkdir()
    env = r.process(["-c", "import os; print(os.getcwd())"], cwd="sub")
    assert env["output"]["stdout"] == "sub\n"  # never the runner's absolute path
    outside = r.process(["-c", "pass"], cwd="../elsewhere")
    assert outside["output"]["error_kind"] == "path_outside_project"
    missing = r.process(["-c", "pass"], cwd="nope")
    assert missing["output"]["error_kind"] == "file_not_found"
    crash = r.script("raise SystemExit(__file__)")
    assert crash["output"]["stderr"] == "script.py\n"


def test_a_python_script_imports_the_projects_modules(runner):
    r = runner()
    (r.project_root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    env = r.script("import calc\nprint(calc.add(2, 3))", purpose="validation")
    assert env["success"], env
    assert env["output"]["stdout"] == "5\n"


def test_pending_run_then_join_and_observe_token(runner):
    r = runner()
    env = r.script("import sys\nprint('waiting', flush=True)\nsys.stdin.read()", wait_secs=0)
    # a script's stdin is /dev/null: it ends on its own
    job_id = env["output"]["job_id"]
    assert r.join([job_id], mode="any")["ready_job_ids"] == [job_id]

    live = r.process(["-c", "import sys\nfor line in sys.stdin: print('got', line.strip(),"
                      " flush=True)"], interactive=True)["output"]["job_id"]
    first = r.observe(live)
    assert first["status"] == "running" and first["stdout_tail"] == ""
    waiting = Background(r.observe, live, token=first["observation_token"], wait_secs=30)
    wait_until(lambda: blocked_in(waiting.thread, "wait_changed"), what="observe to wait")
    r.write(live, "ping", data="ping\n")
    changed = waiting.join()
    assert changed["observation_token"] != first["observation_token"]
    wait_until(lambda: r.observe(live)["stdout_tail"] == "got ping\n", what="the echo")
    joined = r.call("wait_for_job_readiness", job_ids=[live, job_id], mode="all", wait_secs=0)
    assert joined["output"] == {"ready_job_ids": [job_id], "pending_job_ids": [live],
                                "timed_out": True}
    both = r.call("observe_jobs", items=[{"job_id": live}, {"job_id": "mmo_pjob_ffff"}])
    items = both["output"]["items"]
    assert [i["job_id"] for i in items] == [live, "mmo_pjob_ffff"]
    assert items[1]["error_kind"] == "job_not_found"
    unknown = r.call("wait_for_job_readiness", job_ids=["mmo_pjob_ffff"], mode="all",
                     wait_secs=0)
    assert unknown["output"]["error_kind"] == "job_not_found"


def test_latest_validation_and_running_jobs(runner):
    r = runner()
    assert r.jobs.latest_validation("sess1") == "not_run"
    r.script("raise SystemExit(1)", purpose="validation")
    assert r.jobs.latest_validation("sess1") == "failed"
    r.script("print('fine')")  # not a validation run
    assert r.jobs.latest_validation("sess1") == "failed"
    r.script("print('passes')", purpose="validation")
    assert r.jobs.latest_validation("sess1") == "passed"
    assert r.jobs.latest_validation("other") == "not_run"
    assert r.jobs.running_jobs("sess1") == []
    restarted = ProcessJobs(r.state_dir, r.policy)
    assert restarted.latest_validation("sess1") == "passed"


def test_stop_all_terminates_then_kills_each_group(runner):
    r = runner()
    stubborn = r.process(["-c", "import signal, time\nsignal.signal(signal.SIGTERM, "
                          "signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(120)"],
                         interactive=True)["output"]["job_id"]
    polite = r.process(["-c", "import time; time.sleep(120)"], interactive=True)
    polite_id = polite["output"]["job_id"]
    wait_until(lambda: r.observe(stubborn)["stdout_tail"] == "ready\n", what="SIGTERM ignored")
    r.jobs.stop_all(grace_secs=0.5)
    for job_id, sig in ((stubborn, "SIGKILL"), (polite_id, "SIGTERM")):
        seen = r.observe(job_id)
        assert seen["status"] == "cancelled" and seen["terminal"] is True
        assert seen.get("signal") == sig
    assert r.jobs.live_job_ids() == []
    refused = r.script("print('late')")
    assert refused["success"] is False


def test_retention_keeps_the_last_jobs_of_a_session(runner):
    r = runner(keep_per_session=2)
    ids = [r.script(f"print({n})")["output"]["job_id"] for n in range(3)]
    gone = r.observe(ids[0])
    assert gone["error_kind"] == "job_not_found"
    assert not (r.state_dir / "process-jobs" / ids[0]).exists()
    assert r.observe(ids[2])["stdout_tail"] == "2\n"


RUNNER_PROGRAM = """
import sys, time
from pathlib import Path
from mmo_kernel.runner.context import Policy
from mmo_kernel.runner.process_jobs import ProcessJobs
jobs = ProcessJobs(Path(sys.argv[1]), Policy())
job = jobs.start([sys.executable, "-c", "import time; print('alive', flush=True); "
                  "time.sleep(120)"], cwd=Path(sys.argv[2]), root=Path(sys.argv[2]),
                 session_id="sess1", user="alice", project_id="code", kind="process",
                 interactive=True, stdin=None, timeout_secs=300)
print(job.job_id, job.pid, flush=True)
time.sleep(120)
"""


def test_a_job_of_a_crashed_runner_is_lost_after_restart(runner, tmp_path):
    r = runner()
    state = tmp_path / "crashed-state"
    old = subprocess.Popen([PY, "-c", RUNNER_PROGRAM, str(state), str(r.project_root)],
                           stdout=subprocess.PIPE, text=True)
    try:
        job_id, pid = old.stdout.readline().split()
        log = state / "process-jobs" / job_id / "stdout.log"
        wait_until(lambda: log.exists() and log.read_text() == "alive\n", what="the job")
        beside = ProcessJobs(state, r.policy)  # a second runner while the first lives
        assert beside.get(job_id) is None and process_alive(int(pid))
    finally:
        old.send_signal(signal.SIGKILL)
        old.wait()
        old.stdout.close()
    assert process_alive(int(pid))  # the orphan outlived its runner

    restarted = ProcessJobs(state, r.policy)
    r.jobs = restarted
    seen = r.observe(job_id)
    assert (seen["status"], seen["terminal"], seen["exit_code"]) == ("lost", True, None)
    assert seen["error"] and seen["stdout_tail"] == "alive\n"
    assert restarted.live_job_ids() == [] and restarted.running_jobs("sess1") == []
    assert r.join([job_id])["ready_job_ids"] == [job_id]
    assert r.write(job_id, "x", data="hi")["output"]["error_kind"] == "job_not_running"
    wait_until(lambda: not process_alive(int(pid)), what="the orphan to be retired")
