"""Every audit event says who acted: ``actor`` (agent, cli, ui, mesh) and ``actor_name``."""

from __future__ import annotations

import getpass
import os
import threading

import pytest

from mmo_kernel.api import ACTOR_KINDS, acting_as, current_actor, login_name
from mmo_kernel.host_api import set_process_actor
from mmo_kernel.state.actor import reset_process_actor
from mmo_kernel.state.audit import append_audit, external_lead, native_actor, read_jsonl


def _who(log):
    return [(e["event"], e.get("actor"), e.get("actor_name")) for e in read_jsonl(log)]


@pytest.fixture
def log(tmp_path):
    return tmp_path / "audit.jsonl"


def test_the_four_kinds_are_the_contract():
    assert ACTOR_KINDS == ("agent", "cli", "ui", "mesh")


def test_with_nothing_set_the_person_running_the_program_acted(log):
    append_audit(log, "run_started", "run-1")
    assert _who(log) == [("run_started", "cli", getpass.getuser())]
    assert login_name() == getpass.getuser()


def test_a_block_names_its_actor_and_ends_with_the_block(log):
    with acting_as("mesh", "lead"):
        append_audit(log, "agent_started", "run-1", job_id="j1")
        with acting_as("ui", "ada") as actor:
            assert (current_actor().kind, current_actor().name) == ("ui", "ada") == (
                actor.kind, actor.name)
            append_audit(log, "agent_result_accepted", "run-1", job_id="j1")
        append_audit(log, "agent_result_read", "run-1", job_id="j1")
    append_audit(log, "session_stopped", "run-1")
    assert _who(log) == [("agent_started", "mesh", "lead"),
                         ("agent_result_accepted", "ui", "ada"),
                         ("agent_result_read", "mesh", "lead"),
                         ("session_stopped", "cli", getpass.getuser())]


def test_the_process_actor_covers_every_thread_and_a_block_still_wins(log):
    previous = set_process_actor("agent", "writer")
    try:
        worker = threading.Thread(target=append_audit, args=(log, "agent_finished", "run-1"))
        worker.start()
        worker.join()
        with acting_as("mesh", "lead"):
            append_audit(log, "agent_cancelled", "run-1")
    finally:
        reset_process_actor(previous)
    append_audit(log, "session_stopped", "run-1")
    assert _who(log) == [("agent_finished", "agent", "writer"),
                         ("agent_cancelled", "mesh", "lead"),
                         ("session_stopped", "cli", getpass.getuser())]


def test_a_field_the_caller_passes_is_never_overridden(log):
    with acting_as("mesh", "lead"):
        append_audit(log, "a", "run-1", actor="ui", actor_name="ada")
        append_audit(log, "b", "run-1", actor_name="ops-bot")
        append_audit(log, "c", "run-1")
    assert _who(log) == [("a", "ui", "ada"), ("b", None, "ops-bot"), ("c", "mesh", "lead")]


@pytest.mark.parametrize(("kind", "name", "phrase"), [
    ("robot", "r2", "actor kind must be one of agent, cli, ui, mesh (got 'robot')"),
    ("cli", "", "actor name must be a non-empty string (got '')"),
])
def test_a_bad_actor_is_one_line_and_changes_nothing(log, kind, name, phrase):
    with pytest.raises(ValueError) as caught, acting_as(kind, name):
        append_audit(log, "never", "run-1")
    assert str(caught.value) == phrase
    with pytest.raises(ValueError, match="actor must be one of agent, cli, ui, mesh"):
        append_audit(log, "never", "run-1", actor="robot")
    assert not log.exists()
    append_audit(log, "after", "run-1")
    assert _who(log) == [("after", "cli", getpass.getuser())]


def test_native_agents_and_external_leads_are_still_named_beside_the_actor(log):
    with acting_as("mesh", "repo_scout"), native_actor("repo_scout"):
        append_audit(log, "agent_started", "run-1")
    with external_lead("alice"), acting_as("mesh", "alice"):
        append_audit(log, "agent_result_accepted", "run-1")
    first, second = read_jsonl(log)
    assert (first["native_agent"], first["actor"], first["actor_name"]) == (
        "repo_scout", "mesh", "repo_scout")
    assert (second["external_lead"], second["actor"], second["actor_name"]) == (
        "alice", "mesh", "alice")


def test_a_user_without_a_login_name_is_named_by_uid(log, monkeypatch):
    """No LOGNAME/USER and a uid with no passwd entry (a container's arbitrary uid).

    The missing passwd entry is injected: it cannot be produced without root.
    """
    import pwd

    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    append_audit(log, "run_started", "run-1")
    assert _who(log) == [("run_started", "cli", str(os.getuid()))]
