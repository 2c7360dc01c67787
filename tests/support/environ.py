"""The environment a job's agent runs with, read from its live app-server.

A job host may be forked from the warm host (``mmo_kernel.hosts.warm_host``): its
``/proc/<pid>/environ`` then shows the warm host's start-up environment, not the one
it runs with. The app-server the host starts is exec'd with the host's environment,
so that is where a test reads what the agent was given.
"""

from __future__ import annotations

from pathlib import Path

from support.waiting import wait_until


def process_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def agent_environ(job_id: str) -> dict[str, str]:
    """The live app-server's environment of ``job_id`` (waits for it to be recorded)."""
    from mmo_kernel.api import load_job

    pid = wait_until(lambda: load_job(job_id).get("app_server_pid"),
                     what=f"the app-server of {job_id}")
    return process_environ(pid)
