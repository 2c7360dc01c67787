"""A gap the mutation run found in ``mesh.capabilities`` (docs/mutation-survivors.md)."""

from __future__ import annotations

import os

import pytest

from mmo_kernel.mesh.capabilities import (
    CAPABILITIES_FILE,
    CapabilityUnavailable,
    read_capabilities,
)


def test_a_capabilities_file_that_is_not_utf8_is_refused_like_any_invalid_one(tmp_path):
    path = tmp_path / CAPABILITIES_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b'{"schema_version": 1, "root": "\xff\xfe"}')
    os.close(fd)
    with pytest.raises(CapabilityUnavailable,
                       match=r"^capability is unavailable \(invalid capabilities file\)$"):
        read_capabilities(tmp_path)
