"""Agent homes on resume: a model catalog is verified for every agent, fail closed (spec 02)."""

from __future__ import annotations

import pytest

from mmo_kernel.profiles.snapshots import load_snapshot
from mmo_kernel.sessions.create import create_session
from mmo_kernel.sessions.homes import verify_home

pytestmark = pytest.mark.usefixtures("gateway_stopped_after", "mmo_standin")


@pytest.mark.parametrize("missing", ["model_catalog_json", "model_catalog_sha256"])
def test_a_home_that_records_no_model_catalog_fails_validation(mmo_workspace, missing):
    record = create_session("access-efficient-escalation-lab", cwd=mmo_workspace)
    snapshot = load_snapshot(record["snapshot_hash"])
    home = {k: v for k, v in record["homes"]["routine_engineer"].items() if k != missing}
    with pytest.raises(RuntimeError,
                       match="model catalog failed integrity validation for agent "
                             "routine_engineer"):
        verify_home(snapshot, "routine_engineer", home)
    assert verify_home(snapshot, "routine_engineer", record["homes"]["routine_engineer"]) == []
