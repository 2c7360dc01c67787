"""Every command teaches with --help; bad input is one clear line and exit 1 (or 2 for usage)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess

import pytest

from mmo_kernel.cli import build_parser, main

from .conftest import MMO, mmo, one_line_error


def _command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*prefix, name), child
                yield from _command_paths(child, (*prefix, name))


MINE = ("run", "start", "resume", "sessions", "session", "pause", "continue", "compact", "detach",
        "stop", "cancel", "clean", "gateway", "smoke", "profiles", "catalog")


def _help(path: tuple[str, ...], capsys) -> tuple[int, str]:
    """``mmo PATH --help`` through the executable's own entry point (``main``), in process:
    one subprocess per command would cost the suite a minute on a busy machine."""
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    return int(done.value.code or 0), capsys.readouterr().out


def test_every_subcommand_has_help_that_exits_0_and_teaches(capsys):
    commands = dict(_command_paths(build_parser()))
    paths = [p for p in commands if p != ("mcp",)]
    for required in (("run",), ("start",), ("resume",), ("sessions",), ("session", "show"),
                     ("pause",), ("continue",), ("compact",), ("detach",), ("stop",),
                     ("cancel",), ("clean",), ("gateway", "status"), ("gateway", "start"),
                     ("gateway", "stop"), ("smoke",), ("profiles", "list"),
                     ("profiles", "show"), ("profiles", "validate"), ("profiles", "compile"),
                     ("profiles", "clone"), ("catalog", "routes"), ("catalog", "models")):
        assert required in paths
    for path in paths:
        code, text = _help(path, capsys)
        assert code == 0 and text.startswith("usage: mmo " + " ".join(path)), path
        leaf = not any(isinstance(a, argparse._SubParsersAction) for a in commands[path]._actions)
        if leaf and path[0] in MINE:
            assert "example" in text, f"mmo {' '.join(path)} --help has no example"


def test_help_through_the_real_executable():
    out = mmo("run", "--help")
    assert out.returncode == 0 and out.stdout.startswith("usage: mmo run"), out.stderr
    assert "Exit codes: 0 completed" in out.stdout and "examples:" in out.stdout


def test_unknown_profile_and_session_are_one_line_errors():
    one_line_error(mmo("run", "no-such-team", "do it", "--offline"),
                   "unknown profile 'no-such-team'")
    one_line_error(mmo("profiles", "show", "no-such-team"), "unknown profile 'no-such-team'")
    one_line_error(mmo("session", "show", "no-such-session"), "no MMO session 'no-such-session'")
    one_line_error(mmo("stop", "no-such-session"), "'no-such-session'")


def test_debug_shows_the_traceback():
    out = mmo("--debug", "session", "show", "no-such-session")
    assert out.returncode == 1 and "Traceback" in out.stderr and "FileNotFoundError" in out.stderr


def test_usage_errors_exit_2_and_change_nothing(mmo_env):
    assert mmo("run").returncode == 2
    assert mmo("stop", "some-id", "--grace", "soon").returncode == 2
    assert mmo("smoke", "adaptive-engineering", "--root-only", "--workers-only").returncode == 2
    assert not (mmo_env.state_dir / "sessions").exists()


def test_bad_values_are_refused_before_anything_starts(mmo_env):
    one_line_error(mmo("run", "adaptive-engineering", "x", "--wall", "0", "--offline"),
                   "--wall must be a positive number")
    one_line_error(mmo("clean", "--job-days", "-1"), "retention days must not be negative")
    assert not (mmo_env.state_dir / "sessions").exists()


def test_mcp_help_teaches_instead_of_starting_the_server():
    """With stdin left open, a server would wait for input; help returns at once."""
    proc = subprocess.Popen([MMO, "mcp", "--help"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.startswith("usage: mmo mcp")
    assert "mcp_servers.mmo_mesh" in out and err == ""


def test_a_closed_pipe_ends_output_quietly():
    """``mmo plugins | head -0``: the reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([MMO, "plugins"], stdout=write_end, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 0
    assert done.stderr == ""


def test_the_program_writes_its_whole_answer_and_exits_with_the_commands_code():
    """The ``mmo`` program skips the interpreter's last collection on exit (``program``):
    the answer must still arrive whole, and each outcome keep its exit code."""
    listed = mmo("catalog", "models", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["models"], listed.stdout[-200:]
    assert mmo("no-such-command").returncode == 2
    one_line_error(mmo("session", "show", "no-such-session"), "no-such-session")


def test_each_command_is_found_in_the_module_the_command_table_names():
    """A command line imports only its command's module (``COMMAND_OWNERS``): a command
    missing from the table, or owned by another module, would vanish from the CLI."""
    import importlib

    from mmo_kernel import cli

    registered: dict[str, str] = {}
    for name in cli.COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"mmo_kernel.cli.{name}").register(sub)
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == cli.COMMAND_OWNERS
    for command in registered:
        siblings = {c for c, owner in registered.items() if owner == registered[command]}
        built = {path[0] for path in dict(_command_paths(build_parser(command)))}
        assert built == siblings | {"mcp"}, command


def test_an_unknown_command_still_lists_every_command():
    out = mmo("sesions")
    assert out.returncode == 2 and "invalid choice: 'sesions'" in out.stderr
    assert all(f"'{name}'" in out.stderr for name in ("sessions", "jobs", "top", "ui", "mcp"))
