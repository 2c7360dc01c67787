"""A process job's full logs never hold a credential value (spec 12 "Security rules").

The runner copies a job's stdout/stderr into its logs through a redacting pump: a
value of ``credentials.env`` or of a secret-looking environment variable becomes
``[redacted:<NAME>]``, wherever it falls (binary data, partial lines, a value split
over two writes), every other byte is kept in order, ``stdout_bytes`` counts the
bytes the child wrote, and a child writing megabytes is never stalled.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest

from mmo_kernel.runner import dispatch
from mmo_kernel.runner.context import Policy, Project, RunnerConfig
from mmo_kernel.runner.process_jobs import ProcessJobs
from mmo_kernel.state.paths import credentials_path
from tests.support.waiting import wait_until

PY = sys.executable
FILE_SECRET = "filecred-" + "5e7a1c" * 6
ENV_SECRET = "envcred-" + "d0c4b2" * 6
FILE_MARK, ENV_MARK = b"[redacted:ACME_LICENSE]", b"[redacted:DEPLOY_API_TOKEN]"

PLAYER = """
import base64, json, os
plan = json.load(open("plan.json"))
for fd, chunk in plan:
    data = base64.b64decode(chunk)
    while data:
        data = data[os.write(fd, data):]
"""
"""Replays ``plan.json`` (``[fd, base64 bytes]`` items), one ``write`` per item: the
script and the plan hold the values only base64-encoded, never verbatim."""


class Runner:
    """The process-job side of one runner, driven through its dispatcher."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = Path(os.path.realpath(tmp_path / "code"))
        self.root.mkdir()
        self.state_dir = tmp_path / "runner-state"
        policy = Policy(allowed_executables=(Path(PY),))
        self.config = RunnerConfig(server_url="http://127.0.0.1:9", token="mmo_rt_test",
                                   client_id="laptop", owner="alice",
                                   project_registry_dir=tmp_path / "projects.d", policy=policy)
        self.projects = {"code": Project(id="code", name="code", description="",
                                         root=self.root, vcs="none")}
        self.jobs = ProcessJobs(self.state_dir, policy, stop_grace_secs=1.0)

    def call(self, tool: str, **arguments) -> dict:
        frame = {"type": "call", "call_id": "c", "tool": tool, "arguments": arguments,
                 "user": "alice", "session": "sess1", "deadline_unix_ms": None}
        return dispatch.dispatch(frame, config=self.config, projects=self.projects,
                                 jobs=self.jobs, state_dir=self.state_dir)

    def play(self, plan: list[tuple[int, bytes]], **arguments) -> dict:
        (self.root / "plan.json").write_text(json.dumps(
            [[fd, base64.b64encode(data).decode()] for fd, data in plan]))
        return self.call("run_script", project="code", session_id="sess1",
                         language="python", script=PLAYER, **arguments)

    def finished(self, env: dict) -> dict:
        """The job's final observation (waiting for it if the inline wait ran out)."""
        job_id = env["output"]["job_id"]
        wait_until(lambda: self.observe(job_id)["terminal"], timeout=120, what="the job")
        return self.observe(job_id)

    def observe(self, job_id: str, **arguments) -> dict:
        env = self.call("observe_jobs", items=[{"job_id": job_id}], **arguments)
        assert env["success"], env
        return env["output"]["items"][0]

    def log(self, job_id: str, stream: str) -> bytes:
        return (self.state_dir / "process-jobs" / job_id / f"{stream}.log").read_bytes()


@pytest.fixture
def runner(mmo_env, tmp_path, monkeypatch):
    path = credentials_path()
    path.write_text(f"ACME_LICENSE={FILE_SECRET}\n")
    path.chmod(0o600)
    monkeypatch.setenv("DEPLOY_API_TOKEN", ENV_SECRET)  # the name says credential
    one = Runner(tmp_path)
    yield one
    one.jobs.stop_all(grace_secs=1.0)


def _redacted(plan: list[tuple[int, bytes]], fd: int) -> bytes:
    stream = b"".join(data for to, data in plan if to == fd)
    return stream.replace(FILE_SECRET.encode(), FILE_MARK).replace(ENV_SECRET.encode(),
                                                                   ENV_MARK)


