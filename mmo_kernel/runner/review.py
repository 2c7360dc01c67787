"""``review_changes`` on the runner (spec 12 "Review, finish and work results").

Three scopes: ``workspace`` (the working tree against ``HEAD``, untracked files
included), ``commit`` (one commit against its first parent) and ``job`` (a
worker's captured patch, read from the job's own directory through
``mmo_kernel.api``). Git runs read-only: no hooks, no pager, no prompts, no
optional index lock, literal pathspecs (the settings of the git-worktree
isolator, which the kernel may not import). Every file gets ``status``,
``additions`` and ``deletions`` parsed from the diff itself; the diff text is
cut at a line boundary at 128 KiB (``diff_truncated``).
"""

from __future__ import annotations

import base64
import codecs
import difflib
import hashlib
import json
import os
import re
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mmo_kernel.project_tools.envelope import ToolFailure
from mmo_kernel.project_tools.paths import open_regular, scrub, split_relative
from mmo_kernel.runner.context import CallContext
from mmo_kernel.runner.files import parse_arguments

MAX_DIFF_BYTES = 128 * 1024
MAX_FILES = 1000
MAX_UNTRACKED_READ = 16 * 1024 * 1024
GIT_TIMEOUT_SECONDS = 30
_REDIRECTING_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX",
    "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS",
)
_GIT_CONFIG = (
    "core.hooksPath=/dev/null", "core.autocrlf=false", "core.quotePath=false",
    "core.fsmonitor=false", "core.pager=cat", "diff.noprefix=false",
    "diff.mnemonicPrefix=false", "diff.relative=false", "diff.external=", "color.ui=false",
    "gc.auto=0", "maintenance.auto=false",
)
_DIFF_FLAGS = ("--no-renames", "--no-color", "--no-ext-diff", "--no-textconv", "--relative",
               "--src-prefix=a/", "--dst-prefix=b/")


# ---------------------------------------------------------------- git

def git_env() -> dict[str, str]:
    """The runner's environment minus git redirections, plus no prompts/pager/locks."""
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING_ENV}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
                "GIT_EDITOR": ":", "GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "1",
                "LC_ALL": "C"})
    return env


def run_git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """One read-only git command in ``cwd``; a failure is one line without machine paths."""
    argv = ["git", "--no-pager"]
    for item in _GIT_CONFIG:
        argv += ["-c", item]
    try:
        proc = subprocess.run(argv + list(args), cwd=cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, env=git_env(), timeout=GIT_TIMEOUT_SECONDS,
                              check=False)
    except FileNotFoundError:
        raise ToolFailure("not_a_git_project", "git is not installed on the runner") from None
    except subprocess.TimeoutExpired:
        raise ToolFailure("timeout", f"git {args[0]} took longer than "
                          f"{GIT_TIMEOUT_SECONDS} s") from None
    if check and proc.returncode != 0:
        detail = scrub(proc.stderr.decode("utf-8", "replace").strip(), cwd)
        raise ToolFailure("invalid_arguments", f"git {args[0]} failed: {detail[:300]}")
    return proc


def git_status(root: Path) -> list[dict[str, str]] | None:
    """The work tree's changes (``git status --porcelain``, hooks and optional locks off):
    ``[{"path", "status"[, "from_path"]}]`` with porcelain XY codes; None if git fails."""
    try:
        proc = run_git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                       check=False)
    except ToolFailure:
        return None
    if proc.returncode != 0:
        return None
    entries = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    files, index = [], 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        item = {"path": entry[3:], "status": entry[:2]}
        if entry[0] in "RC" and index < len(entries):  # a rename's source follows
            item["from_path"] = entries[index]
            index += 1
        files.append(item)
    return files


def git_root(root: Path) -> bool:
    """Whether the project lies inside a git work tree."""
    try:
        proc = run_git(root, "rev-parse", "--is-inside-work-tree", check=False)
    except ToolFailure:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == b"true"


