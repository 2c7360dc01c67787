"""Property: arbitrary input never crashes the server, stdout stays JSON-RPC,
and every valid request is answered with its id.

One long-lived server per test; after each example a sentinel ``ping`` proves
the server is alive and marks the end of that example's replies.
"""

from __future__ import annotations

import json
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel.mesh.meshkit import INIT, MeshProc, line, make_session

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
methods = st.sampled_from(
    ["ping", "tools/list", "tools/call", "initialize", "nope", "notifications/x"]
)
ids = st.one_of(
    st.integers(), st.text(max_size=10), st.booleans(), st.none(), st.floats(allow_nan=False)
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2]), "method": methods},
    optional={"id": ids, "params": json_values},
)


def _is_valid_request(value) -> bool:
    if (
        not isinstance(value, dict)
        or value.get("jsonrpc") != "2.0"
        or not isinstance(value.get("method"), str)
    ):
        return False
    rid = value.get("id")
    return (
        "id" in value
        and isinstance(rid, (int, str))
        and not isinstance(rid, bool)
        and isinstance(value.get("params", {}), dict)
    )


def _exchange(server: MeshProc, payload: bytes, expect_id=None, expect=False):
    """Send ``payload`` then a sentinel; return replies seen before both arrived."""
    sentinel = f"sentinel-{uuid.uuid4()}"
    server.send(payload + line({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}))
    replies, got_sentinel, got_expected = [], False, not expect
    while not (got_sentinel and got_expected):
        raw = server.read_line(timeout=15)
        reply = json.loads(raw)
        assert reply["jsonrpc"] == "2.0" and "id" in reply, reply
        assert ("result" in reply) != ("error" in reply), reply
        if reply["id"] == sentinel:
            got_sentinel = True
            continue
        if expect and reply["id"] == expect_id and type(reply["id"]) is type(expect_id):
            got_expected = True
        replies.append(reply)
    return replies


def _server(mmo_env):
    session = make_session(mmo_env.state_dir)
    server = MeshProc(session.root_env())
    server.send(line(INIT))
    assert json.loads(server.read_line())["id"] == "init"
    return server


def test_arbitrary_bytes_never_break_the_server(mmo_env):
    server = _server(mmo_env)

    @FUZZ
    @given(st.binary(max_size=200))
    def check(data):
        _exchange(server, data.replace(b"\n", b" ") + b"\n")

    try:
        check()
    finally:
        assert server.close() == 0


def test_arbitrary_json_is_answered_by_id_when_it_is_a_valid_request(mmo_env):
    server = _server(mmo_env)

    @FUZZ
    @given(st.one_of(messages, json_values))
    def check(value):
        payload = (json.dumps(value) + "\n").encode()
        expect = _is_valid_request(value)
        _exchange(server, payload, expect_id=value.get("id") if expect else None, expect=expect)

    try:
        check()
    finally:
        assert server.close() == 0
