"""The deterministic Codex stand-in (spec 10): ``mmo-codex-standin``.

A real executable that speaks the real ``codex app-server`` protocol over
stdio or a unix socket, persists threads in Codex's ``CODEX_HOME`` layout and
obeys the ``FAKE_*`` behaviour markers, so MMO's tests exercise real
processes, pipes, sockets and crash recovery without a model or a network.
"""
