"""The ten acceptance cases of spec 12, each checking exactly what its table row says.

A case gets a ``CaseContext`` (the recording MCP client and the projects), makes real
``tools/call`` requests and raises ``CaseFailure`` with a one-line reason at the first
check that does not hold; it returns a small evidence dict. Cases start their own project
sessions, so they do not depend on each other's state.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmo_kernel.acceptance import fixtures as fx
from mmo_kernel.acceptance.harness import Stack
from mmo_kernel.acceptance.mcp_client import SENTINEL, CaseFailure, McpClient, check

FOLLOWABLE = "mechanically_followable"


@dataclass
class CaseContext:
    stack: Stack
    client: McpClient
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def data(self) -> str:
        return self.stack.project_ids["data"]

    @property
    def code(self) -> str:
        return self.stack.project_ids["code"]

    def disk(self, project: str, rel: str) -> Path:
        return self.stack.project_path(project) / rel

    def call(self, tool: str, arguments: dict[str, Any],
             mmo: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.client.call(tool, arguments, mmo=mmo)

    def ok(self, tool: str, arguments: dict[str, Any],
           mmo: dict[str, Any] | None = None) -> dict[str, Any]:
        """The call must succeed; returns its output."""
        envelope = self.call(tool, arguments, mmo)
        output = envelope["output"]
        check(envelope["success"], f"{tool} failed: {output.get('error_kind')}: "
                                   f"{envelope.get('error')}")
        return output

    def fails(self, tool: str, arguments: dict[str, Any], kind: str) -> dict[str, Any]:
        """The call must fail with ``kind`` and change nothing; returns the envelope."""
        envelope = self.call(tool, arguments)
        output = envelope["output"]
        check(not envelope["success"], f"{tool} succeeded; expected {kind}")
        check(output.get("error_kind") == kind,
              f"{tool} failed {output.get('error_kind')} ({envelope.get('error')}); "
              f"expected {kind}")
        check(output.get("state_changed") is False,
              f"{tool} {kind}: state_changed {output.get('state_changed')!r}, expected false")
        return envelope

    def start_session(self, project: str, instruction: str) -> dict[str, Any]:
        out = self.ok("work_on_project", {"project": project, "instruction": instruction})
        check(out.get("continuation") == "started",
              f"work_on_project without session_id: continuation "
              f"{out.get('continuation')!r}, expected started")
        check(str(out.get("session_id", "")).startswith("mmo_sess_"),
              f"work_on_project: session_id {out.get('session_id')!r} lacks mmo_sess_")
        check(re.fullmatch(r"~s\d+", str(out.get("session_ref"))),
              f"work_on_project: session_ref {out.get('session_ref')!r} is not ~s<n>")
        return out

    def script(self, project: str, session_id: str, script: str,
               **extra: Any) -> dict[str, Any]:
        return self.call("run_script", {"project": project, "session_id": session_id,
                                        "language": "python", "script": script, **extra})


def completed_run(tool: str, envelope: dict[str, Any], exit_code: int) -> dict[str, Any]:
    """A run finished inline with ``exit_code`` (success iff 0)."""
    out = envelope["output"]
    check(out.get("execution_state") == "completed",
          f"{tool}: execution_state {out.get('execution_state')!r}, expected completed "
          f"({envelope.get('error') or ''})")
    check(out.get("exit_code") == exit_code,
          f"{tool}: exit_code {out.get('exit_code')!r}, expected {exit_code}; stderr "
          f"{str(out.get('stderr', ''))[-200:]!r}")
    check(envelope["success"] is (exit_code == 0),
          f"{tool}: success {envelope['success']} for exit code {exit_code}")
    if exit_code:
        check(out.get("error_kind") == "nonzero_exit" and out.get("status") == "failed",
              f"{tool}: exit {exit_code} reported {out.get('error_kind')!r}/"
              f"{out.get('status')!r}, expected nonzero_exit/failed")
    else:
        check(out.get("status") == "completed", f"{tool}: status {out.get('status')!r}")
    return out


def bare_sha(value: Any) -> str:
    """Spec 12 names the field ``sha256`` without fixing a prefix: accept ``sha256:`` too."""
    text = str(value)
    return text.removeprefix("sha256:")


# -- entry_read_recovery ---------------------------------------------------------------------

def entry_read_recovery(ctx: CaseContext) -> dict[str, Any]:
    raw_path = str(ctx.disk("data", "notes"))
    refused = ctx.fails("work_on_project", {"path": raw_path, "instruction": "read the notes"},
                        "invalid_project_selector")
    check("list_projects" in refused["error"],
          f"invalid_project_selector error does not name list_projects: {refused['error']!r}")
    check(raw_path not in json.dumps(refused), "the raw path was echoed in the refusal")
    guidance = refused["output"].get("suggested_call") or {}
    check(guidance.get("tool") == "list_projects" and guidance.get("arguments") == {}
          and guidance.get("follow_up_kind") == FOLLOWABLE,
          f"suggested_call is not list_projects {{}} mechanically_followable: {guidance}")
    listed = ctx.ok("list_projects", guidance["arguments"])
    ids = {p.get("id"): p for p in listed.get("projects") or []}
    check(ctx.data in ids and ctx.code in ids, f"list_projects lacks the projects: {list(ids)}")
    check(listed.get("total_count") == len(listed["projects"]), "total_count != projects")
    check(ids[ctx.data].get("vcs") == "none" and ids[ctx.code].get("vcs") == "git",
          "list_projects: vcs is not none for data and git for code")
    project_ref = ids[ctx.data].get("project_ref")
    check(re.fullmatch(r"~p\d+", str(project_ref)), f"project_ref {project_ref!r} is not ~p<n>")

    started = ctx.start_session(project_ref, "read the five-line note")
    check(started.get("project_id") == ctx.data and started.get("project_ref") == project_ref,
          "work_on_project by ref did not select the data project")
    sid, sref = started["session_id"], started["session_ref"]
    resumed = ctx.ok("work_on_project", {"project": ctx.data, "session_id": sid,
                                         "instruction": "continue reading"})
    check(resumed.get("continuation") == "resumed_explicitly",
          f"explicit resume: continuation {resumed.get('continuation')!r}")
    check(resumed.get("session_id") == sid and resumed.get("session_ref") == sref,
          "explicit resume changed the session id or ref")

    expected = fx.FIVE_LINES.encode()
    pages, texts, revisions = 0, [], set()
    tool, arguments = "read_files", {"project": project_ref, "session_id": sref,
                                     "items": [{"path": "notes/five.txt", "limit": 2}]}
    while True:
        pages += 1
        check(pages <= 3, "reading 5 lines with limit 2 took more than 3 calls")
        out = ctx.ok(tool, arguments)
        [item] = out.get("items") or [None]
        check(item and item.get("path") == "notes/five.txt" and "output" in item,
              f"read_files page {pages}: no output item: {item}")
        page = item["output"]
        texts.append(page.get("text", ""))
        revisions.add(page.get("read_revision"))
        check(page.get("start_line") == 2 * pages - 1 and page.get("total_lines") == 5,
              f"read_files page {pages}: start_line {page.get('start_line')}, total_lines "
              f"{page.get('total_lines')}")
        follow = out.get("suggested_call") or {}
        if not page.get("has_more"):
            check(not follow, "read_files suggested another call after the last page")
            break
        check(follow.get("tool") == "read_files"
              and follow.get("follow_up_kind") == FOLLOWABLE,
              f"read_files page {pages}: has_more without a followable suggested_call")
        tool, arguments = follow["tool"], follow["arguments"]
    check(pages == 3, f"the read took {pages} calls, expected exactly 3")
    check(revisions == {fx.revision_of(expected)},
          f"the pages carry revisions {sorted(map(str, revisions))}, expected one")
    check("".join(texts) == fx.FIVE_LINES, f"lines lost or repeated: {texts}")

    handoff = ctx.ok("read_session_handoff", {"project": ctx.data, "session_id": sid,
                                              "include_workspace": False})
    check(handoff.get("session_id") == sid and handoff.get("session_ref") == sref,
          "read_session_handoff does not carry the session id and ref")
    check(handoff.get("project_ref") == project_ref, "handoff: wrong project_ref")
    return {"session_id": sid, "session_ref": sref, "read_calls": pages,
            "pages": texts, "read_revision": revisions.pop()}


# -- mixed_files_conflict --------------------------------------------------------------------

COPY_NOTE = """\
import hashlib, json, pathlib
inbox, sorted_dir = pathlib.Path("mixed/inbox"), pathlib.Path("mixed/sorted")
data = (inbox / "note.txt").read_bytes()
target, n = sorted_dir / "note.txt", 2
while target.exists():
    target, n = sorted_dir / f"note-{n}.txt", n + 1
