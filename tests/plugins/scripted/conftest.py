"""Every scripted-model test runs in private MMO dirs and must leave no process behind."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated(mmo_env, mmo_process_guard):
    yield
