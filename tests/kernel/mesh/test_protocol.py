"""JSON-RPC 2.0 + MCP lifecycle rules of spec 07, against the real server process."""

from __future__ import annotations

import json
import subprocess
import sys

from kernel.mesh.meshkit import INIT, INITIALIZED, call, make_session, req, run_mesh, session_call

NOT_INIT = {"code": -32600, "message": "server not initialized"}


def _error(reply):
    assert "result" not in reply, reply
    return reply["error"]


def test_requests_before_initialize_are_refused_with_their_id(mmo_env):
    run = run_mesh(
        [req(1, "resources/list"), req("x", "tools/list"),
         call(7, "agent_status", {"job_ids": ["a"]})]
    )
    assert run.returncode == 0
    assert [r["id"] for r in run.responses] == [1, "x", 7]
    assert all(r["error"] == NOT_INIT for r in run.responses)


def test_ping_is_answered_before_initialize(mmo_env):
    """MCP lets a client ping at any time; the Inspector pings to check a fresh connection."""
    run = run_mesh([req(1, "ping"), req(2, "tools/list"), INIT, req(3, "ping")])
    assert run.by_id(1) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert _error(run.by_id(2)) == NOT_INIT, "only ping is exempt from initialization"
    assert run.by_id(3)["result"] == {}


def test_initialize_negotiates_2025_06_18_and_then_ping_works(mmo_env):
    run = run_mesh(
        [
            req(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}),
            INITIALIZED,
            req(2, "ping"),
        ]
    )
    init = run.by_id(1)["result"]
    assert init["protocolVersion"] == "2025-06-18"
    assert init["capabilities"] == {"tools": {"listChanged": False}}
    assert init["serverInfo"]["name"] == "mmo_mesh"
    assert run.by_id(2) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert len(run.responses) == 2, "the initialized notification must not be answered"


def test_unknown_protocol_versions_are_answered_with_2025_06_18(mmo_env):
    for asked in ("1999-01-01", "2024-11-05", "not-a-date"):
        run = run_mesh([req(1, "initialize", {"protocolVersion": asked})])
        assert run.by_id(1)["result"]["protocolVersion"] == "2025-06-18", asked


def test_newer_version_listed_by_the_official_sdk_is_accepted(mmo_env):
    run = run_mesh([req(1, "initialize", {"protocolVersion": "2025-11-25"})])
    assert run.by_id(1)["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_without_protocol_version_is_invalid_params_and_leaves_server_uninitialized(
    mmo_env,
):
    run = run_mesh([req(1, "initialize", {}), req(2, "tools/list")])
    assert _error(run.by_id(1))["code"] == -32602
    assert _error(run.by_id(2)) == NOT_INIT


def test_second_initialize_is_refused(mmo_env):
    run = run_mesh([INIT, req(2, "initialize", {"protocolVersion": "2025-06-18"})])
    assert _error(run.by_id(2))["code"] == -32600


PARSE_ERRORS = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":{"b":1,"b":1}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"\\ud800"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\\udfff":1}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"} trailing',
    b'\xff\xfe{"jsonrpc":"2.0"}',
    b'{"jsonrpc":"2.0","id":1,"method":"p\xed\xa0\x80"}',
    b"[" * 100000,
]


def _one_reply_per_line(lines):
    """Send each line then a ping; return the one reply to each line (the server must live)."""
    messages = [INIT]
    for i, item in enumerate(lines):
        messages += [item, req(f"after-{i}", "ping")]
    run = run_mesh(messages)
    assert run.returncode == 0, run.stderr
    replies, pending = [], []
    for reply in run.responses[1:]:
        if reply["id"] == f"after-{len(replies)}":
            assert reply["result"] == {}, reply
            assert len(pending) == 1, (lines[len(replies)], pending)
            replies.append(pending.pop())
        else:
            pending.append(reply)
    assert len(replies) == len(lines)
    return replies


def test_parse_errors_answer_32700_with_null_id(mmo_env):
    lines = [raw + b"\n" for raw in PARSE_ERRORS]
    for raw, reply in zip(PARSE_ERRORS, _one_reply_per_line(lines), strict=True):
        assert reply["id"] is None, raw[:60]
        assert reply["error"]["code"] == -32700, raw[:60]
        assert reply["error"]["message"] == "parse error"


INVALID_REQUESTS = [
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": False, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 2.0, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, None),
    ({"jsonrpc": "1.0", "id": 5, "method": "ping"}, 5),
    ({"id": 6, "method": "ping"}, 6),
    ({"jsonrpc": 2.0, "id": "s", "method": "ping"}, "s"),
    ({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": [1]}, 8),
    ({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": "x"}, 9),
    ({"jsonrpc": "2.0", "id": 10, "method": "ping", "params": None}, 10),
    ({"jsonrpc": "2.0", "id": 11, "method": 3}, 11),
    ({"jsonrpc": "2.0", "id": 12}, 12),
    ([], None),
    ([{"jsonrpc": "2.0", "id": 13, "method": "ping"}], None),
    ("just a string", None),
    (42, None),
    (None, None),
]


def test_invalid_requests_answer_32600_echoing_only_valid_ids(mmo_env):
    lines = [message for message, _ in INVALID_REQUESTS]
    for (message, echoed), reply in zip(INVALID_REQUESTS, _one_reply_per_line(lines), strict=True):
        assert reply["id"] == echoed and type(reply["id"]) is type(echoed), message
        assert reply["error"]["code"] == -32600, message


def test_batches_are_refused_even_when_every_member_is_valid(mmo_env):
    run = run_mesh([INIT, [req(1, "ping"), req(2, "ping")]])
    assert [r for r in run.responses if r["id"] != "init"] == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "invalid request",
                "data": "batches are not supported",
            },
        }
    ]


def test_notifications_are_never_answered(mmo_env):
    notes = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "method": "no/such/method"},
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "agent_spawn"}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},
    ]
    run = run_mesh([*notes, INIT, *notes])
    assert [r["id"] for r in run.responses] == ["init"]