with open(target, "xb") as out:
    out.write(data)
listing = {str(d): {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in sorted(d.iterdir())} for d in (inbox, sorted_dir)}
print(json.dumps({"copied_to": target.as_posix(), "listing": listing}))
"""


def mixed_files_conflict(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.data, "sort the inbox into sorted/")["session_id"]
    transferred = {}
    for name in fx.TRANSFERRED:
        data = fx.MIXED_INPUTS[name]
        out = ctx.ok("transfer_project_artifact", {
            "source_project": ctx.data, "source_path": f"mixed/inbox/{name}",
            "destination_project": ctx.data, "destination_path": f"mixed/sorted/{name}"})
        check(out.get("state_changed") is True, f"transfer {name}: state_changed not true")
        check(bare_sha(out.get("sha256")) == fx.sha256_hex(data)
              and out.get("file_bytes") == len(data),
              f"transfer {name}: sha256/file_bytes differ from the source")
        check(ctx.disk("data", f"mixed/sorted/{name}").read_bytes() == data,
              f"transfer {name}: destination bytes differ")
        transferred[name] = out["sha256"]
    out = completed_run("run_script", ctx.script(ctx.data, sid, COPY_NOTE), 0)
    try:
        printed = json.loads(out.get("stdout", "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CaseFailure("the copy script printed no JSON listing") from None
    check(printed["copied_to"] == "mixed/sorted/note-2.txt",
          f"the note was copied to {printed['copied_to']!r}, expected mixed/sorted/note-2.txt")
    inbox, sorted_files = printed["listing"]["mixed/inbox"], printed["listing"]["mixed/sorted"]
    check(inbox == {n: fx.sha256_hex(d) for n, d in fx.MIXED_INPUTS.items()},
          "the inputs changed or are not exactly the 4 inputs")
    check(sorted(sorted_files) == ["blob.bin", "doc.pdf", "image.png", "note-2.txt",
                                   "note.txt"], f"sorted/ holds {sorted(sorted_files)}")
    check(sorted_files["note.txt"] == fx.sha256_hex(fx.CONFLICTING_NOTE.encode()),
          "the conflicting note.txt was overwritten")
    check(sorted_files["note-2.txt"] == fx.sha256_hex(fx.NOTE.encode()), "note-2.txt differs")
    return {"session_id": sid, "transferred_sha256": transferred,
            "input_count": len(inbox), "sorted_count": len(sorted_files),
            "copied_to": printed["copied_to"]}


# -- encoded_csv -----------------------------------------------------------------------------

MERGE_CSV = """\
import csv, os
rows = []
for name, encoding in (("east", "utf-8"), ("west", "utf-16")):
    with open(f"csv/{name}.csv", encoding=encoding, newline="") as f:
        for row in csv.DictReader(f):
            rows.append({**row, "source": name})
