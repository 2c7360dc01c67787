"""The redactor at its edges, function by function (issue 13, "no credentials in evidence").

``test_redaction.py`` proves redaction at every write choke point; these pin the
rules themselves: which names and values count (length bound, paths, MMO's own
capabilities), every escaped form of a value in JSON, JSON lines and plain text,
the longest-match order, caching and the line-buffered streams, so a changed
comparison or default in ``state.redaction`` fails a test (``make mutate``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from mmo_kernel.state import redaction
from mmo_kernel.state.redaction import (
    MIN_SECRET_LENGTH,
    RedactingStream,
    Redactor,
    known_secrets,
    looks_secret,
    marker,
    pump_redacted,
    redact_bytes,
    redact_document,
    redact_text,
    redact_value,
    redactor,
    register_names,
    register_source,
    register_values,
)

VALUE = "s3cr3t-value-0001"


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch):
    """Registrations of other tests in this process do not count here (and ours do not leak)."""
    monkeypatch.setattr(redaction, "_names", set())
    monkeypatch.setattr(redaction, "_values", {})
    monkeypatch.setattr(redaction, "_sources", [])
    monkeypatch.setattr(redaction, "_cache", None)
    for name in [n for n in os.environ if looks_secret(n)]:
        monkeypatch.delenv(name)


def test_markers_and_secret_looking_names():
    assert marker("X") == "[redacted:X]"
    for name in ("API_KEY", "my_token", "Secret", "DB_PASSWORD", "passwd", "AWS_CREDENTIALS",
                 "KEYRING"):
        assert looks_secret(name), name
    for name in ("HOME", "PATH", "MMO_CALLER_TOKEN", "MMO_NATIVE_CALLER_TOKEN", "TOKE", ""):
        assert not looks_secret(name), name


def test_registered_values_count_only_from_the_length_bound():
    register_values({"SHORT": "x" * (MIN_SECRET_LENGTH - 1), "EXACT": "y" * MIN_SECRET_LENGTH,
                     "NUMBER": 12345678, "MMO_CALLER_TOKEN": "z" * 20})
    assert known_secrets({}) == {"y" * MIN_SECRET_LENGTH: "EXACT"}


def test_registered_names_redact_their_values_even_when_they_look_like_paths(tmp_path):
    register_names(["ACME_ENDPOINT", "", 5, "MMO_NATIVE_CALLER_TOKEN"])
    assert redaction._names == {"ACME_ENDPOINT"}
    env = {"ACME_ENDPOINT": str(tmp_path), "MMO_NATIVE_CALLER_TOKEN": "n" * 20,
           "HARMLESS": VALUE}
    assert known_secrets(env) == {str(tmp_path): "ACME_ENDPOINT"}


def test_a_heuristic_name_whose_value_is_an_existing_path_is_left_alone(tmp_path):
    env = {"GNOME_KEYRING_CONTROL": str(tmp_path), "SOME_TOKEN": str(tmp_path / "missing"),
           "OTHER_KEY": "./relative-not-there", "DOT_SECRET": "./pyproject.toml",
           "HOME_TOKEN": "~/no-such-file-here", "NUL_SECRET": "/bad\0path-value",
           "PLAIN_PASSWORD": "hunter2hunter2"}
    assert os.path.exists("pyproject.toml")
    assert known_secrets(env) == {
        str(tmp_path / "missing"): "SOME_TOKEN", "./relative-not-there": "OTHER_KEY",
        "~/no-such-file-here": "HOME_TOKEN", "/bad\0path-value": "NUL_SECRET",
        "hunter2hunter2": "PLAIN_PASSWORD"}


def test_sources_are_read_each_time_and_registered_once():
    calls = []

    def source():
        calls.append(1)
        return {"FROM_SOURCE": VALUE}

    register_source(source)
    register_source(source)
    assert redaction._sources == [source]
    assert known_secrets({}) == {VALUE: "FROM_SOURCE"}
    assert known_secrets({}) == {VALUE: "FROM_SOURCE"} and len(calls) == 2


def test_a_multi_line_value_is_known_whole_and_line_by_line():
    pem = "-----BEGIN KEY-----\n  abcdefghijkl  \r\nshort\n-----END KEY-----"
    register_values({"PEM": pem})
    assert known_secrets({}) == {pem: "PEM", "-----BEGIN KEY-----": "PEM",
                                 "abcdefghijkl": "PEM", "-----END KEY-----": "PEM"}


def test_the_first_name_of_a_value_wins_and_marker_text_is_never_a_secret():
    register_values({"FIRST": VALUE})
    assert known_secrets({"SECOND_TOKEN": VALUE}) == {VALUE: "FIRST"}
    register_values({"REDACTED": "redacted", "LONGNAME_X": "redacted:LONGNAME_X"})
    assert "redacted" not in known_secrets({})
    assert "redacted:LONGNAME_X" not in known_secrets({})


def test_an_empty_redactor_changes_nothing():
    empty = Redactor({})
    assert not empty and empty.text("a") == "a" and empty.value({"a": [1]}) == {"a": [1]}
    assert empty.document("x") == "x" and empty.data(b"x") == b"x"
    assert bool(Redactor({VALUE: "N"})) is True


def test_text_and_values_are_redacted_everywhere_but_not_numbers():
    red = Redactor({VALUE: "N", "another-secret": "M"})
    assert red.text(f"a{VALUE}b another-secret") == "a[redacted:N]b [redacted:M]"
    assert red.text(7) == 7
    value = {VALUE: [VALUE, ("x", VALUE), 3, None, {"k": f"-{VALUE}-"}], 5: "plain"}
    assert red.value(value) == {"[redacted:N]": ["[redacted:N]", ("x", "[redacted:N]"), 3, None,
                                                 {"k": "-[redacted:N]-"}], 5: "plain"}


def test_the_longest_value_wins_where_values_overlap():
    red = Redactor({"abcdefgh": "SHORT", "abcdefghij": "LONG"})
    assert red.text("abcdefghij abcdefgh") == "[redacted:LONG] [redacted:SHORT]"
    same = Redactor({"bbbbbbbb": "B", "aaaaaaaa": "A"})
    assert same.text("aaaaaaaabbbbbbbb") == "[redacted:A][redacted:B]"


def test_json_documents_stay_valid_and_keep_their_escapes():
    secret = 'quote"back\\slash-é'
    red = Redactor({secret: "Q"})
    ascii_doc = '{"k": ' + json.dumps(f"x{secret}y") + ', "n": 1.50}'
    out = red.document(ascii_doc)
    assert json.loads(out) == {"k": "x[redacted:Q]y", "n": 1.5}
    assert "1.50" in out and out.isascii()
    utf8_doc = json.dumps({"k": secret}, ensure_ascii=False)
    assert red.document(utf8_doc) == '{"k": "[redacted:Q]"}'
    untouched = json.dumps({"other": "value", "é": "ü"}, ensure_ascii=False)
    assert Redactor({VALUE: "N"}).document(untouched) == untouched


def test_json_lines_are_redacted_line_by_line_and_other_text_as_text():
    red = Redactor({VALUE: "N"})
    lines = json.dumps({"a": VALUE}) + "\n\n" + json.dumps([VALUE]) + "\n"
    assert red.document(lines) == '{"a": "[redacted:N]"}\n\n["[redacted:N]"]\n'
    mixed = json.dumps({"a": VALUE}) + "\nnot json " + VALUE + "\n"
    assert red.document(mixed) == '{"a": "[redacted:N]"}\nnot json [redacted:N]\n'
    escaped = 'log: "' + json.dumps("tab\there-secret")[1:-1] + '"'
    tabbed = Redactor({"tab\there-secret": "T"})
    assert tabbed.document(escaped) == 'log: "[redacted:T]"'
    assert red.document("nothing to see") == "nothing to see"


def test_bytes_are_redacted_as_documents_unless_they_are_not_utf8():
    red = Redactor({VALUE: "N"})
    assert red.data(f"x {VALUE}".encode()) == b"x [redacted:N]"
    binary = b"\xff\xfe" + VALUE.encode()
    assert red.data(binary) is binary
    clean = b"clean text"
    assert red.data(clean) is clean


def test_the_module_functions_use_what_the_process_knows(monkeypatch):
    monkeypatch.setenv("EDGE_API_KEY", VALUE)
    assert redact_text(VALUE) == "[redacted:EDGE_API_KEY]"
    assert redact_value([VALUE]) == ["[redacted:EDGE_API_KEY]"]
    assert redact_document(json.dumps(VALUE)) == '"[redacted:EDGE_API_KEY]"'
    assert redact_bytes(VALUE.encode()) == b"[redacted:EDGE_API_KEY]"
    first = redactor()
    assert redactor() is first  # rebuilt only when what it knows changes
    monkeypatch.setenv("EDGE_API_KEY", VALUE + "-rotated")
    assert redactor() is not first
    assert redact_text(VALUE + "-rotated") == "[redacted:EDGE_API_KEY]"


# -- streams --------------------------------------------------------------------------


def test_a_redacting_stream_writes_whole_lines_only(monkeypatch):
    monkeypatch.setenv("EDGE_API_KEY", VALUE)
    target = io.StringIO()
    stream = RedactingStream(target)
    assert stream.write(VALUE[:5]) == 5
    assert target.getvalue() == ""  # half a secret is never written
    assert stream.write(VALUE[5:] + " end\nnext ") == len(VALUE) - 5 + 10
    assert target.getvalue() == "[redacted:EDGE_API_KEY] end\n"
    stream.write("a\nb\n")
    assert target.getvalue() == "[redacted:EDGE_API_KEY] end\nnext a\nb\n"
    stream.write(VALUE)
    stream.drain()
    assert target.getvalue().endswith("b\n[redacted:EDGE_API_KEY]")
    stream.drain()  # nothing pending: nothing more
    assert target.getvalue().endswith("b\n[redacted:EDGE_API_KEY]")
    assert stream.getvalue() == target.getvalue()  # other attributes are the target's
    stream.flush()


def test_a_pumped_child_stream_is_redacted_line_by_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_API_KEY", VALUE)
    log = tmp_path / "child.log"
    log.write_text("before\n")
    child = subprocess.Popen([sys.executable, "-c", f"import sys; sys.stderr.write("
                              f"'one {VALUE}\\ntwo\\n' + 'x' * 10)"],
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    thread = pump_redacted(child.stderr, log)
    assert thread.daemon and thread.name == "redacting-pump"
    child.wait()
    thread.join()
    assert log.read_text() == "before\none [redacted:EDGE_API_KEY]\ntwo\nxxxxxxxxxx"
    assert child.stderr.closed


def test_a_new_pump_log_is_private_and_a_symlinked_one_is_refused(tmp_path):
    read, write = os.pipe()
    os.close(write)
    thread = pump_redacted(os.fdopen(read, "rb"), tmp_path / "new.log", name="p")
    thread.join()
    assert thread.name == "p" and os.stat(tmp_path / "new.log").st_mode & 0o777 == 0o600
    (tmp_path / "link.log").symlink_to(tmp_path / "new.log")
    read, write = os.pipe()
    os.close(write)
    handle = os.fdopen(read, "rb")
    with pytest.raises(OSError):
        pump_redacted(handle, tmp_path / "link.log")
    handle.close()


def test_redacted_module_runs_and_its_usage(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_API_KEY", VALUE)
    script = tmp_path / "talk.py"
    script.write_text(f"import sys\nprint('out {VALUE}')\nsys.stderr.write('err {VALUE}')\n"
                      "print(sys.argv[1:])\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "mmo_kernel.state.redaction", "talk", "a1"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "out [redacted:EDGE_API_KEY]\n['a1']\n"
    assert done.stderr == "err [redacted:EDGE_API_KEY]"
    usage = subprocess.run([sys.executable, "-m", "mmo_kernel.state.redaction"],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 1
    assert usage.stderr.strip() == "usage: python -m mmo_kernel.state.redaction MODULE [ARGS ...]"


def test_stdio_redaction_is_installed_once(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    redaction.install_stdio_redaction()
    wrapped = sys.stdout
    assert isinstance(wrapped, RedactingStream) and isinstance(sys.stderr, RedactingStream)
    redaction.install_stdio_redaction()
    assert sys.stdout is wrapped
    monkeypatch.setattr(sys, "stdout", None)
    redaction.install_stdio_redaction()
    assert sys.stdout is None


def test_a_carriage_return_alone_also_splits_a_value():
    register_values({"CR": "first-line-1\rsecond-line-2"})
    assert set(known_secrets({})) == {"first-line-1\rsecond-line-2", "first-line-1",
                                      "second-line-2"}


def test_a_home_relative_path_counts_as_a_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "keyring-dir").mkdir()
    found = known_secrets({"KEYRING_TOKEN": "~/keyring-dir", "OTHER_TOKEN": "~/not-there"})
    assert found == {"~/not-there": "OTHER_TOKEN"}


def test_each_json_literal_is_decoded_before_it_is_redacted():
    red = Redactor({VALUE: "N"})
    hidden = json.dumps(VALUE).replace("s", "\\u0073", 1)  # the same string, escaped otherwise
    assert json.loads(hidden) == VALUE and VALUE not in hidden
    lines = '{"a": "' + VALUE + '"}\n{"b": ' + hidden + '}\n'
    assert red.document(lines) == '{"a": "[redacted:N]"}\n{"b": "[redacted:N]"}\n'
    document = '{"a": "' + VALUE + '", "b": ' + hidden + '}'
    assert red.document(document) == '{"a": "[redacted:N]", "b": "[redacted:N]"}'


def test_a_literals_other_characters_keep_their_escaping():
    red = Redactor({VALUE: "N"})
    ascii_token = json.dumps("café " + VALUE)  # \u00e9
    assert red.document('{"k": ' + ascii_token + '}') == '{"k": "caf\\u00e9 [redacted:N]"}'
    raw_token = json.dumps("café " + VALUE, ensure_ascii=False)
    assert red.document('{"k": ' + raw_token + '}') == '{"k": "café [redacted:N]"}'


def test_stdio_redaction_wraps_each_stream_that_exists(monkeypatch):
    monkeypatch.setenv("EDGE_API_KEY", VALUE)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", err)
    redaction.install_stdio_redaction()
    assert sys.stdout is None and isinstance(sys.stderr, RedactingStream)
    sys.stderr.write(f"{VALUE}\n")
    assert err.getvalue() == "[redacted:EDGE_API_KEY]\n"


def test_running_a_module_redacted_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_API_KEY", VALUE)
    with pytest.raises(SystemExit) as info:
        redaction.run_module_redacted([])
    assert info.value.code == "usage: python -m mmo_kernel.state.redaction MODULE [ARGS ...]"
    (tmp_path / "edge_talker.py").write_text(
        "import sys\nprint('argv', sys.argv)\nprint('__name__', __name__)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    redaction.run_module_redacted(["edge_talker", VALUE])
    sys.stdout.drain()
    script = tmp_path / "edge_talker.py"  # runpy puts the module's file in argv[0]
    assert out.getvalue() == (f"argv [{str(script)!r}, '[redacted:EDGE_API_KEY]']\n"
                              "__name__ __main__\n")
    sys.modules.pop("edge_talker", None)


def test_a_childs_log_line_is_redacted_even_beside_bytes_that_are_not_text(mmo_env, tmp_path,
                                                                             monkeypatch):
    import os

    from mmo_kernel.state.redaction import pump_redacted

    monkeypatch.setenv("VENDOR_API_KEY", "vk-0123456789abcdef")
    read, write = os.pipe()
    log = tmp_path / "child.log"
    thread = pump_redacted(os.fdopen(read, "rb"), log)
    os.write(write, b"\xff\xfe binary vk-0123456789abcdef tail\n" + b"plain vk-0123456789abcdef\n")
    os.close(write)
    thread.join(timeout=30)
    data = log.read_bytes()
    assert b"vk-0123456789abcdef" not in data
    assert data.startswith(b"\xff\xfe binary [redacted") and data.count(b"[redacted") == 2