def _noisy_plan() -> list[tuple[int, bytes]]:
    """Both values on both streams, whole, split over two or three writes, glued to
    binary bytes and to partial lines, next to near misses (a value's prefix)."""
    file_secret, env_secret = FILE_SECRET.encode(), ENV_SECRET.encode()
    plan: list[tuple[int, bytes]] = []
    for i in range(60):
        cut = 1 + i % (len(file_secret) - 1)
        plan += [
            (1, b"line %d key=" % i + file_secret + b"\n"),
            (1, b"split " + file_secret[:cut]), (1, file_secret[cut:] + b" rest\n"),
            (2, b"\x00\xff\xfe" + env_secret + b"\x80\xc3"),  # binary, no newline
            (2, env_secret[:3]), (2, env_secret[3:cut % 20 + 4]),
            (2, env_secret[cut % 20 + 4:] + b"\n"),
            (1, b"almost " + file_secret[:-1] + b"!\n"),  # not the value: kept as is
            (1, b"\xe2\x82"), (1, b"\xac prompt> "),  # a character split over writes
            (2, env_secret + file_secret + b"\r\n"),
        ]
    plan.append((1, b"tail " + file_secret))  # the stream ends right after a value
    return plan


def test_a_printed_credential_never_reaches_the_logs_and_nothing_else_changes(runner):
    plan = _noisy_plan()
    env = runner.play(plan)
    assert env["success"], env
    out = env["output"]
    job_id = out["job_id"]
    stdout, stderr = _redacted(plan, 1), _redacted(plan, 2)
    assert runner.log(job_id, "stdout") == stdout  # every other byte, in order
    assert runner.log(job_id, "stderr") == stderr
    assert stdout.count(FILE_MARK) == 60 * 2 + 1 and stderr.count(ENV_MARK) == 60 * 3
    written = {fd: sum(len(data) for to, data in plan if to == fd) for fd in (1, 2)}
    assert (out["stdout_bytes"], out["stderr_bytes"]) == (written[1], written[2])
    assert out["stdout"] == stdout.decode("utf-8", "replace")
    assert out["stderr"] == stderr.decode("utf-8", "replace")
    seen = runner.observe(job_id, tail_lines=500)
    assert (seen["stdout_bytes"], seen["stderr_bytes"]) == (written[1], written[2])
    reply = json.dumps([env, seen])
    assert FILE_SECRET not in reply and ENV_SECRET not in reply
    files = [p for p in runner.state_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"stdout.log", "stderr.log", "job.json"}
    for path in files:
        data = path.read_bytes()
        assert FILE_SECRET.encode() not in data and ENV_SECRET.encode() not in data, path
    restarted = ProcessJobs(runner.state_dir, runner.jobs.policy)
    runner.jobs = restarted  # the counts are the child's bytes for a later runner too
    assert runner.observe(job_id)["stdout_bytes"] == written[1]


def test_a_partial_line_reaches_the_log_while_the_child_waits(runner):
    plan = [(1, ENV_SECRET.encode() + b" password: ")]
    (runner.root / "plan.json").write_text(json.dumps(
        [[fd, base64.b64encode(data).decode()] for fd, data in plan]))
    started = runner.call("run_process", project="code", session_id="sess1",
                          executable=PY, interactive=True, timeout_secs=60,
                          args=["-c", PLAYER + "import sys; sys.stdin.read()"])
    job_id = started["output"]["job_id"]
    expected = ENV_MARK.decode() + " password: "
    wait_until(lambda: runner.observe(job_id)["stdout_tail"] == expected,
               what="the prompt in the log")
    assert runner.log(job_id, "stdout") == expected.encode()
    assert runner.call("write_job_input", project="code", job_id=job_id, input_id="end",
                       close=True)["success"]
    assert runner.finished(started)["status"] == "completed"


def test_a_child_writing_5_mib_to_both_streams_never_blocks(runner):
    mib = 1024 * 1024
    block = b"y" * (64 * 1024)
    value = FILE_SECRET.encode()
    plan: list[tuple[int, bytes]] = []
    for n in range(5 * mib // len(block)):
        plan += [(1, block), (2, block)]
        if n % 16 == 15:  # a value split over the boundary of two writes each MiB
            plan += [(1, value[:7]), (1, value[7:])]
    plan.append((1, b"\ndone\n"))
    env = runner.play(plan, wait_secs=30)
    seen = runner.finished(env)
    assert seen["status"] == "completed", seen
    written = {fd: sum(len(data) for to, data in plan if to == fd) for fd in (1, 2)}
    assert written[1] > 5 * mib and written[2] == 5 * mib
    assert (seen["stdout_bytes"], seen["stderr_bytes"]) == (written[1], written[2])
    job_id = seen["job_id"]
    assert runner.log(job_id, "stdout") == _redacted(plan, 1)
    assert runner.log(job_id, "stderr") == b"y" * (5 * mib)
    assert seen["stdout_tail"] == "done\n" and seen["stderr_tail"] == ""
