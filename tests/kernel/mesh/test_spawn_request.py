"""One spawn model: the request the mesh validates is the very one admission judges.

A spawn arrives either as mesh tool arguments (``agent_spawn``,
``agents_spawn``) or through the Python API (``spawn_job``, ``spawn_jobs``);
both must accept and refuse exactly the same requests, with the same words.
"""

from __future__ import annotations

import pytest
from kernel.mesh.realkit import refused

from mmo_kernel.jobs.admission import parse_requests
from mmo_kernel.mcp.handlers import ToolArgumentError, validate
from mmo_kernel.mesh.arguments import SpawnRequest

WRITER = {"agent": "writer", "task": "fix it", "mode": "workspace-write",
          "write_scopes": ["src/"]}
READER = {"agent": "plain", "task": "look"}
SPAWNABLE = ("writer", "plain")


def test_a_request_validated_at_the_mesh_reaches_admission_unchanged():
    one = validate("agent_spawn", WRITER, SPAWNABLE)
    assert isinstance(one, SpawnRequest)
    assert parse_requests([one])[0] is one, "admission takes the mesh's model as it is"
    batch = validate("agents_spawn", {"agents": [WRITER, READER]}, SPAWNABLE)
    assert [r is b for r, b in zip(parse_requests(batch.agents), batch.agents, strict=True)] == [
        True, True]
    assert parse_requests([dict(WRITER)]) == [one], "the API's dicts build the same model"
    assert one.write_scopes == ["src/"], "one field name from the wire to admission"


@pytest.mark.parametrize("field, value", [
    ("write_scopes", "src/"),
    ("write_scopes", ["src/", 3]),
    ("mode", "write"),
    ("surprise", True),
])
def test_a_malformed_request_gets_the_same_reason_from_the_mesh_and_the_api(field, value):
    arguments = {**WRITER, field: value}
    with pytest.raises(ToolArgumentError) as mesh:
        validate("agent_spawn", arguments, SPAWNABLE)
    with pytest.raises(ValueError) as api:
        parse_requests([arguments])
    mesh_reason = str(mesh.value).removeprefix("invalid tool arguments for agent_spawn: ")
    assert str(api.value) == f"job spec 0: {mesh_reason}"
    assert mesh_reason.startswith(f"{field}"), mesh_reason


BAD_SCOPES = [
    ({"agent": "writer", "task": "x", "mode": "workspace-write",
      "write_scopes": ["../outside"]}, "escapes the workspace"),
    ({"agent": "writer", "task": "x", "mode": "workspace-write"},
     "requires an explicit write scope"),
    ({"agent": "plain", "task": "x", "write_scopes": ["src"]},
     "write_scopes only apply to mode workspace-write"),
]


def test_a_bad_write_scope_is_refused_alike_through_the_mesh_and_the_api(team):
    from mmo_kernel.api import list_jobs, spawn_job, spawn_jobs

    root = team.root()
    for arguments, phrase in BAD_SCOPES:
        with pytest.raises(ValueError, match=phrase) as one:
            spawn_job(team.session_id, "lead", None, arguments["agent"], task=arguments["task"],
                      mode=arguments.get("mode", "read-only"),
                      write_scope_values=arguments.get("write_scopes"))
        with pytest.raises(ValueError, match=phrase) as many:
            spawn_jobs([arguments], team.session_id, "lead")
        expected = f"ValueError: {one.value}"
        assert f"ValueError: {many.value}" == expected
        assert refused(root, "agent_spawn", arguments) == expected
        assert refused(root, "agents_spawn", {"agents": [READER, arguments]}) == expected
    assert list_jobs(team.session_id) == [], "a refused spawn creates nothing"
