"""Who is acting in this process: stamped on every audit event as ``actor`` / ``actor_name``.

Set once at each entry point, never passed through calls: the ``mmo`` command line
(``cli``), a call through the mmo_mesh server or an external lead's call through the runner
(``mesh``), an agent's own host process (``agent``), and the live views (``ui``).
A block (``acting_as``) wins over the process's actor (``set_process_actor``, which
also covers the threads a host starts); with neither, the process acts for the
person running it: ``cli`` with the OS login name (a program using the Python API
directly is that person's program).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

ActorKind = Literal["agent", "cli", "ui", "mesh"]
ACTOR_KINDS: tuple[str, ...] = get_args(ActorKind)


class Actor(BaseModel):
    """One acting party: its kind and the name it acts under."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    kind: ActorKind
    name: str = Field(min_length=1)


_ACTOR: ContextVar[Actor | None] = ContextVar("mmo_actor", default=None)
_process_actor: Actor | None = None


def make_actor(kind: str, name: str) -> Actor:
    """An ``Actor``; a kind outside ``ACTOR_KINDS`` or an empty name is one ``ValueError`` line."""
    if kind not in ACTOR_KINDS:
        raise ValueError(f"actor kind must be one of {', '.join(ACTOR_KINDS)} (got {kind!r})")
    if not isinstance(name, str) or not name:
        raise ValueError(f"actor name must be a non-empty string (got {name!r})")
    return Actor(kind=kind, name=name)  # type: ignore[arg-type]


def login_name() -> str:
    """The OS login name of this process's user, else its uid as text (never fails)."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):
        name = ""
    return name or str(os.getuid())


@contextmanager
def acting_as(kind: str, name: str) -> Iterator[Actor]:
    """Record ``kind``/``name`` as the actor of every audit event appended inside the block.

    For an entry point that acts on someone's behalf for one call or command (a mesh
    tool call, a CLI command, a live-view action); a bad kind or an empty name raises
    ``ValueError`` before anything runs.
    """
    actor = make_actor(kind, name)
    token = _ACTOR.set(actor)
    try:
        yield actor
    finally:
        _ACTOR.reset(token)


def set_process_actor(kind: str, name: str) -> Actor | None:
    """Make ``kind``/``name`` the actor of the whole process, every thread included.

    For a process that exists to act as one party (an agent's host); an ``acting_as``
    block still wins inside it. Returns the previous process actor.
    """
    global _process_actor
    previous, _process_actor = _process_actor, make_actor(kind, name)
    return previous


def reset_process_actor(previous: Actor | None) -> None:
    """Put back the process actor ``set_process_actor`` returned (``None``: none set)."""
    global _process_actor
    _process_actor = previous


def current_actor() -> Actor:
    """The innermost ``acting_as`` block, else the process actor, else ``cli`` as the OS user."""
    return _ACTOR.get() or _process_actor or Actor(kind="cli", name=login_name())
