"""Building a writer's worktree: the workspace's HEAD plus its in-scope uncommitted state."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from mmo_kernel.workspace import check_relative_path

from .gitcmd import GitError, git_out, git_paths, run_git


def repo_location(workspace: Path) -> tuple[Path, str]:
    """``(toplevel, prefix)`` of the repository holding ``workspace``; prefix has no slash."""
    probe = run_git(workspace, "rev-parse", "--is-inside-work-tree", check=False)
    if probe.returncode != 0 or probe.stdout.strip() != b"true":
        raise ValueError(
            f"workspace {str(workspace)!r} is not inside a git work tree; run `git init` and "
            "commit there, or use the `copy` workspace isolator ([coordination] isolation = "
            "\"copy\") for directories that are not git repositories"
        )
    toplevel = Path(git_out(workspace, "rev-parse", "--show-toplevel"))
    prefix = git_out(workspace, "rev-parse", "--show-prefix").rstrip("/")
    return toplevel, prefix


def head_commit(workspace: Path) -> str:
    """The commit HEAD names; a repository without commits cannot host a worktree."""
    proc = run_git(workspace, "rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
    if proc.returncode != 0:
        raise ValueError(
            f"git repository at {str(workspace)!r} has no commits yet; commit once or use "
            "the `copy` workspace isolator"
        )
    return proc.stdout.decode().strip()


def dirty_paths(workspace: Path, scopes: list[str]) -> list[str]:
    """In-scope paths that differ from HEAD: modified, added, deleted or untracked."""
    changed = git_paths(workspace, "diff", "--name-only", "-z", "--no-renames", "--relative",
                        "--no-ext-diff", "HEAD", "--", *scopes)
    untracked = git_paths(workspace, "ls-files", "-z", "--others", "--exclude-standard",
                          "--", *scopes)
    return sorted({p.rstrip("/") for p in changed} | {p.rstrip("/") for p in untracked})


def _copy_entry(src: Path, dst: Path) -> None:
    info = src.lstat()
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    elif dst.is_dir():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISREG(info.st_mode):
        shutil.copyfile(src, dst, follow_symlinks=False)
        os.chmod(dst, stat.S_IMODE(info.st_mode))


def copy_dirty_state(workspace: Path, root: Path, paths: list[str]) -> None:
    """Mirror each dirty path of the workspace into the worktree (deleted ones are removed)."""
    for rel in paths:
        check_relative_path(rel)
        src, dst = workspace / rel, root / rel
        if os.path.lexists(src):
            if src.is_dir() and not src.is_symlink():
                continue  # a nested repository or submodule directory: not copied
            _copy_entry(src, dst)
        elif os.path.lexists(dst):
            dst.unlink() if (dst.is_symlink() or not dst.is_dir()) else shutil.rmtree(dst)


def commit_base(worktree: Path, label: str) -> str:
    """Commit the copied dirty state on the private branch; that commit is the patch base."""
    run_git(worktree, "add", "-A")
    run_git(worktree, "commit", "-q", "--no-verify", "--allow-empty", "--no-gpg-sign",
            "-m", f"mmo: base for {label} (HEAD plus the workspace's uncommitted in-scope state)")
    return git_out(worktree, "rev-parse", "HEAD")


def create_branch(toplevel: Path, branch: str, commit: str) -> None:
    """Create ``refs/heads/<branch>`` only if it does not exist yet."""
    try:
        run_git(toplevel, "update-ref", "-m", "mmo: private writer branch",
                f"refs/heads/{branch}", commit, "")
    except GitError as exc:
        raise RuntimeError(
            f"private branch {branch!r} already exists in {str(toplevel)!r} "
            f"(a previous writer with this label was not cleaned up): {exc.stderr.strip()}"
        ) from None


def delete_branch(toplevel: Path, branch: str) -> None:
    """Delete the private branch if it is there (without touching git config)."""
    ref = f"refs/heads/{branch}"
    if run_git(toplevel, "rev-parse", "--verify", "-q", ref, check=False).returncode == 0:
        run_git(toplevel, "update-ref", "-d", ref)


def add_worktree(toplevel: Path, path: Path, branch: str) -> None:
    run_git(toplevel, "worktree", "add", "--quiet", str(path), branch)


def remove_worktree(toplevel: Path, path: Path) -> None:
    """Unregister and delete the worktree; a vanished directory is pruned."""
    listing = run_git(toplevel, "worktree", "list", "--porcelain", "-z").stdout
    mine = os.path.realpath(path)
    registered = any(
        line.startswith("worktree ") and os.path.realpath(line[9:]) == mine
        for line in listing.decode("utf-8", "surrogateescape").split("\0")
    )
    if registered and path.exists():
        run_git(toplevel, "worktree", "remove", "--force", "--force", str(path))
    elif registered:
        run_git(toplevel, "worktree", "prune")
    if os.path.lexists(path):
        shutil.rmtree(path)