os.makedirs("csv/out", exist_ok=True)
with open("csv/out/merged.csv", "w", encoding="utf-8", newline="") as f:
    out = csv.DictWriter(f, ["city", "amount", "source"], lineterminator="\\n")
    out.writeheader()
    out.writerows(rows)
counts = {s: sum(r["source"] == s for r in rows) for s in ("east", "west")}
report = (f"rows: {len(rows)}\\ntotal amount: {sum(int(r['amount']) for r in rows)}\\n"
          f"sources: east={counts['east']} west={counts['west']}\\n")
with open("csv/out/report.txt", "w", encoding="utf-8", newline="") as f:
    f.write(report)
print(report, end="")
"""


def encoded_csv(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.data, "merge the city CSVs")["session_id"]
    completed_run("run_script", ctx.script(ctx.data, sid, MERGE_CSV), 0)
    expected = {"csv/out/merged.csv": fx.MERGED_CSV.encode("utf-8"),
                "csv/out/report.txt": fx.CSV_REPORT.encode("utf-8")}
    for rel, data in expected.items():
        check(ctx.disk("data", rel).read_bytes() == data, f"{rel} does not hold the exact bytes")
    out = ctx.ok("finish_coding_task", {"project": ctx.data, "session_id": sid,
                                        "summary": "merged the CSVs",
                                        "outputs": list(expected)})
    check(out.get("session_id") == sid, "finish_coding_task: wrong session_id")
    receipt = out.get("task_outputs") or {}
    check((receipt.get("requested_count"), receipt.get("verified_count"),
           receipt.get("missing_count"), receipt.get("unavailable_count")) == (2, 2, 0, 0),
          f"task_outputs counts: {receipt}")
    items = receipt.get("items") or []
    check([i.get("path") for i in items] == list(expected), "task_outputs not in request order")
    for item in items:
        data = expected[item["path"]]
        check(item.get("status") == "verified" and bare_sha(item.get("sha256"))
              == fx.sha256_hex(data) and item.get("file_bytes") == len(data),
              f"{item['path']}: not verified with the expected sha256: {item}")
    outcome = out.get("task_outcome") or {}
    check(outcome.get("status") == "pass" and outcome.get("blocking") is False,
          f"task_outcome {outcome}, expected pass, not blocking")
    return {"session_id": sid, "task_outputs": receipt, "task_outcome": outcome}


# -- failure_repair_log_pressure -------------------------------------------------------------

LOG_LINES = 2500
NOISY = """\
import sys
for i in range({lines}):
    print(f"log line {{i:04d}} " + "x" * 40)
