"""One shared read model for every open tab, and the server-sent events that carry it.

Why one: a ``Collector`` tails logs from its last offset, so a second one per tab would
read every byte again. The feed refreshes it once a second while anyone listens (or when a
page asks for a snapshot older than a second), renders each *topic* being watched (the
session list, one session, one job) once per refresh, and hands the same bytes to every
tab on that topic: a sixth tab costs one socket write per change, not a refresh.

Event ids are ``<run>.<generation>``: a topic's id is the refresh at which its content
last changed. A reconnecting browser sends ``Last-Event-ID``; if that is the topic's
current id it gets nothing until the next change, otherwise (older, or from another run
of the server) it gets the current content at once. Content is a whole state, not a
delta, so nothing in between needs replaying.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from mmo_kernel.views.collector import Collector
from mmo_kernel.views.model import TeamSnapshot

PERIOD_SECONDS = 1.0
FINISHED_SHOWN = 20
"""Finished sessions the snapshot carries in full (the newest); older ones are built from
their records when opened (``archive``)."""

Render = Callable[[str, TeamSnapshot], dict[str, str]]


IDLE_TOPICS_KEPT = 256
"""Topics nobody watches that keep their content (and id), so a tab that reconnects is
told "nothing new" rather than sent the same content again."""


@dataclass
class _Topic:
    watchers: int = 0
    payload: str | None = None
    version: int = 0
    rendered: int = -1
    """The generation its payload was rendered at."""
    current: tuple[int, bytes] = (0, b"")
    """``(version, the payload as one server-sent event)``: encoded once for every tab on the
    topic, and replaced as one value (a tab never pairs a version with another frame)."""


@dataclass
class Feed:
    """The shared collector, its latest snapshot, and the watched topics."""

    render: Render
    period: float = PERIOD_SECONDS
    show_finished: int = FINISHED_SHOWN
    run: str = field(default_factory=lambda: secrets.token_hex(4))
    generation: int = 0
    snapshot: TeamSnapshot | None = None
    taken_at: float = 0.0
    refreshes: int = 0
    _collector: Collector | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _topics: dict[str, _Topic] = field(default_factory=dict)
    _changed: asyncio.Condition | None = None
    _poke: asyncio.Event | None = None
    _task: asyncio.Task | None = None

    # ---------------------------------------------------------- snapshot --

    def refresh(self) -> TeamSnapshot:
        """A new snapshot (blocking: run it off the event loop)."""
        with self._lock:
            if self._collector is None:
                self._collector = Collector()
            snap = self._collector.refresh(show_finished=self.show_finished)
            self.snapshot, self.taken_at = snap, time.monotonic()
            self.generation += 1
            self.refreshes += 1
            return snap

    def current(self, max_age: float | None = None) -> TeamSnapshot:
        """The latest snapshot if younger than ``max_age`` (default: one period), else a new one."""
        age = self.period if max_age is None else max_age
        snap = self.snapshot
        if snap is not None and time.monotonic() - self.taken_at <= age:
            return snap
        return self.refresh()

    # ------------------------------------------------------------- loop --

    async def start(self) -> None:
        self._changed, self._poke = asyncio.Condition(), asyncio.Event()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def poke(self) -> None:
        """Refresh now (an action just changed something); safe from any thread."""
        if self._poke is not None and self._task is not None:
            self._task.get_loop().call_soon_threadsafe(self._poke.set)

    def _publish(self, snap: TeamSnapshot) -> bool:
        """Render every watched topic once; True when one changed."""
        changed = False
        for name, topic in list(self._topics.items()):
            if topic.watchers <= 0:
                continue
            changed = self._set(topic, self._payload(name, snap)) or changed
        return changed

    def _set(self, topic: _Topic, payload: str) -> bool:
        topic.rendered = self.generation
        if payload == topic.payload:
            return False
        topic.payload, topic.version = payload, self.generation
        # compact JSON has no newline, so the whole payload is one ``data:`` line
        topic.current = (topic.version, (f"id: {self.event_id(topic.version)}\n"
                                         f"event: fragments\ndata: {payload}\n\n").encode())
        return True

    def _payload(self, name: str, snap: TeamSnapshot) -> str:
        try:
            fragments = self.render(name, snap)
        except (OSError, ValueError, RuntimeError) as exc:  # gone, unreadable: say so
            fragments = {"feed-note": f"cannot show this now: {exc}"}
        return json.dumps(fragments, separators=(",", ":"))

    def _tick(self) -> bool:
        snap = self.refresh()
        with self._lock:
            return self._publish(snap)

    async def _loop(self) -> None:
        assert self._changed is not None and self._poke is not None
        while True:
            if any(t.watchers > 0 for t in self._topics.values()):
                if await asyncio.to_thread(self._tick):
                    async with self._changed:
                        self._changed.notify_all()
            try:
                await asyncio.wait_for(self._poke.wait(), self.period)
            except TimeoutError:
                pass
            self._poke.clear()

    # ----------------------------------------------------------- stream --

    def event_id(self, version: int) -> str:
        return f"{self.run}.{version}"

    def _seen(self, last_event_id: str | None) -> int | None:
        """The version a reconnecting client already has (None: none of this run's)."""
        if not last_event_id or "." not in last_event_id:
            return None
        run, _, number = last_event_id.partition(".")
        if run != self.run or not number.isdigit():
            return None
        return int(number)

    def _first(self, name: str) -> _Topic:
        """Subscribe; a topic nobody watched yet is rendered now, on the latest snapshot."""
        with self._lock:
            topic = self._topics.setdefault(name, _Topic())
            topic.watchers += 1
            stale = topic.rendered != self.generation or topic.payload is None
        if stale:
            snap = self.current()
            with self._lock:
                if topic.rendered != self.generation or topic.payload is None:
                    self._set(topic, self._payload(name, snap))
        return topic

    def _leave(self, name: str, topic: _Topic) -> None:
        with self._lock:
            topic.watchers -= 1
            idle = [n for n, t in self._topics.items() if t.watchers <= 0]
            for gone in idle[:max(0, len(idle) - IDLE_TOPICS_KEPT)]:
                del self._topics[gone]

    async def _next(self, topic: _Topic, sent: int) -> None:
        """Until the topic holds content newer than ``sent``."""
        assert self._changed is not None
        async with self._changed:
            await self._changed.wait_for(lambda: topic.current[0] > sent)

    async def stream(self, name: str, last_event_id: str | None) -> AsyncIterator[bytes]:
        """The topic's content now (unless the client has it) and after every change."""
        assert self._changed is not None
        topic = await asyncio.to_thread(self._first, name)
        try:
            sent = self._seen(last_event_id)
            version, frame = topic.current
            if sent is None or sent < version:
                yield frame
            sent = version
            while True:
                await self._next(topic, sent)
                sent, frame = topic.current
                yield frame
        finally:
            self._leave(name, topic)

    def watchers(self) -> dict[str, int]:
        with self._lock:
            return {name: t.watchers for name, t in self._topics.items() if t.watchers > 0}


__all__ = ["FINISHED_SHOWN", "Feed", "PERIOD_SECONDS"]