def _empty_tree(root: Path) -> str:
    return run_git(root, "hash-object", "-t", "tree", "/dev/null").stdout.decode().strip()


def _commit_id(root: Path, rev: str) -> str | None:
    proc = run_git(root, "rev-parse", "--verify", "--quiet", "--end-of-options",
                   f"{rev}^{{commit}}", check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


# ---------------------------------------------------------------- diff parsing

@dataclass
class FileDiff:
    """One file of a diff: its stats and its text."""

    path: str
    status: str = "modified"
    additions: int = 0
    deletions: int = 0
    binary: bool = False
    lines: list[str] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "additions": self.additions,
                "deletions": self.deletions, "binary": self.binary}


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_OCTAL = re.compile(r"[0-7]{3}")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(text: str) -> str:
    """Git's C-style quoted path (``"a/x\\ty"``) back to text."""
    if not (len(text) >= 2 and text[0] == '"' and text[-1] == '"'):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if _OCTAL.fullmatch(body[i + 1:i + 4]):
                out.append(int(body[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out += ch.encode("utf-8")
        i += 1
    return out.decode("utf-8", "replace")


def _strip_prefix(path: str) -> str:
    path = _unquote(path)
    return path[2:] if path[:2] in ("a/", "b/") else path


def _header_path(rest: str) -> str:
    """The path of ``diff --git a/P b/P`` (no renames: both sides are the same path)."""
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        return _strip_prefix(rest[: end + 1] if end > 0 else rest)
    size = (len(rest) - 5) // 2
    if size > 0 and rest[:2] == "a/" and rest[2 + size:] == " b/" + rest[2:2 + size]:
        return rest[2:2 + size]
    return _strip_prefix(rest.split(" b/", 1)[0])


def parse_diff(text: str) -> list[FileDiff]:
    """Split a git diff into files with status and exact line counts (hunks are counted
    by their headers, so a content line like ``--- x`` is never taken for a header)."""
    files: list[FileDiff] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    current: FileDiff | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            current = FileDiff(path=_header_path(line[len("diff --git "):]))
            files.append(current)
            current.lines.append(line)
            i += 1
            continue
        if current is None:
            i += 1
            continue
        current.lines.append(line)
        i += 1
        match = _HUNK.match(line)
        if match:
            old_left = int(match.group(1)) if match.group(1) is not None else 1
            new_left = int(match.group(2)) if match.group(2) is not None else 1
            while (old_left > 0 or new_left > 0) and i < len(lines):
                body = lines[i]
                if body.startswith("+"):
                    current.additions += 1
                    new_left -= 1
                elif body.startswith("-"):
                    current.deletions += 1
                    old_left -= 1
                elif body.startswith("\\"):
                    pass
                else:
                    old_left -= 1
                    new_left -= 1
                current.lines.append(body)
                i += 1
            continue
        if line.startswith("new file mode"):
            current.status = "added"
        elif line.startswith("deleted file mode"):
            current.status = "deleted"
        elif line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
            current.path = _strip_prefix(line[4:])
        elif line.startswith("--- ") and not line.startswith("--- /dev/null") \
                and current.status == "deleted":
            current.path = _strip_prefix(line[4:])
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            current.binary = True
    return files


def _collapse_binary(files: list[FileDiff]) -> None:
    """A captured ``--binary`` diff carries base85 blobs: show one line instead."""
    for item in files:
        if "GIT binary patch" in item.lines:
            cut = item.lines.index("GIT binary patch")
            item.lines = item.lines[:cut] + [
                f"Binary files {'/dev/null' if item.status == 'added' else 'a/' + item.path} "
                f"and {'/dev/null' if item.status == 'deleted' else 'b/' + item.path} differ"]


# ---------------------------------------------------------------- synthesized diffs

def _as_text(data: bytes) -> str | None:
    if b"\0" in data[:8000]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _looks_binary(head: bytes) -> bool:
    """git's test on a file's first bytes: a NUL, or (MMO's addition) bytes that are not
    UTF-8; a character cut at the end of ``head`` does not count."""
    if b"\0" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head)
    except UnicodeDecodeError:
        return True
    return False


def _hunk_lines(text: str, sign: str) -> list[str]:
    body = text.split("\n")
    ends_with_newline = text.endswith("\n")
    if ends_with_newline:
        body.pop()
    out = [sign + line for line in body]
    if not ends_with_newline:
        out.append("\\ No newline at end of file")
    return out


def new_file_diff(path: str, data: bytes, mode: str = "100644") -> FileDiff:
    """The diff git would show for an untracked (new) file."""
    item = FileDiff(path=path, status="added")
    item.lines = [f"diff --git a/{path} b/{path}", f"new file mode {mode}"]
    text = _as_text(data)
    if text is None:
        item.binary = True
        item.lines.append(f"Binary files /dev/null and b/{path} differ")
        return item
    if not data:
        return item
    added = _hunk_lines(text, "+")
    item.additions = sum(1 for line in added if line.startswith("+"))
    item.lines += ["--- /dev/null", f"+++ b/{path}", f"@@ -0,0 +1,{item.additions} @@", *added]
    return item


def _text_diff(path: str, before: bytes | None, after: bytes | None) -> FileDiff:
    """A unified diff of two contents (None = absent) for the copy isolator's file sets."""
    if before is None and after is not None:
        return new_file_diff(path, after)
    item = FileDiff(path=path, status="deleted" if after is None else "modified")
    item.lines = [f"diff --git a/{path} b/{path}"]
    if after is None:
        item.lines.append("deleted file mode 100644")
    old_text = _as_text(before or b"")
    new_text = _as_text(after or b"")
    if old_text is None or new_text is None:
        item.binary = True
        item.lines.append(f"Binary files a/{path} and "
                          f"{'/dev/null' if after is None else 'b/' + path} differ")
        return item
    body = list(difflib.unified_diff(old_text.splitlines(keepends=True),
                                     new_text.splitlines(keepends=True),
                                     f"a/{path}", "/dev/null" if after is None else f"b/{path}"))
    for line in body:
        stripped = line.rstrip("\n")
        if line.startswith("+") and not line.startswith("+++"):
            item.additions += 1
        elif line.startswith("-") and not line.startswith("---"):
            item.deletions += 1
        item.lines.append(stripped)
        if not line.endswith("\n") and not line.startswith(("---", "+++", "@@")):
            item.lines.append("\\ No newline at end of file")
    return item


# ---------------------------------------------------------------- scopes

class _Workspace(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["workspace"]


class _Commit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["commit"]
    rev: str = Field(min_length=1, max_length=256)


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["job"]
    job_id: str = Field(min_length=1, max_length=200)


class _ReviewArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")
    session_id: str | None = None
    scope: Annotated[_Workspace | _Commit | _Job, Field(discriminator="kind")]
    paths: list[str] | None = Field(default=None, max_length=200)


def _selected(path: str, filters: list[str] | None) -> bool:
    if not filters:
        return True
    return any(f == "" or path == f or path.startswith(f + "/") for f in filters)


def _untracked(root: Path, filters: list[str] | None) -> list[FileDiff]:
    """Untracked (not ignored) files as new-file diffs; text is kept only while the diff
    budget lasts (their stats are always counted)."""
    raw = run_git(root, "ls-files", "--others", "--exclude-standard", "-z", "--",
                  *(filters or [])).stdout.decode("utf-8", "surrogateescape")
    found: list[FileDiff] = []
    budget = MAX_DIFF_BYTES
    for rel in sorted(p.rstrip("/") for p in raw.split("\0") if p)[:MAX_FILES + 1]:
        if not _selected(rel, filters):
            continue
        item = _untracked_file(root, rel, keep_text=budget > 0)
        budget -= sum(len(line) + 1 for line in item.lines)
        found.append(item)
    return found


def _untracked_file(root: Path, rel: str, *, keep_text: bool) -> FileDiff:
    path = root / rel
    try:
        info = os.lstat(path)
    except OSError:
        return FileDiff(path=rel, status="added")
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path).encode("utf-8", "surrogateescape")
        except OSError:
            target = b""
        return new_file_diff(rel, target, "120000")
    mode = "100755" if info.st_mode & 0o100 else "100644"
    try:
        fd, _info, _ = open_regular(root, rel)
    except ToolFailure:  # a directory (nested repository), special file or a race
        return FileDiff(path=rel, status="added")
    try:
        head = os.read(fd, 8000)
        if keep_text and info.st_size <= MAX_UNTRACKED_READ:
            data = head
            while chunk := os.read(fd, 1024 * 1024):
                data += chunk
            return new_file_diff(rel, data, mode)
        item = FileDiff(path=rel, status="added",
                        lines=[f"diff --git a/{rel} b/{rel}", f"new file mode {mode}"])
        if _looks_binary(head):
            item.binary = True
            item.lines.append(f"Binary files /dev/null and b/{rel} differ")
            return item
        newlines, last = head.count(b"\n"), head[-1:]
        while chunk := os.read(fd, 1024 * 1024):
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
        item.additions = newlines + (1 if last not in (b"", b"\n") else 0)
        item.lines.append(f"@@ -0,0 +1,{item.additions} @@ (content not shown: diff limit)")
        return item
    finally:
        os.close(fd)


def _git_diff(root: Path, base: str, target: str | None, filters: list[str] | None
              ) -> list[FileDiff]:
    args = ["diff", *_DIFF_FLAGS, base] + ([target] if target else []) + ["--", *(filters or [])]
    raw = run_git(root, *args).stdout
    return parse_diff(raw.decode("utf-8", "replace"))


def _workspace(root: Path, filters: list[str] | None) -> tuple[list[FileDiff], bool]:
    if not git_root(root):
        return _plain_list(root, filters), False
    head = _commit_id(root, "HEAD")
    base = head or _empty_tree(root)
    return _git_diff(root, base, None, filters) + _untracked(root, filters), True


def _plain_list(root: Path, filters: list[str] | None) -> list[FileDiff]:
    """A non-git project has no base: its regular files, listed without a diff."""
    found: list[FileDiff] = []
    for current, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(current, d)))
        rel_dir = Path(current).relative_to(root).as_posix()
        for name in sorted(names):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if os.path.isfile(os.path.join(current, name)) and not os.path.islink(
                    os.path.join(current, name)) and _selected(rel, filters):
                found.append(FileDiff(path=rel, status="untracked"))
                if len(found) > MAX_FILES:
                    return found
    return found


