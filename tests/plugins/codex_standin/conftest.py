"""Stand-in fixtures come from the package so plugin authors get the same ones."""

from mmo_codex_standin.fixtures import spawn_standin, standin_home, standin_workspace  # noqa: F401
