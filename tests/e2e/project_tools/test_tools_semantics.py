"""Spec 12 "Files", "Process execution", "Review, finish and work results" and "Goal
plans", checked from outside: a real ``mmo serve`` and two real ``mmo runner`` processes
of one user, every call a real stateless MCP request to ``POST /mcp``."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from support.mcp_http import mcp_call
from support.tools_stack import Stack, git
from support.waiting import wait_until

# one server (and runner) per module: its tests stay on one xdist worker
pytestmark = pytest.mark.xdist_group("test_tools_semantics")

PY = sys.executable
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    stack = Stack.start(tmp_path_factory.mktemp("tools"))
    try:
        stack.add_runner("laptop", {"data": {}, "code": {"git": True}},
                         policy=f'allowed_executables = ["{PY}"]\n')
        stack.add_runner("desk", {"other": {}})
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def data(stack):
    return stack.project("laptop", "data")


@pytest.fixture(scope="module")
def code(stack):
    return stack.project("laptop", "code")


def rev(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def no_machine_paths(stack: Stack, value) -> None:
    text = json.dumps(value)
    assert str(stack.root) not in text, text[:500]


# --- Files -------------------------------------------------------------------------------

def test_read_files_outputs_every_field_and_the_suggested_call_is_followable(stack, data):
    root = stack.root_of("laptop", "data")
    lines = [f"line {i}\n" for i in range(1, 8)]
    (root / "seven.txt").write_text("".join(lines), encoding="utf-8")
    (root / "one.txt").write_text("only\n", encoding="utf-8")
    raw = (root / "seven.txt").read_bytes()
    args = {"project": data, "items": [{"path": "seven.txt", "limit": 3},
                                       {"path": "one.txt"}]}
    first = stack.ok("read_files", args)
    page, done = first["items"]
    assert page["path"] == "seven.txt" and done["path"] == "one.txt"
    assert page["output"] == {"text": "".join(lines[:3]), "read_revision": rev(raw),
                              "has_more": True, "start_line": 1, "end_line": 3,
                              "total_lines": 7, "file_bytes": len(raw), "next_cursor": 3}
    assert done["output"]["has_more"] is False and "next_cursor" not in done["output"]
    suggested = first["suggested_call"]
    assert suggested["tool"] == "read_files"
    assert suggested["follow_up_kind"] == "mechanically_followable" and suggested["reason"]
    assert suggested["arguments"] == {"project": data, "items": [
        {"path": "seven.txt", "limit": 3, "cursor": 3, "expected_read_revision": rev(raw)}]}
    text, calls, reply = page["output"]["text"], 1, first
    while "suggested_call" in reply:
        reply = stack.ok("read_files", reply["suggested_call"]["arguments"])
        calls += 1
        [item] = reply["items"]
        assert item["output"]["read_revision"] == rev(raw)
        text += item["output"]["text"]
    assert (calls, text) == (3, "".join(lines))
    assert reply["items"][0]["output"]["start_line"] == 7
    assert reply["items"][0]["output"]["end_line"] == 7
    # with a session (given by ref): the follow-up names that same session
    started = stack.ok("work_on_project", {"project": data, "instruction": "read"})
    with_session = stack.ok("read_files", {**args, "session_id": started["session_ref"]})
    assert with_session["suggested_call"]["arguments"]["session_id"] in (
        started["session_ref"], started["session_id"])
    assert stack.ok("read_files", with_session["suggested_call"]["arguments"])["items"][0][
        "output"]["start_line"] == 4


def test_read_files_stale_revision_binary_and_per_item_errors(stack, data):
    root = stack.root_of("laptop", "data")
    (root / "a.txt").write_text("alpha\n", encoding="utf-8")
    (root / "blob.bin").write_bytes(b"\xff\xfe\x00\x81binary")
    out = stack.ok("read_files", {"project": data, "items": [
        {"path": "a.txt", "expected_read_revision": rev(b"other")},
        {"path": "blob.bin"}, {"path": "missing.txt"}, {"path": "a.txt"}]})
    stale, binary, missing, fine = out["items"]
    assert (stale["error_kind"], binary["error_kind"], missing["error_kind"]) == (
        "stale_file_revision", "not_a_text_file", "file_not_found")
    assert all("\n" not in i["error"] for i in (stale, binary, missing))
    assert fine["output"]["text"] == "alpha\n"
    assert "suggested_call" not in out
    no_machine_paths(stack, out)


def test_read_files_page_ends_at_a_line_boundary_within_256_kib(stack, data):
    root = stack.root_of("laptop", "data")
    line = "x" * 999 + "\n"
    (root / "big.txt").write_text(line * 400, encoding="utf-8")  # 400,000 bytes
    out = stack.ok("read_files", {"project": data, "items": [{"path": "big.txt"}]})
    page = out["items"][0]["output"]
    assert page["has_more"] is True
    assert len(page["text"].encode()) <= 256 * 1024 and page["text"].endswith("\n")
    assert page["end_line"] == page["next_cursor"] == len(page["text"]) // 1000
    (root / "short.txt").write_text("".join(f"{i}\n" for i in range(500)), encoding="utf-8")
    short = stack.ok("read_files", {"project": data, "items": [{"path": "short.txt"}]})
    assert (short["items"][0]["output"]["end_line"], short["items"][0]["output"]["has_more"]) \
        == (400, True)  # the default limit


def test_edit_create_and_replace_exact_rules(stack, data):
    root = stack.root_of("laptop", "data")
    created = stack.call("edit_project_files", {"project": data, "changes": [
        {"kind": "create", "path": "deep/er/new.txt", "content": "one\ntwo\ntwo\n"}]})
    assert created["success"] is True, created
    body = b"one\ntwo\ntwo\n"
    assert created["output"] == {"changed": True, "state_changed": True, "items": [
        {"path": "deep/er/new.txt", "kind": "create", "read_revision": rev(body),
         "file_bytes": len(body)}]}
    assert (root / "deep/er/new.txt").read_bytes() == body
    again = stack.fails("edit_project_files", {"project": data, "changes": [
        {"kind": "create", "path": "deep/er/new.txt", "content": "x"}]}, "file_exists")
    assert again["output"]["state_changed"] is False

    def edit(old, new="N"):
        return {"project": data, "changes": [{"kind": "edit", "path": "deep/er/new.txt",
                                              "expected_read_revision": rev(body),
                                              "edits": [{"kind": "replace_exact",
                                                         "old_text": old, "new_text": new}]}]}
    stack.fails("edit_project_files", edit("two\n"), "edit_text_not_unique")
    stack.fails("edit_project_files", edit("three"), "edit_text_not_found")
    assert (root / "deep/er/new.txt").read_bytes() == body
    os.chmod(root / "deep/er/new.txt", 0o751)
    done = stack.ok("edit_project_files", edit("one", "ONE"))
    assert (root / "deep/er/new.txt").read_bytes() == b"ONE\ntwo\ntwo\n"
    assert done["items"][0]["kind"] == "edit"
    assert done["items"][0]["read_revision"] == rev(b"ONE\ntwo\ntwo\n")
    assert (root / "deep/er/new.txt").stat().st_mode & 0o777 == 0o751  # mode kept


def test_edit_is_all_or_nothing(stack, data):
    root = stack.root_of("laptop", "data")
    (root / "keep.txt").write_text("keep me\n", encoding="utf-8")
    (root / "keep2.txt").write_text("keep me\n", encoding="utf-8")
    out = stack.fails("edit_project_files", {"project": data, "changes": [
        {"kind": "create", "path": "fresh/never.txt", "content": "no"},
        {"kind": "edit", "path": "keep.txt", "expected_read_revision": rev(b"keep me\n"),
         "edits": [{"kind": "replace_exact", "old_text": "keep", "new_text": "lost"}]},
        {"kind": "edit", "path": "keep2.txt", "expected_read_revision": rev(b"keep me\n"),
         "edits": [{"kind": "replace_exact", "old_text": "absent", "new_text": "x"}]}]},
        "edit_text_not_found")
    assert out["output"]["state_changed"] is False
    assert not (root / "fresh").exists()
    assert (root / "keep.txt").read_text() == "keep me\n"
    assert (root / "keep2.txt").read_text() == "keep me\n"
    twice = stack.fails("edit_project_files", {"project": data, "changes": [
        {"kind": "create", "path": "t.txt", "content": "1"},
        {"kind": "create", "path": "t.txt", "content": "2"}]}, "invalid_arguments")
    assert twice["output"]["state_changed"] is False and not (root / "t.txt").exists()


def test_stale_revision_keeps_a_concurrent_writers_bytes(stack, data):
    root = stack.root_of("laptop", "data")
    (root / "shared.txt").write_text("mine\n", encoding="utf-8")
    read = stack.ok("read_files", {"project": data, "items": [{"path": "shared.txt"}]})
    revision = read["items"][0]["output"]["read_revision"]
    (root / "shared.txt").write_text("mine\ntheirs\n", encoding="utf-8")  # the other writer
    out = stack.fails("edit_project_files", {"project": data, "changes": [
        {"kind": "edit", "path": "shared.txt", "expected_read_revision": revision,
         "edits": [{"kind": "replace_exact", "old_text": "mine", "new_text": "MINE"}]}]},
        "stale_file_revision")
    assert out["output"]["state_changed"] is False
    assert (root / "shared.txt").read_text() == "mine\ntheirs\n"


@pytest.mark.parametrize("path,kind", [
    ("../escape.txt", "path_outside_project"), ("/etc/passwd", "path_outside_project"),
    ("a/../../x", "path_outside_project"), ("linkdir/file.txt", "symlink"),
    ("link.txt", "symlink"), ("adir", "not_a_regular_file"),
    ("nope.txt", "file_not_found")])
def test_path_rules_for_every_path_taking_tool(stack, data, path, kind):
    """A symlink (in any component) is refused as outside the project or not regular."""
    kinds = {"path_outside_project", "not_a_regular_file"} if kind == "symlink" else {kind}
    root = stack.root_of("laptop", "data")
    (root / "adir").mkdir(exist_ok=True)
    (root / "real").mkdir(exist_ok=True)
    (root / "real" / "file.txt").write_text("r\n")
    (root / "target.txt").write_text("t\n")
    for name, target in (("linkdir", root / "real"), ("link.txt", root / "target.txt")):
        if not (root / name).is_symlink():
            (root / name).symlink_to(target)
    sid = stack.session(data)
    read = stack.ok("read_files", {"project": data, "items": [{"path": path}]})
    assert read["items"][0]["error_kind"] in kinds, read
    edit = stack.call("edit_project_files", {"project": data, "changes": [
        {"kind": "edit", "path": path, "expected_read_revision": rev(b"t\n"),
         "edits": [{"kind": "replace_exact", "old_text": "t", "new_text": "u"}]}]})
    transfer_from = stack.call("transfer_project_artifact", {
        "source_project": data, "source_path": path, "destination_project": data,
        "destination_path": "copied-" + path.replace("/", "_")})
    results = [edit, transfer_from]
    if kind != "file_not_found":  # a missing destination is where a transfer writes
        results.append(stack.call("transfer_project_artifact", {
            "source_project": data, "source_path": "target.txt", "destination_project": data,
            "destination_path": path, "overwrite": True}))
    if kind == "path_outside_project" or path == "linkdir/file.txt":
        results.append(stack.call("edit_project_files", {"project": data, "changes": [
            {"kind": "create", "path": path + "-new", "content": "x"}]}))
        results.append(stack.call("run_process", {
            "project": data, "session_id": sid, "executable": PY, "args": ["-c", "1"],
            "cwd": path.rsplit("/", 1)[0] if "/" in path else path, "timeout_secs": 5}))
    for envelope in results:
        assert envelope["success"] is False, envelope
        assert envelope["output"]["error_kind"] in kinds | {"invalid_arguments"}, envelope
        assert envelope["output"]["state_changed"] in (False,), envelope
        no_machine_paths(stack, envelope)
    assert (root / "target.txt").read_text() == "t\n"
    assert (root / "real" / "file.txt").read_text() == "r\n"
    assert not any(p.name.startswith("copied-") for p in root.iterdir())


def test_transfer_is_byte_exact_within_and_across_runners(stack, data):
    root = stack.root_of("laptop", "data")
    other = stack.project("desk", "other")
    other_root = stack.root_of("desk", "other")
    payloads = {"img.png": PNG, "noise.bin": os.urandom(1024),
                "big.bin": os.urandom(600 * 1024)}  # big: chunked frames both ways
    for name, raw in payloads.items():
        (root / name).write_bytes(raw)
        digest = hashlib.sha256(raw).hexdigest()
        same = stack.ok("transfer_project_artifact", {
            "source_project": data, "source_path": name, "destination_project": data,
            "destination_path": f"copies/{name}"})
        assert same == {"file_bytes": len(raw), "sha256": digest, "state_changed": True}
        assert (root / "copies" / name).read_bytes() == raw
        across = stack.ok("transfer_project_artifact", {
            "source_project": data, "source_path": name, "destination_project": other,
            "destination_path": f"in/{name}"})
        assert across == same
        assert (other_root / "in" / name).read_bytes() == raw
    back = stack.ok("transfer_project_artifact", {
        "source_project": other, "source_path": "in/noise.bin", "destination_project": data,
        "destination_path": "back/noise.bin"})
    assert (root / "back/noise.bin").read_bytes() == payloads["noise.bin"]
    assert back["sha256"] == hashlib.sha256(payloads["noise.bin"]).hexdigest()


def test_transfer_destination_exists_and_overwrite_across_runners(stack, data):
    root = stack.root_of("laptop", "data")
    other = stack.project("desk", "other")
    other_root = stack.root_of("desk", "other")
    (root / "src.txt").write_bytes(b"new bytes\n")
    for dest, dest_root in ((data, root), (other, other_root)):
        (dest_root / "taken.txt").write_bytes(b"old\n")
        args = {"source_project": data, "source_path": "src.txt",
                "destination_project": dest, "destination_path": "taken.txt"}
        refused = stack.fails("transfer_project_artifact", args, "destination_exists")
        assert refused["output"]["state_changed"] is False
        assert (dest_root / "taken.txt").read_bytes() == b"old\n"
        os.chmod(dest_root / "taken.txt", 0o640)
        stack.ok("transfer_project_artifact", {**args, "overwrite": True})
        assert (dest_root / "taken.txt").read_bytes() == b"new bytes\n"


# --- Process execution -------------------------------------------------------------------

def script(stack, project, sid, code, **kw):
    return stack.call("run_script", {"project": project, "session_id": sid,
                                     "language": "python", "script": code, **kw})


def test_exit_codes_statuses_and_cwd(stack, data):
    root = stack.root_of("laptop", "data")
    (root / "sub").mkdir(exist_ok=True)
    sid = stack.session(data)
    ok = script(stack, data, sid, "import os,sys; print(os.getcwd()); sys.stderr.write('e')")
    assert ok["success"] is True
    out = ok["output"]
    assert (out["execution_state"], out["status"], out["exit_code"]) == ("completed",
                                                                         "completed", 0)
    assert out["job_id"].startswith("mmo_pjob_")
    assert out["stderr"] == "e" and out["stderr_bytes"] == 1
    assert out["stdout_truncated"] is False and isinstance(out["duration_ms"], int)
    token = next(line.split('"')[1] for line in stack.runners["laptop"].config.read_text()
                 .splitlines() if line.startswith("token"))
    env = script(stack, data, sid, "import os; print(repr(dict(os.environ)))")["output"]
    assert token not in env["stdout"] and "mmo_rt_" not in env["stdout"]
    too_long = script(stack, data, sid, "print(1)", wait_secs=31)
    assert too_long["output"]["error_kind"] == "invalid_arguments"
    seven = script(stack, data, sid, "print('before'); raise SystemExit(7)")
    assert seven["success"] is False
    assert seven["output"]["error_kind"] == "nonzero_exit"
    assert (seven["output"]["status"], seven["output"]["exit_code"]) == ("failed", 7)
    assert "before" in seven["output"]["stdout"]
    proc = stack.call("run_process", {"project": data, "session_id": sid, "executable": PY,
                                      "args": ["-c", "import os; open('here','w').write('1')"],
                                      "cwd": "sub", "timeout_secs": 30})
    assert proc["success"] is True, proc
    assert (root / "sub" / "here").exists()
    stdin = stack.ok("run_process", {"project": data, "session_id": sid, "executable": PY,
                                     "args": ["-c", "import sys; print(sys.stdin.read()[::-1])"],
                                     "stdin": "abc", "timeout_secs": 30})
    assert stdin["stdout"] == "cba\n"


def test_timeout_kills_the_process_group(stack, data):
    root = stack.root_of("laptop", "data")
    sid = stack.session(data)
    code = ("import subprocess,sys,time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "open('grandchild.pid','w').write(str(p.pid))\n"
            "print('started', flush=True)\n"
            "time.sleep(600)\n")
    out = script(stack, data, sid, code, timeout_secs=3, wait_secs=30)
    assert out["success"] is False, out
    assert out["output"]["error_kind"] == "timeout"
    assert (out["output"]["status"], out["output"]["exit_code"]) == ("timeout", None)
    assert "started" in out["output"]["stdout"]
    grandchild = int((root / "grandchild.pid").read_text())

    def gone() -> bool:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{grandchild}/stat").read_text().split()[2] == "Z"
    wait_until(gone, timeout=30, what="the grandchild to be killed with its group")


def test_head_8k_tail_24k_with_the_omitted_line(stack, data):
    sid = stack.session(data)
    code = ("import sys\n"
            "for i in range(5000): print(f'row {i:05d} ' + 'y' * 40)\n"
            "print('SENTINEL-END')\n"
            "sys.stderr.write('E' * 40000 + '\\nERR-END\\n')\n"
            "raise SystemExit(3)\n")
    out = script(stack, data, sid, code)["output"]
    assert out["exit_code"] == 3
    full = "".join(f"row {i:05d} " + "y" * 40 + "\n" for i in range(5000)) + "SENTINEL-END\n"
    assert out["stdout_bytes"] == len(full) and out["stdout_truncated"] is True
    head, marker, tail = out["stdout"].partition(" bytes omitted ...]\n")
    head, _, omitted = head.rpartition("[... ")
    assert marker and head.endswith("\n"), out["stdout"][8000:8300]
    assert full.startswith(head) and 0 < len(head.encode()) <= 8 * 1024
    assert full.endswith(tail) and 0 < len(tail.encode()) <= 24 * 1024
    assert int(omitted) == len(full) - len(head) - len(tail)
    assert out["stdout"].endswith("SENTINEL-END\n")
    assert out["stderr_truncated"] is True and out["stderr"].endswith("ERR-END\n")
    assert len(out["stdout"].encode()) <= 32 * 1024 + 100


def test_pending_job_observe_stdin_and_one_join(stack, data):
    sid = stack.session(data)
    start = stack.call("run_process", {
        "project": data, "session_id": sid, "executable": PY, "interactive": True,
        "args": ["-c", "import sys\nfor l in sys.stdin: print('got', l.strip(), flush=True)\n"
                       "raise SystemExit(0)"], "timeout_secs": 120})
    assert start["success"] is True, start
    pending = start["output"]
    job = pending["job_id"]
    assert (pending["execution_state"], pending["status"], pending["interactive"]) == (
        "pending", "running", True)
    follow = pending["suggested_call"]
    assert follow["tool"] == "wait_for_job_readiness"
    assert follow["follow_up_kind"] == "mechanically_followable"
    assert follow["arguments"]["job_ids"] == [job]

    first = stack.ok("observe_jobs", {"items": [{"job_id": job}]})["items"][0]
    assert (first["job_id"], first["status"], first["terminal"], first["interactive"],
            first["stdin_closed"], first["exit_code"]) == (job, "running", False, True, False,
                                                           None)
    token = first["observation_token"]
    receipt = stack.ok("write_job_input", {"project": data, "job_id": job, "input_id": "in-1",
                                           "data": "hello\n"})
    assert (receipt["job_id"], receipt["input_id"], receipt["stdin_closed"],
            receipt["bytes_accepted"]) == (job, "in-1", False, 6)
    assert receipt["state"] in ("written", "pending")
    again = stack.ok("write_job_input", {"project": data, "job_id": job, "input_id": "in-1",
                                         "data": "hello\n"})
    assert {**again, "state_changed": None} == {**receipt, "state_changed": None}
    assert (receipt["state_changed"], again["state_changed"]) == (True, False)
    stack.fails("write_job_input", {"project": data, "job_id": job, "input_id": "in-1",
                                    "data": "changed\n"}, "job_input_conflict")
    changed = stack.ok("observe_jobs", {"items": [{"job_id": job,
                                                   "after_observation_token": token}],
                                        "wait_secs": 20})["items"][0]
    assert changed["job_id"] == job and changed["observation_token"] != token
    wait_until(lambda: "got hello" in stack.ok("observe_jobs", {"items": [{"job_id": job}]}
                                               )["items"][0]["stdout_tail"],
               timeout=30, what="the job to echo its input")
    closed = stack.ok("write_job_input", {"project": data, "job_id": job, "input_id": "end",
                                          "close": True})
    assert closed["state"] == "closed" and closed["stdin_closed"] is True
    stack.fails("write_job_input", {"project": data, "job_id": job, "input_id": "late",
                                    "data": "x"}, "job_stdin_closed")
    joined = stack.ok("wait_for_job_readiness", follow["arguments"])
    assert joined == {"ready_job_ids": [job], "pending_job_ids": [], "timed_out": False}
    final = stack.ok("observe_jobs", {"items": [{"job_id": job}]})["items"][0]
    assert (final["job_id"], final["status"], final["terminal"], final["exit_code"]) == (
        job, "completed", True, 0)
    # a finished job: an unchanged token waits and returns the same observation
    same = stack.ok("observe_jobs", {"items": [{"job_id": job, "after_observation_token":
                                                final["observation_token"]}],
                                     "wait_secs": 0.5})["items"][0]
    assert (same["job_id"], same["observation_token"]) == (job, final["observation_token"])


def test_readiness_any_and_all_and_a_child_that_never_reads(stack, data):
    sid = stack.session(data)
    started = script(stack, data, sid, "print('q')", wait_secs=0)
    assert started["success"] is True
    assert (started["output"]["execution_state"], started["output"]["status"],
            started["output"]["interactive"]) == ("pending", "running", False)
    assert started["output"]["suggested_call"]["follow_up_kind"] == "mechanically_followable"
    quick = started["output"]["job_id"]
    slow = stack.ok("run_process", {
        "project": data, "session_id": sid, "executable": PY, "interactive": True,
        "args": ["-c", "import os, time\nwhile not os.path.exists('stop-slow'): "
                       "time.sleep(0.05)"], "timeout_secs": 600})["job_id"]
    anyone = stack.ok("wait_for_job_readiness", {"job_ids": [slow, quick], "mode": "any",
                                                 "wait_secs": 25})
    assert anyone == {"ready_job_ids": [quick], "pending_job_ids": [slow], "timed_out": False}
    every = stack.ok("wait_for_job_readiness", {"job_ids": [quick, slow], "mode": "all",
                                                "wait_secs": 0.5})
    assert every == {"ready_job_ids": [quick], "pending_job_ids": [slow], "timed_out": True}
    # a child that never reads: input is accepted without blocking the call
    chunk = "z" * (512 * 1024)
    receipts = [stack.ok("write_job_input", {"project": data, "job_id": slow,
                                             "input_id": f"big-{i}", "data": chunk})
                for i in range(3)]
    assert all(r["bytes_accepted"] == len(chunk) for r in receipts)
    assert receipts[-1]["state"] in ("pending", "written")
    # close queues behind the unread bytes: the receipt is pending, the pipe still open,
    # and no input is taken after it
    close = stack.ok("write_job_input", {"project": data, "job_id": slow,
                                         "input_id": "close", "close": True})
    assert (close["state"], close["stdin_closed"]) == ("pending", False)
    stack.fails("write_job_input", {"project": data, "job_id": slow, "input_id": "more",
                                    "data": "x"}, "job_stdin_closed")
    observed = stack.ok("observe_jobs", {"items": [{"job_id": slow}]})["items"][0]
    assert (observed["job_id"], observed["status"]) == (slow, "running")
    both = stack.ok("observe_jobs", {"items": [{"job_id": slow}, {"job_id": quick}]})
    assert [i["job_id"] for i in both["items"]] == [slow, quick]  # the jobs asked for
    stack.fails("write_job_input", {"project": data, "job_id": quick, "input_id": "q",
                                    "data": "x"}, "job_not_running")
    stack.fails("observe_jobs", {"items": [{"job_id": quick}, {"job_id": "mmo_pjob_0000"}]},
                "job_not_found")
    stack.fails("write_job_input", {"project": data, "job_id": "mmo_pjob_0000",
                                    "input_id": "q", "data": "x"}, "job_not_found")
    (stack.root_of("laptop", "data") / "stop-slow").write_text("")
    ended = stack.ok("wait_for_job_readiness", {"job_ids": [slow], "mode": "all",
                                                "wait_secs": 25})
    assert ended["ready_job_ids"] == [slow]


# --- Review, finish and work results -----------------------------------------------------

def test_review_workspace_commit_and_non_git(stack, code, data):
    root = stack.root_of("laptop", "code")
    sid = stack.session(code)
    (root / "README.md").write_text("# code\nmore\n", encoding="utf-8")
    (root / "added.txt").write_text("a\n", encoding="utf-8")
    work = stack.ok("review_changes", {"project": code, "session_id": sid,
                                       "scope": {"kind": "workspace"}})
    assert work["scope"] == {"kind": "workspace"}
    files = {f["path"]: f for f in work["files"]}
    assert files["README.md"]["additions"] == 1 and files["README.md"]["deletions"] == 0
    assert "added.txt" in files and "+more" in work["diff"]
    only = stack.ok("review_changes", {"project": code, "session_id": sid,
                                       "scope": {"kind": "workspace"}, "paths": ["README.md"]})
    assert [f["path"] for f in only["files"]] == ["README.md"]
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "more")
    head = git(root, "rev-parse", "HEAD").strip()
    commit = stack.ok("review_changes", {"project": code, "session_id": sid,
                                         "scope": {"kind": "commit", "rev": head}})
    assert sorted(f["path"] for f in commit["files"]) == ["README.md", "added.txt"]
    (root / "huge.txt").write_text("h" * 300_000 + "\n", encoding="utf-8")
    big = stack.ok("review_changes", {"project": code, "session_id": sid,
                                      "scope": {"kind": "workspace"}})
    assert big["diff_truncated"] is True and len(big["diff"].encode()) <= 128 * 1024
    (root / "huge.txt").unlink()
    dsid = stack.session(data)
    stack.fails("review_changes", {"project": data, "session_id": dsid,
                                   "scope": {"kind": "commit", "rev": "HEAD"}},
                "not_a_git_project")
    plain = stack.ok("review_changes", {"project": data, "session_id": dsid,
                                        "scope": {"kind": "workspace"}})
    assert plain["files"] and all("path" in f for f in plain["files"])
    no_machine_paths(stack, [work, commit, plain])


def test_finish_outputs_in_request_order_and_the_work_result(stack, data):
    root = stack.root_of("laptop", "data")
    sid = stack.session(data)
    (root / "out").mkdir(exist_ok=True)
    large = b"L" * (10 * 1024 * 1024 + 1)
    (root / "out" / "large.bin").write_bytes(large)
    (root / "out" / "small.txt").write_bytes(b"small\n")
    if not (root / "out" / "sym.txt").is_symlink():
        (root / "out" / "sym.txt").symlink_to(root / "out" / "small.txt")
    args = {"project": data, "session_id": sid, "summary": "made outputs",
            "outputs": ["out/small.txt", "out/gone.txt", "out/large.bin", "out/sym.txt",
                        "out"]}
    env = stack.call("finish_coding_task", args)
    assert env["success"] is True, env
    out = env["output"]
    assert out["session_id"] == sid
    outputs = out["task_outputs"]
    assert [i["path"] for i in outputs["items"]] == args["outputs"]
    assert [i["status"] for i in outputs["items"]] == ["verified", "missing", "verified",
                                                       "unavailable", "unavailable"]
    assert outputs["items"][2] == {"path": "out/large.bin", "status": "verified",
                                   "sha256": hashlib.sha256(large).hexdigest(),
                                   "file_bytes": len(large)}
    assert all(i["reason"] for i in outputs["items"] if i["status"] != "verified")
    assert (outputs["requested_count"], outputs["verified_count"], outputs["missing_count"],
            outputs["unavailable_count"]) == (5, 2, 1, 2)
    assert "_at" not in json.dumps(outputs) and "time" not in json.dumps(outputs)
    assert out["task_outcome"] == {"status": "fail", "blocking": True,
                                   "blocking_reasons": ["task_outputs_unverified"],
                                   "validation": "not_run"}
    state = stack.ok("get_work_result_state", {"project": data, "session_id": sid}, ui=True)
    result = state["work_result"]
    assert result["task_outputs"] == outputs
    assert (result["session_id"], result["status"], result["summary"]) == (
        sid, "finished", "made outputs")
    assert result["task_outcome"] == out["task_outcome"]
    assert isinstance(result["finished_at_unix_ms"], int)
    hidden = mcp_call(stack.url, stack.pat, "tools/call", {
        "name": "get_work_result_state", "arguments": {"project": data, "session_id": sid}})
    assert hidden.json()["error"]["code"] == -32602  # app-only: not for a plain client
    no_machine_paths(stack, [out, state])


def test_validation_and_running_jobs_block_and_summary_only(stack, code):
    sid = stack.session(code)
    failed = script(stack, code, sid, "raise SystemExit(1)", purpose="validation")
    assert failed["output"]["error_kind"] == "nonzero_exit"
    out = stack.ok("finish_coding_task", {"project": code, "session_id": sid})
    assert out["task_outcome"] == {"status": "fail", "blocking": True,
                                   "blocking_reasons": ["validation_failed"],
                                   "validation": "failed"}
    assert "changes" in out and "task_outputs" not in out
    stack.ok("run_script", {"project": code, "session_id": sid, "language": "python",
                            "script": "print('ok')", "purpose": "validation"})
    other = script(stack, code, sid, "raise SystemExit(2)")  # not a validation run
    assert other["output"]["error_kind"] == "nonzero_exit"
    running = stack.ok("run_process", {"project": code, "session_id": sid, "executable": PY,
                                       "interactive": True, "timeout_secs": 600,
                                       "args": ["-c", "import sys; sys.stdin.read()"]})
    out = stack.ok("finish_coding_task", {"project": code, "session_id": sid,
                                          "summary_only": True})
    assert out["task_outcome"] == {"status": "fail", "blocking": True,
                                   "blocking_reasons": ["jobs_still_running"],
                                   "validation": "passed"}
    assert "changes" not in out
    elsewhere = stack.ok("finish_coding_task", {"project": code, "session_id":
                                                stack.session(code), "summary_only": True})
    assert elsewhere["task_outcome"]["blocking_reasons"] == []  # running jobs: per session
    stack.ok("write_job_input", {"project": code, "job_id": running["job_id"],
                                 "input_id": "c", "close": True})
    stack.ok("wait_for_job_readiness", {"job_ids": [running["job_id"]], "mode": "all",
                                        "wait_secs": 25})
    passed = stack.ok("finish_coding_task", {"project": code, "session_id": sid})
    assert passed["task_outcome"] == {"status": "pass", "blocking": False,
                                      "blocking_reasons": [], "validation": "passed"}
    # the session stays open: tools keep working in it
    stack.ok("read_files", {"project": code, "session_id": sid,
                            "items": [{"path": "README.md"}]})


def test_recorder_session_and_finish_without_outputs(stack, data):
    root = stack.root_of("laptop", "data")
    (root / "r.txt").write_bytes(b"r\n")
    business, recorder = stack.session(data), stack.session(data)
    mine = stack.ok("finish_coding_task", {"project": data, "session_id": recorder,
                                           "outputs": ["r.txt"]})["task_outputs"]
    theirs = stack.ok("finish_coding_task", {"project": data, "session_id": business,
                                             "outputs": ["r.txt", "none.txt"]},
                      mmo={"record": recorder})["task_outputs"]
    state = lambda sid: stack.ok("get_work_result_state",  # noqa: E731
                                 {"project": data, "session_id": sid}, ui=True)["work_result"]
    assert state(recorder)["task_outputs"] == mine
    assert state(business)["task_outputs"] == theirs
    handoff = stack.ok("read_session_handoff", {"project": data, "session_id": recorder,
                                                "include_workspace": False})
    assert [a["business_session"] for a in handoff["recent_activity"]
            if a.get("tool") == "finish_coding_task"
            and a.get("business_session") != recorder] == [business]
    stack.ok("finish_coding_task", {"project": data, "session_id": business})
    assert state(business)["task_outputs"] is None
    assert state(recorder)["task_outputs"] == mine
    fresh = stack.session(data)
    assert state(fresh)["status"] == "open" and state(fresh)["task_outputs"] is None


# --- Goal plans --------------------------------------------------------------------------

def steps(*ids):
    return [{"id": i, "title": f"Step {i}"} for i in ids]


def prepare(stack, sid, key="p1", **kw):
    args = {"session_id": sid, "title": "Ship", "objective": "ship it",
            "completion_conditions": ["tests pass"], "steps": steps("a", "b", "c"),
            "idempotency_key": key, **kw}
    return stack.call("prepare_goal_workflow", args)


def test_goal_prepare_idempotency_per_session(stack, data):
    sid, other = stack.session(data), stack.session(data)
    first = prepare(stack, sid)
    assert first["success"] is True, first
    goal = first["output"]["goal"]
    assert (first["output"]["replayed"], first["output"]["state_changed"]) == (False, True)
    summary = goal["summary"]
    assert (summary["revision"], summary["lifecycle"], summary["session_id"],
            summary["current_step_id"], summary["terminal_reason"],
            summary["terminal_at_unix_ms"]) == (1, "active", sid, None, None, None)
    assert [s["status"] for s in goal["plan"]["steps"]] == ["pending"] * 3
    assert goal["plan_history"] == {"revisions": [], "total_count": 0, "returned_count": 0}
    replay = prepare(stack, sid)
    assert replay["output"]["replayed"] is True and replay["output"]["state_changed"] is False
    assert replay["output"]["goal"] == goal
    conflict = prepare(stack, sid, title="Other")
    assert conflict["output"]["error_kind"] == "goal_idempotency_conflict"
    elsewhere = prepare(stack, other)  # the same key in another session is a new goal
    assert elsewhere["output"]["replayed"] is False
    assert elsewhere["output"]["goal"]["summary"]["goal_id"] != summary["goal_id"]
    for bad in (steps(), steps("a", "a"), steps(*[f"s{i}" for i in range(101)])):
        refused = prepare(stack, sid, key="bad", steps=bad)
        assert refused["output"]["error_kind"] == "invalid_goal_plan", refused
    ok = prepare(stack, sid, key="bad")  # a failed call kept no key bookkeeping
    assert ok["success"] is True and ok["output"]["replayed"] is False


def test_goal_plan_full_lifecycle(stack, data):
    sid = stack.session(data)
    goal = prepare(stack, sid)["output"]["goal"]
    gid = goal["summary"]["goal_id"]

    def call(tool, **args):
        return stack.call(tool, {"goal_id": gid, **args})
    cp = call("checkpoint_goal", expected_revision=1, completed_step_ids=["a"],
              current_step_id="b", summary="a done", idempotency_key="c1")
    assert cp["success"] is True, cp
    g = cp["output"]["goal"]
    assert g["summary"]["revision"] == 2 and g["summary"]["current_step_id"] == "b"
    assert [s["status"] for s in g["plan"]["steps"]] == ["completed", "in_progress", "pending"]
    assert g["plan"]["steps"][2] == goal["plan"]["steps"][2]  # untouched dict kept exactly
    assert g["plan_history"]["total_count"] == 0
    # checks in order: key -> terminal -> revision -> content
    assert call("checkpoint_goal", expected_revision=1, completed_step_ids=["a"],
                current_step_id="b", summary="a done", idempotency_key="c1"
                )["output"]["replayed"] is True
    assert call("revise_goal_plan", expected_revision=2, reason="r", steps=steps("a"),
                idempotency_key="c1")["output"]["error_kind"] == "goal_idempotency_conflict"
    assert call("checkpoint_goal", expected_revision=1, summary="s",
                idempotency_key="c2")["output"]["error_kind"] == "goal_revision_changed"
    assert call("checkpoint_goal", expected_revision=1, completed_step_ids=["zz"],
                summary="s", idempotency_key="c3")["output"]["error_kind"] == \
        "goal_revision_changed"
    bad = call("checkpoint_goal", expected_revision=2, completed_step_ids=["zz"], summary="s",
               idempotency_key="c3")
    assert bad["output"]["error_kind"] == "invalid_goal_plan"
    for dropped in (steps("b", "c"), []):
        refused = call("revise_goal_plan", expected_revision=2, reason="x", steps=dropped,
                       idempotency_key="rx")
        assert refused["output"]["error_kind"] == "invalid_goal_plan", (dropped, refused)
    assert stack.ok("get_goal", {"goal_id": gid})["goal"]["summary"]["revision"] == 2
    rv = call("revise_goal_plan", expected_revision=2, reason="split c",
              steps=[{"id": "a", "title": "A renamed"}, {"id": "c", "title": "C"},
                     {"id": "d", "title": "D"}], idempotency_key="r1")
    g = rv["output"]["goal"]
    assert g["summary"]["revision"] == 3 and g["summary"]["current_step_id"] is None
    assert g["plan"]["steps"] == [{"id": "a", "title": "A renamed", "status": "completed"},
                                  {"id": "c", "title": "C", "status": "pending"},
                                  {"id": "d", "title": "D", "status": "pending"}]
    assert g["plan_history"]["total_count"] == 1
    assert g["plan_history"]["revisions"][0]["revision"] == 2
    assert g["plan_history"]["revisions"][0]["reason"] == "split c"
    assert [s["id"] for s in g["plan_history"]["revisions"][0]["plan"]["steps"]] == [
        "a", "b", "c"]
    card = stack.ok("present_goal_plan", {"goal_id": gid}, ui=True)["goal_plan"]
    assert card == {"goal_id": gid, "title": "Ship", "revision": 3, "lifecycle": "active",
                    "terminal_at_unix_ms": None, "current_step_id": None,
                    "steps": g["plan"]["steps"], "completed_step_count": 1,
                    "total_step_count": 3}
    incomplete = call("update_goal", expected_revision=3, lifecycle="completed",
                      idempotency_key="u0")
    assert incomplete["output"]["error_kind"] == "goal_steps_incomplete"
    call("checkpoint_goal", expected_revision=3, completed_step_ids=["c", "d"], summary="all",
         idempotency_key="c9")
    done = call("update_goal", expected_revision=4, lifecycle="completed",
                terminal_reason="shipped", idempotency_key="u1")["output"]["goal"]
    assert done["summary"]["revision"] == 5 and done["summary"]["lifecycle"] == "completed"
    assert done["summary"]["terminal_reason"] == "shipped"
    assert isinstance(done["summary"]["terminal_at_unix_ms"], int)
    assert done["plan_history"]["total_count"] == 1
    assert call("checkpoint_goal", expected_revision=2, summary="x",
                idempotency_key="after")["output"]["error_kind"] == "goal_terminal"
    old = call("checkpoint_goal", expected_revision=1, completed_step_ids=["a"],
               current_step_id="b", summary="a done", idempotency_key="c1")["output"]
    assert old["replayed"] is True and old["goal"] == done  # inert, even after terminal
    again = prepare(stack, sid)["output"]
    assert again["replayed"] is True and again["goal"] == done
    assert call("checkpoint_goal", expected_revision=1, summary="changed",
                idempotency_key="c1")["output"]["error_kind"] == "goal_idempotency_conflict"
    # _mmo is not part of the payload: a replay with bookkeeping is still inert
    recorded = stack.call("checkpoint_goal", {
        "goal_id": gid, "expected_revision": 1, "completed_step_ids": ["a"],
        "current_step_id": "b", "summary": "a done", "idempotency_key": "c1"},
        mmo={"record": sid})["output"]
    assert recorded["replayed"] is True and recorded["state_changed"] is False
    # keys are per goal: another goal of the session takes "c1" afresh
    second = prepare(stack, sid, key="p2")["output"]["goal"]["summary"]["goal_id"]
    fresh = stack.ok("checkpoint_goal", {"goal_id": second, "expected_revision": 1,
                                         "completed_step_ids": ["a"], "summary": "s",
                                         "idempotency_key": "c1"})
    assert fresh["replayed"] is False and fresh["goal"]["summary"]["revision"] == 2
    back = stack.call("checkpoint_goal", {"goal_id": second, "expected_revision": 2,
                                          "current_step_id": "a", "summary": "s",
                                          "idempotency_key": "back"})
    assert back["output"]["error_kind"] == "invalid_goal_plan", back  # never back
    gave_up = stack.ok("update_goal", {"goal_id": second, "expected_revision": 2,
                                       "lifecycle": "abandoned", "terminal_reason": "moot",
                                       "idempotency_key": "u"})["goal"]
    assert (gave_up["summary"]["lifecycle"], gave_up["summary"]["revision"]) == (
        "abandoned", 3)
    assert gave_up["plan"] == fresh["goal"]["plan"]
    stack.fails("get_goal", {"goal_id": "mmo_goal_nope"}, "goal_not_found")
    stack.fails("present_goal_plan", {"goal_id": "mmo_goal_nope"}, "goal_not_found", ui=True)


def test_revise_keeps_the_current_step_and_checks_ids(stack, data):
    sid = stack.session(data)
    gid = prepare(stack, sid)["output"]["goal"]["summary"]["goal_id"]
    stack.ok("checkpoint_goal", {"goal_id": gid, "expected_revision": 1,
                                 "current_step_id": "b", "summary": "s",
                                 "idempotency_key": "c"})
    for bad in (steps("b", "b"), steps(*[f"s{i}" for i in range(101)])):
        refused = stack.call("revise_goal_plan", {"goal_id": gid, "expected_revision": 2,
                                                  "reason": "r", "steps": bad,
                                                  "idempotency_key": "bad"})
        assert refused["output"]["error_kind"] == "invalid_goal_plan", refused
    g = stack.ok("revise_goal_plan", {"goal_id": gid, "expected_revision": 2, "reason": "r",
                                      "steps": steps("b", "e"), "idempotency_key": "r"})["goal"]
    assert g["summary"]["current_step_id"] == g["plan"]["current_step_id"] == "b"
    assert [s["status"] for s in g["plan"]["steps"]] == ["in_progress", "pending"]
    unknown = stack.call("prepare_goal_workflow", {
        "session_id": "mmo_sess_20990101-000000-x-abcdef", "title": "t", "objective": "o",
        "completion_conditions": [], "steps": steps("a"), "idempotency_key": "k"})
    assert unknown["output"]["error_kind"] == "session_not_found"


def test_plan_history_newest_first_at_most_20(stack, data):
    sid = stack.session(data)
    gid = prepare(stack, sid)["output"]["goal"]["summary"]["goal_id"]
    for revision in range(1, 23):
        g = stack.ok("revise_goal_plan", {"goal_id": gid, "expected_revision": revision,
                                          "reason": f"r{revision}", "steps": steps("a"),
                                          "idempotency_key": f"k{revision}"})["goal"]
    history = g["plan_history"]
    assert (history["total_count"], history["returned_count"]) == (22, 20)
    assert [r["revision"] for r in history["revisions"]] == list(range(22, 2, -1))