def _commit(root: Path, rev: str, filters: list[str] | None) -> list[FileDiff]:
    if not git_root(root):
        raise ToolFailure("not_a_git_project", "the project is not a git repository; "
                          "review scope commit needs git (scope workspace lists its files)")
    if rev.startswith("-") or any(c in rev for c in "\0\n\r"):
        raise ToolFailure("invalid_arguments", "scope.rev: not a revision")
    commit = _commit_id(root, rev)
    if commit is None:
        raise ToolFailure("invalid_arguments", f"scope.rev: unknown commit {rev[:80]}")
    parents = run_git(root, "rev-list", "--parents", "-n", "1", commit).stdout.decode().split()
    base = parents[1] if len(parents) > 1 else _empty_tree(root)
    return _git_diff(root, base, commit, filters)


def _job(root: Path, job_id: str, session_id: str | None,
         filters: list[str] | None) -> list[FileDiff]:
    """A worker's captured patch: only for a job of this same MMO session."""
    from mmo_kernel import api
    from mmo_kernel.state.files import read_json
    from mmo_kernel.workspace.patches import Patch

    unknown = ToolFailure("job_not_found", f"no job {job_id[:80]} in this session")
    if not session_id:
        raise ToolFailure("invalid_arguments", "session_id is required for scope job")
    try:
        record = api.load_job(job_id)
    except (FileNotFoundError, ValueError, OSError, RuntimeError):
        raise unknown from None
    if record.get("session_id") != session_id:
        raise unknown
    summary = record.get("patch")
    if not isinstance(summary, dict):
        raise ToolFailure("invalid_arguments",
                          f"job {job_id} has no captured patch (status {record.get('status')}); "
                          "a writer's patch is captured when its turn ends")
    try:
        patch = Patch.model_validate(read_json(api.job_dir(job_id) / "patch.json"))
    except (FileNotFoundError, ValueError, OSError):
        raise ToolFailure("job_not_found", f"job {job_id}'s captured patch is missing") from None
    if patch.format == "mmo-file-set":
        try:
            files = _file_set(root, patch.diff)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ToolFailure("invalid_arguments",
                              f"job {job_id}'s captured patch is malformed") from None
    else:
        text = patch.diff
        if text.startswith("base64:"):
            text = base64.b64decode(text[len("base64:"):]).decode("utf-8", "replace")
        files = parse_diff(text)
        _collapse_binary(files)
    return [f for f in files if _selected(f.path, filters)]


