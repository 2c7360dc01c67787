"""Batch write-scope conflicts found by mutation testing (spec 04 admission)."""

from __future__ import annotations

import pytest
from kernel.jobs.core.test_admission_edges import _reader, _writer, cwd, profile  # noqa: F401

from mmo_kernel.errors import AdmissionError
from mmo_kernel.jobs.admission import check_conflicts


def test_a_read_only_item_first_in_a_batch_does_not_exempt_later_writers(profile, cwd):  # noqa: F811
    src = str((cwd / "src").resolve())
    live = [{"job_id": "w1", "mode": "workspace-write", "write_scope_resolved": [src]}]
    with pytest.raises(AdmissionError, match="write scope conflicts"):
        check_conflicts([_reader(profile, cwd), _writer(profile, cwd, "src/x")], live)