print("MMO-ACCEPT-" + "SENTINEL-d3c0de")
sys.stdout.flush()
{ending}
"""


def _noisy_bytes() -> int:
    return sum(len(f"log line {i:04d} " + "x" * 40 + "\n") for i in range(LOG_LINES)) \
        + len(SENTINEL) + 1


def failure_repair_log_pressure(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.data, "make the noisy script pass")["session_id"]
    broken = NOISY.format(lines=LOG_LINES, ending="sys.exit(7)")
    failed = completed_run("run_script", ctx.script(ctx.data, sid, broken), 7)
    call = ctx.client.records[-1]
    check(call.sentinel_occurrences > 0, "the sentinel did not reach the MCP response")
    stdout = str(failed.get("stdout", ""))
    check(stdout.endswith(SENTINEL + "\n"), "stdout does not end with the sentinel line")
    check(stdout.startswith("log line 0000 "), "stdout lost its head")
    check(failed.get("stdout_bytes") == _noisy_bytes(),
          f"stdout_bytes {failed.get('stdout_bytes')}, expected {_noisy_bytes()}")
    omitted = re.search(r"\[\.\.\. (\d+) bytes omitted \.\.\.\]", stdout)
    check(failed.get("stdout_truncated") is True and omitted,
          "137 KB of stdout were not cut with an omitted-bytes line")
    check(len(stdout.encode()) <= 32 * 1024 + 64, "stdout in the result exceeds 32 KiB")
    repaired = NOISY.format(lines=LOG_LINES, ending="sys.exit(0)")
    fixed = completed_run("run_script", ctx.script(ctx.data, sid, repaired), 0)
    check(ctx.client.records[-1].sentinel_occurrences > 0,
          "the repaired run's sentinel did not reach the MCP response")
    return {"session_id": sid, "failed_job_id": failed.get("job_id"), "exit_code": 7,
            "sentinel_occurrences": call.sentinel_occurrences,
            "stdout_bytes": failed.get("stdout_bytes"),
            "omitted_bytes": int(omitted[1]) if omitted else None,
            "repaired_job_id": fixed.get("job_id"), "repaired_exit_code": 0}


# -- pending_independent_join ----------------------------------------------------------------

CHILD = ("import sys\ndata = sys.stdin.read()\n"
         "print('got %d bytes: %s' % (len(data.encode()), ','.join(data.split())))\n")
JOB_INPUT = "alpha\nbeta\n"


def pending_independent_join(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.data, "run a job that reads its input")["session_id"]
    first = len(ctx.client.records)
    pending = ctx.ok("run_process", {"project": ctx.data, "session_id": sid,
                                     "executable": sys.executable, "args": ["-c", CHILD],
                                     "interactive": True, "timeout_secs": 60})
    job = pending.get("job_id")
    check(pending.get("execution_state") == "pending" and pending.get("status") == "running"
          and pending.get("interactive") is True,
          f"interactive run_process is not pending/running: {pending.get('execution_state')}"
          f"/{pending.get('status')}")
    check(re.fullmatch(r"mmo_pjob_[0-9a-f]+", str(job)), f"job_id {job!r}")
    join = pending.get("suggested_call") or {}
    check(join.get("tool") == "wait_for_job_readiness" and join.get("follow_up_kind")
          == FOLLOWABLE and job in (join.get("arguments") or {}).get("job_ids", []),
          f"pending run: suggested_call is not a followable readiness join: {join}")
    other = completed_run("run_script", ctx.script(ctx.data, sid, "print('independent')"), 0)
    check(other.get("job_id") != job and "independent" in other.get("stdout", ""),
          "the independent script did not run as its own job")
    receipt = ctx.ok("write_job_input", {"project": ctx.data, "job_id": job,
                                         "input_id": "input-1", "data": JOB_INPUT,
                                         "close": True})
    check(receipt.get("job_id") == job and receipt.get("input_id") == "input-1"
          and receipt.get("bytes_accepted") == len(JOB_INPUT.encode()),
          f"write_job_input receipt: {receipt}")
    joined = ctx.ok(join["tool"], join["arguments"])
    check(joined.get("ready_job_ids") == [job] and joined.get("pending_job_ids") == []
          and joined.get("timed_out") is False, f"readiness join: {joined}")
    observed = ctx.ok("observe_jobs", {"items": [{"job_id": job}], "tail_lines": 80})
    [item] = observed.get("items") or [{}]
    check(item.get("job_id") == job, "observe_jobs reported another job")
    check(item.get("status") == "completed" and item.get("terminal") is True
          and item.get("exit_code") == 0 and item.get("stdin_closed") is True,
          f"observed job: status {item.get('status')}, exit {item.get('exit_code')}, "
          f"stdin_closed {item.get('stdin_closed')}")
    check("got 11 bytes: alpha,beta" in str(item.get("stdout_tail", "")),
          "the job's output does not show the input it read")
    order = [r.tool for r in ctx.client.records[first:]]
    check(order == ["run_process", "run_script", "write_job_input", "wait_for_job_readiness",
                    "observe_jobs"], f"calls out of order: {order}")
    return {"session_id": sid, "job_id": job, "independent_job_id": other.get("job_id"),
            "input_state": receipt.get("state"), "order": order}


# -- code_repair_review ----------------------------------------------------------------------

VALIDATE = ("import subprocess, sys\n"
            "sys.exit(subprocess.run([sys.executable, '-B', '-m', 'unittest', '-q', "
            "'test_calc']).returncode)\n")


def code_repair_review(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.code, "repair calc.add")["session_id"]
    completed_run("run_script", ctx.script(ctx.code, sid, VALIDATE, purpose="validation"), 1)
    read = ctx.ok("read_files", {"project": ctx.code, "session_id": sid,
                                 "items": [{"path": "calc.py"}]})
    page = read["items"][0]["output"]
    check(page.get("text") == fx.BROKEN_CALC, "read_files calc.py: unexpected text")
    fixed = fx.BROKEN_CALC.replace("return a - b", "return a + b")
    edit = ctx.ok("edit_project_files", {"project": ctx.code, "session_id": sid, "changes": [{
        "kind": "edit", "path": "calc.py", "expected_read_revision": page["read_revision"],
        "edits": [{"kind": "replace_exact", "old_text": "return a - b",
                   "new_text": "return a + b"}]}]})
    check(edit.get("changed") is True and edit.get("state_changed") is True,
          "the fenced edit did not report changed/state_changed")
    [item] = edit.get("items") or [{}]
    check(item.get("path") == "calc.py" and item.get("read_revision")
          == fx.revision_of(fixed.encode()) and item.get("file_bytes") == len(fixed),
          f"edit item: {item}")
    completed_run("run_script", ctx.script(ctx.code, sid, VALIDATE, purpose="validation"), 0)
    review = ctx.ok("review_changes", {"project": ctx.code, "session_id": sid,
                                       "scope": {"kind": "workspace"}})
    files = [(f.get("path"), f.get("additions"), f.get("deletions"))
             for f in review.get("files") or []]
    check(files == [("calc.py", 1, 1)], f"workspace review files: {files}")
    diff = str(review.get("diff", ""))
    check("-    return a - b" in diff and "+    return a + b" in diff,
          "the workspace diff does not show the repair")
    check(review.get("diff_truncated") is False, "diff_truncated is not false")
    return {"session_id": sid, "files": review["files"],
            "read_revision_before": page["read_revision"], "read_revision_after":
            item["read_revision"]}


# -- stale_read_revision ---------------------------------------------------------------------

def stale_read_revision(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.data, "capitalize beta")["session_id"]
    path = ctx.disk("data", "stale/plan.txt")
    first = ctx.ok("read_files", {"project": ctx.data, "session_id": sid,
                                  "items": [{"path": "stale/plan.txt"}]})["items"][0]["output"]
    check(first.get("read_revision") == fx.revision_of(fx.STALE_TEXT.encode()),
          "read_revision is not sha256 of the bytes")
    with open(path, "a", encoding="utf-8") as external:  # the user's editor, not a tool
        external.write(fx.EXTERNAL_LINE)
    external_bytes = path.read_bytes()
    change = {"kind": "edit", "path": "stale/plan.txt", "edits": [
        {"kind": "replace_exact", "old_text": "beta\n", "new_text": "BETA\n"}]}
    ctx.fails("edit_project_files", {"project": ctx.data, "session_id": sid, "changes": [
        {**change, "expected_read_revision": first["read_revision"]}]}, "stale_file_revision")
    check(path.read_bytes() == external_bytes, "the refused edit changed the file")
    fresh = ctx.ok("read_files", {"project": ctx.data, "session_id": sid,
                                  "items": [{"path": "stale/plan.txt"}]})["items"][0]["output"]
    check(fresh.get("read_revision") == fx.revision_of(external_bytes)
          and fresh.get("text") == external_bytes.decode(),
          "the fresh read does not show the external writer's bytes")
    done = ctx.ok("edit_project_files", {"project": ctx.data, "session_id": sid, "changes": [
        {**change, "expected_read_revision": fresh["read_revision"]}]})
    final = ("alpha\nBETA\n" + fx.EXTERNAL_LINE).encode()
    check(path.read_bytes() == final, "the fresh edit lost the external line")
    check(done["items"][0].get("read_revision") == fx.revision_of(final),
          "the edit's read_revision is not sha256 of the new bytes")
    return {"session_id": sid, "stale_revision": first["read_revision"],
            "fresh_revision": fresh["read_revision"],
            "final_revision": done["items"][0]["read_revision"]}


# -- extra_missing_output --------------------------------------------------------------------

def extra_missing_output(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.data, "report a missing output")["session_id"]
    out = ctx.ok("finish_coding_task", {"project": ctx.data, "session_id": sid,
                                        "summary": "one output was never written",
                                        "outputs": ["notes/five.txt", "reports/absent.txt"]})
    receipt, outcome = out.get("task_outputs") or {}, out.get("task_outcome") or {}
    check((receipt.get("requested_count"), receipt.get("verified_count"),
           receipt.get("missing_count"), receipt.get("unavailable_count")) == (2, 1, 1, 0),
          f"task_outputs counts: {receipt}")
    items = receipt.get("items") or [{}, {}]
    check([i.get("path") for i in items] == ["notes/five.txt", "reports/absent.txt"]
          and [i.get("status") for i in items] == ["verified", "missing"]
          and items[1].get("reason"), f"task_outputs items: {items}")
    check(outcome.get("status") == "fail" and outcome.get("blocking") is True
          and "task_outputs_unverified" in (outcome.get("blocking_reasons") or []),
          f"task_outcome {outcome}, expected fail, blocking, task_outputs_unverified")
    return {"session_id": sid, "task_outputs": receipt, "task_outcome": outcome}


# -- extra_large_output_retention ------------------------------------------------------------

LARGE_SCRIPT = """\
import os
os.makedirs("big", exist_ok=True)
block = bytes(range(256)) * 4096
with open("big/large.bin", "wb") as f:
    for _ in range(10):
        f.write(block)
    f.write(b"\\n")