def _file_set(root: Path, text: str) -> list[FileDiff]:
    """The copy isolator's JSON file set as diffs; the preimage comes from the project
    while it still holds the base bytes (sha256 checked)."""
    doc = json.loads(text)
    files = []
    for entry in doc.get("files", []):
        rel = entry["relative_path"]
        before, after = entry.get("before") or {}, entry.get("after") or {}
        old: bytes | None = None
        if before.get("kind") != "absent":
            old = _base_bytes(root, rel, before.get("sha256"))
        new = (None if after.get("kind") == "absent"
               else base64.b64decode(after.get("content_base64", "")))
        if before.get("kind") != "absent" and old is None:
            old = b""  # base no longer in the project: shown as a whole-file replacement
        files.append(_text_diff(rel, old, new))
    return files


def _base_bytes(root: Path, rel: str, digest: str | None) -> bytes | None:
    try:
        fd, _info, _ = open_regular(root, rel)
    except ToolFailure:
        return None
    try:
        data = b""
        while chunk := os.read(fd, 1024 * 1024):
            data += chunk
    finally:
        os.close(fd)
    return data if hashlib.sha256(data).hexdigest() == digest else None


def _assemble(files: Iterable[FileDiff]) -> tuple[str, bool]:
    """The diff text, cut at a line boundary so it holds at most 128 KiB."""
    parts: list[str] = []
    used = 0
    for item in files:
        for line in item.lines:
            size = len(line.encode("utf-8")) + 1
            if used + size > MAX_DIFF_BYTES:
                return "".join(parts), True
            parts.append(line + "\n")
            used += size
    return "".join(parts), False


def review_changes(arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """``review_changes``: files with stats and a bounded diff for one scope."""
    args = parse_arguments(_ReviewArgs, arguments)
    if ctx.project is None:
        raise ToolFailure("invalid_arguments", "project: field required")
    root = ctx.project.root
    filters = None
    if args.paths:
        filters = ["/".join(split_relative(p, what="paths")) for p in args.paths]
        if "" in filters:  # the project root: everything
            filters = None
    scope = args.scope
    has_diff = True
    if isinstance(scope, _Workspace):
        files, has_diff = _workspace(root, filters)
    elif isinstance(scope, _Commit):
        files = _commit(root, scope.rev, filters)
    else:
        files = _job(root, scope.job_id, args.session_id or ctx.session_id, filters)
    files.sort(key=lambda f: f.path)
    truncated_files = len(files) > MAX_FILES
    files = files[:MAX_FILES]
    diff, diff_truncated = _assemble(files) if has_diff else ("", False)
    output: dict[str, Any] = {
        "scope": scope.model_dump(), "files": [f.public() for f in files], "diff": diff,
        "diff_truncated": diff_truncated, "files_truncated": truncated_files,
    }
    if not has_diff:
        output["vcs"] = "none"
    return output