def test_unknown_method_is_method_not_found(mmo_env):
    run = run_mesh([INIT, req(3, "resources/list")])
    assert _error(run.by_id(3))["code"] == -32601


def test_string_and_large_integer_ids_are_echoed_exactly(mmo_env):
    big = 2**70
    run = run_mesh([INIT, req("ü-id", "ping"), req(big, "ping"), req(-4, "ping")])
    assert run.by_id("ü-id")["result"] == {}
    assert run.by_id(big)["result"] == {}
    assert run.by_id(-4)["result"] == {}


def test_blank_lines_and_crlf_are_tolerated(mmo_env):
    run = run_mesh([b"\n", b"   \r\n", json.dumps(INIT).encode() + b"\r\n", req(2, "ping")])
    assert [r["id"] for r in run.responses] == ["init", 2]


def test_exit_zero_at_end_of_input_and_stdout_holds_only_json_rpc(mmo_env):
    run = run_mesh([INIT, req(2, "ping"), b"garbage\n"])
    assert run.returncode == 0
    for raw in run.stdout.splitlines():
        message = json.loads(raw)
        assert message["jsonrpc"] == "2.0" and "id" in message
        assert ("result" in message) != ("error" in message)


def test_stray_prints_from_tool_code_land_on_stderr_not_stdout(mmo_env, tmp_path):
    """A print (Python or a child process writing to fd 1) during a request never reaches stdout."""
    sitedir = tmp_path / "site"
    sitedir.mkdir()
    (sitedir / "noisy_api.py").write_text(
        "import os, subprocess, sys\n"
        "def load_job(job_id):\n"
        "    print('python print from the API')\n"
        "    os.write(1, b'raw fd write\\n')\n"
        "    subprocess.run([sys.executable, '-c', 'print(\"child print\")'])\n"
        "    return {'session_id': os.environ['MMO_ROOT_SESSION_ID'], 'job_id': job_id}\n"
        "def public_job(record):\n"
        "    return record\n"
    )
    launcher = (
        f"import sys; sys.path.insert(0, {str(sitedir)!r}); import noisy_api; "
        "sys.modules['mmo_kernel.api'] = noisy_api; "
        "from mmo_kernel.mcp.server import main; raise SystemExit(main())"
    )
    session = make_session(mmo_env.state_dir)
    data = b"".join(
        json.dumps(m).encode() + b"\n" for m in (INIT, call(2, "agent_status", {"job_ids": ["j1"]}))
    )
    proc = subprocess.run(
        [sys.executable, "-c", launcher],
        input=data,
        capture_output=True,
        env=session.root_env(),
        timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(raw) for raw in proc.stdout.splitlines()]
    assert [r["id"] for r in replies] == ["init", 2]
    assert replies[1]["result"]["structuredContent"] == {
        "jobs": [{"session_id": session.session_id, "job_id": "j1"}]
    }
    err = proc.stderr.decode()
    assert "python print from the API" in err and "raw fd write" in err and "child print" in err


def test_tools_call_requires_a_tool_name(mmo_env):
    session = make_session(mmo_env.state_dir)
    run = session_call(session.root_env(), req(2, "tools/call", {"arguments": {}}))
    error = _error(run.by_id(2))
    assert error["code"] == -32602 and "unknown tool" in error["data"]


HEAVY = (
    "pydantic",
    "mmo_kernel.api",
    "mmo_kernel.gateway",
    "mmo_kernel.plugin.manager",
    "mmo_kernel.mesh.identity",
    "mmo_kernel.mcp.handlers",
)
PROBE = f"""import sys
from mmo_kernel.mcp.server import main
rc = main()
heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))
print('HEAVY=' + ','.join(heavy), file=sys.stderr)
raise SystemExit(rc)
"""


def test_initialize_loads_no_pydantic_api_gateway_or_plugins(mmo_env):
    """Cold start stays light: heavy modules load only when a tool is listed or called."""
    data = json.dumps(INIT).encode() + b"\n" + json.dumps(req(2, "ping")).encode() + b"\n"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], input=data, capture_output=True, timeout=20
    )
    assert proc.returncode == 0
    assert [json.loads(r)["id"] for r in proc.stdout.splitlines()] == ["init", 2]
    assert "HEAVY=\n" in proc.stderr.decode(), proc.stderr.decode()