"""


def extra_large_output_retention(ctx: CaseContext) -> dict[str, Any]:
    business = ctx.start_session(ctx.data, "produce the large output")["session_id"]
    recorder = ctx.start_session(ctx.data, "record the lead's calls")["session_id"]
    own = ctx.ok("finish_coding_task", {"project": ctx.data, "session_id": recorder,
                                        "summary": "the recorder's own output",
                                        "outputs": ["big/small.txt"]})["task_outputs"]
    completed_run("run_script", ctx.script(ctx.data, business, LARGE_SCRIPT), 0)
    finished = ctx.ok("finish_coding_task", {"project": ctx.data, "session_id": business,
                                             "summary": "wrote the large output",
                                             "outputs": ["big/large.bin"]},
                      mmo={"record": recorder})
    receipt = finished.get("task_outputs") or {}
    [item] = receipt.get("items") or [{}]
    check(item.get("status") == "verified" and item.get("file_bytes") == fx.LARGE_BYTES
          and bare_sha(item.get("sha256")) == fx.large_bytes_sha256(),
          f"the 10 MiB + 1 output is not verified with its sha256: {item}")

    def work_result(sid: str) -> dict[str, Any]:
        out = ctx.ok("get_work_result_state", {"project": ctx.data, "session_id": sid})
        result = out.get("work_result") or {}
        check(result.get("session_id") == sid, "get_work_result_state: wrong session")
        return result

    kept = work_result(business)
    check(kept.get("status") == "finished" and kept.get("task_outputs") == receipt,
          "the business session's work result does not retain the finish's task_outputs")
    check(work_result(recorder).get("task_outputs") == own,
          "the recorder session's receipt changed when a call was recorded there")
    activity = ctx.ok("read_session_handoff", {"project": ctx.data, "session_id": recorder,
                                               "include_workspace": False})
    recorded = [e for e in activity.get("recent_activity") or []
                if isinstance(e, dict) and e.get("tool") == "finish_coding_task"]
    check(recorded, "the _mmo.record call is not in the recorder's activity")
    cleared = ctx.ok("finish_coding_task", {"project": ctx.data, "session_id": recorder,
                                            "summary": "nothing to hand in this time"})
    check("task_outputs" not in cleared or cleared["task_outputs"] is None,
          "a finish without outputs returned task_outputs")
    check(work_result(recorder).get("task_outputs") is None,
          "a finish without outputs did not clear the recorder's receipt")
    check(work_result(business).get("task_outputs") == receipt,
          "the recorder's finish cleared the business session's receipt")
    return {"business_session": business, "recorder_session": recorder,
            "large_sha256": item.get("sha256"), "large_file_bytes": item.get("file_bytes"),
            "recorded_activity_entries": len(recorded)}


# -- goal_plan_revision ----------------------------------------------------------------------

def goal_plan_revision(ctx: CaseContext) -> dict[str, Any]:
    sid = ctx.start_session(ctx.code, "plan the calculator repair")["session_id"]
    steps = [{"id": "inspect", "title": "Inspect calc.py"}, {"id": "fix", "title": "Fix add"},
             {"id": "verify", "title": "Verify"}]
    prepared = ctx.ok("prepare_goal_workflow", {
        "session_id": sid, "title": "Repair the calculator", "objective": "add() adds",
        "completion_conditions": ["test_calc passes"], "steps": steps,
        "idempotency_key": "prepare-1"})
    goal = mutation(prepared, 1, replayed=False)
    gid = goal["summary"]["goal_id"]
    check(goal["summary"].get("lifecycle") == "active"
          and [s.get("status") for s in goal["plan"]["steps"]] == ["pending"] * 3,
          "prepare: not active with every step pending")

    cp1 = {"goal_id": gid, "expected_revision": 1, "completed_step_ids": ["inspect"],
           "current_step_id": "fix", "summary": "inspected", "idempotency_key": "checkpoint-1"}
    goal = mutation(ctx.ok("checkpoint_goal", cp1), 2, replayed=False)
    check(statuses(goal) == {"inspect": "completed", "fix": "in_progress",
                             "verify": "pending"} and goal["plan"].get("current_step_id")
          == "fix", f"checkpoint: steps {statuses(goal)}")
    plan_before = goal["plan"]
    check(goal["plan"]["steps"][2] == prepared["goal"]["plan"]["steps"][2],
          "checkpoint changed the untouched step's dict")

    revise = {"goal_id": gid, "expected_revision": 2, "reason": "split out the test run",
              "steps": [{"id": "inspect", "title": "Inspect calc.py"},
                        {"id": "fix", "title": "Fix the sign in add"},
                        {"id": "test", "title": "Run test_calc"},
                        {"id": "verify", "title": "Verify"}],
              "idempotency_key": "revise-1"}
    goal = mutation(ctx.ok("revise_goal_plan", revise), 3, replayed=False)
    history = goal.get("plan_history") or {}
    check(history.get("total_count") == 1 and len(history.get("revisions") or []) == 1,
          f"revise: plan_history {history.get('total_count')}, expected 1")
    entry = history["revisions"][0]
    check(entry.get("plan") == plan_before and entry.get("reason") == revise["reason"],
          "plan_history does not hold the plan before the revision with its reason")
    check(statuses(goal) == {"inspect": "completed", "fix": "in_progress", "test": "pending",
                             "verify": "pending"}, f"revise: steps {statuses(goal)}")

    replay = ctx.ok("revise_goal_plan", revise)
    check(replay.get("replayed") is True and replay.get("state_changed") is False
          and replay["goal"] == goal, "the same revise again is not an inert replay")
    ctx.fails("revise_goal_plan", {**revise, "reason": "another reason"},
              "goal_idempotency_conflict")
    ctx.fails("revise_goal_plan", {**revise, "idempotency_key": "revise-stale"},
              "goal_revision_changed")
    ctx.fails("revise_goal_plan", {**revise, "expected_revision": 3, "idempotency_key":
                                   "revise-invalid", "steps": revise["steps"][1:]},
              "invalid_goal_plan")

    current = ctx.ok("get_goal", {"goal_id": gid})["goal"]
    check(current == goal, "a refused call changed the goal")
    card = ctx.ok("present_goal_plan", {"goal_id": gid}).get("goal_plan") or {}
    check(card.get("goal_id") == gid and card.get("revision") == 3
          and card.get("steps") == current["plan"]["steps"]
          and card.get("current_step_id") == "fix" and card.get("completed_step_count") == 1
          and card.get("total_step_count") == 4 and card.get("lifecycle") == "active",
          f"the goal card does not match the goal: {card}")
    handoff = ctx.ok("read_session_handoff", {"project": ctx.code, "session_id": sid,
                                              "include_workspace": False})
    brief = (handoff.get("goal_context") or {}).get("goal") or {}
    brief_steps = (brief.get("plan") or {}).get("steps") or {}
    check(brief.get("goal_id") == gid and brief.get("revision") == 3
          and brief.get("lifecycle") == "active"
          and brief["plan"].get("current_step_id") == "fix"
          and brief_steps.get("items") == [{k: s[k] for k in ("id", "title", "status")}
                                           for s in current["plan"]["steps"]]
          and brief_steps.get("total_count") == 4,
          f"the handoff's goal_context does not converge with the goal: {brief}")

    goal = mutation(ctx.ok("checkpoint_goal", {
        "goal_id": gid, "expected_revision": 3, "completed_step_ids": ["fix", "test", "verify"],
        "summary": "tests pass", "idempotency_key": "checkpoint-2"}), 4, replayed=False)
    check(set(statuses(goal).values()) == {"completed"}
          and goal["plan"].get("current_step_id") is None,
          "checkpoint without current_step_id: not all completed with no current step")
    done = mutation(ctx.ok("update_goal", {
        "goal_id": gid, "expected_revision": 4, "lifecycle": "completed",
        "terminal_reason": "all steps done", "idempotency_key": "complete-1"}), 5,
        replayed=False)
    check(done["summary"].get("lifecycle") == "completed"
          and done["summary"].get("terminal_at_unix_ms") is not None
          and done["plan"] == goal["plan"] and done["plan_history"] == goal["plan_history"],
          "complete: lifecycle/terminal_at/plan/history wrong")
    ctx.fails("checkpoint_goal", {"goal_id": gid, "expected_revision": 5,
                                  "summary": "too late", "idempotency_key": "checkpoint-3"},
              "goal_terminal")
    historical = ctx.ok("checkpoint_goal", cp1)
    check(historical.get("replayed") is True and historical.get("state_changed") is False
          and historical["goal"] == done, "the first checkpoint's key is not an inert replay "
                                          "of the terminal goal")
    return {"session_id": sid, "goal_id": gid, "final_revision": 5,
            "history_count": history["total_count"], "card_revision": card["revision"]}


def mutation(output: dict[str, Any], revision: int, *, replayed: bool) -> dict[str, Any]:
    goal = output.get("goal") or {}
    summary = goal.get("summary") or {}
    check(output.get("replayed") is replayed and output.get("state_changed") is (not replayed),
          f"goal mutation: replayed {output.get('replayed')!r}, state_changed "
          f"{output.get('state_changed')!r}")
    check(summary.get("revision") == revision,
          f"goal revision {summary.get('revision')!r}, expected {revision}")
    check(isinstance(goal.get("plan"), dict) and isinstance(goal["plan"].get("steps"), list),
          "the goal record has no plan.steps")
    return goal


def statuses(goal: dict[str, Any]) -> dict[str, str]:
    return {s.get("id"): s.get("status") for s in goal["plan"]["steps"]}


CASES: dict[str, Callable[[CaseContext], dict[str, Any]]] = {
    "entry_read_recovery": entry_read_recovery,
    "mixed_files_conflict": mixed_files_conflict,
    "encoded_csv": encoded_csv,
    "failure_repair_log_pressure": failure_repair_log_pressure,
    "pending_independent_join": pending_independent_join,
    "code_repair_review": code_repair_review,
    "stale_read_revision": stale_read_revision,
    "extra_missing_output": extra_missing_output,
    "extra_large_output_retention": extra_large_output_retention,
    "goal_plan_revision": goal_plan_revision,
}
