"""What a person sees at 80x24 and 160x45: the columns, the tree, the panels, no wrapping,
and no colour under NO_COLOR. Each screen is kept as SVG and text in the test's tmp dir."""

from __future__ import annotations

from kernel.tui.conftest import (
    REVIEWER,
    ROOT,
    SCOUT,
    WRITER,
    app,
    colours,
    is_grey,
    keep,
    run,
    screen,
    until,
)


def _snapshot():
    from mmo_kernel.views.collector import Collector

    return Collector().refresh()


def _table(lines: list[str]) -> list[str]:
    """The table's lines: from the column header to the inspect panel's border."""
    start = next(i for i, line in enumerate(lines) if "AGENT" in line and "STATUS" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("╭─ inspect"))
    return [line.rstrip() for line in lines[start:end] if line.strip()]


def test_at_80x24_the_narrow_table_shows_the_tree_in_order_cut_never_wrapped(team, tmp_path):
    snap = _snapshot()
    paused = next(v for v in snap.sessions if v.session_id == team["paused"])

    async def body(pilot):
        lines = screen(pilot.app)
        svg, text = keep(pilot.app, "top-80x24", tmp_path)
        assert svg.read_text().startswith("<svg") and text.read_text().splitlines() == lines
        assert len(lines) == 24 and all(len(line) == 80 for line in lines)
        table = _table(lines)
        assert table[0].split() == ["AGENT", "STATUS", "ELAPSED", "TOKENS", "NOW"]
        assert not any("ROUTE / MODEL" in line or "COST" in line for line in lines)
        # newest session first, each header followed by its agents in tree order
        assert table[1].startswith("  ▼ " + team["paused"]) and table[1].endswith("…")
        names = [line[2:].split()[0] for line in table[2:6]]
        assert names == [ROOT, "└", "└", "└"]
        assert table[2].startswith("> " + ROOT)  # the cursor starts on the first agent
        assert table[3].startswith("  └ implementation_specia…")  # cut to its column
        assert table[4].startswith("    └ " + SCOUT)  # under the writer that called it
        assert table[5].startswith("  └ " + REVIEWER)
        statuses = [line[27:37].strip() for line in table[2:6]]  # the STATUS column
        assert statuses == [a.status for a in paused.agents] == \
            ["paused", "completed", "failed", "completed"]
        assert "! usage limit reached" in table[4] and "result unread" in table[5]
        assert table[6].startswith("  ▼ " + team["older"])
        assert table[7].startswith("  " + ROOT) and " suspended " in table[7]  # no host
        # the inspect panel: the root's facts and its timeline, no audit or routes pane
        inspect = "\n".join(lines[lines.index(next(x for x in lines if "╭─ inspect" in x)):])
        assert f"inspect · {ROOT} · root of" in inspect and "turn 1" in inspect
        assert "mmo_mesh.agents_wait" in inspect and "Done: the change is ready" in inspect
        assert "audit ·" not in inspect and "routes ·" not in inspect
        assert lines[-1].startswith("↑↓ move p pause c cont S stop x cancel")

    run(body, (80, 24))


def test_at_160x45_the_wide_table_has_every_column_and_the_audit_and_routes_panes(team,
                                                                                  tmp_path):
    snap = _snapshot()
    writer = next(a for v in snap.sessions for a in v.agents if a.job_id == team["writer"])

    async def body(pilot):
        lines = screen(pilot.app)
        keep(pilot.app, "top-160x45", tmp_path)
        assert len(lines) == 45 and all(len(line) == 160 for line in lines)
        table = _table(lines)
        assert table[0].split() == ["AGENT", "ROUTE", "/", "MODEL", "STATUS", "ELAPSED",
                                    "TURN", "IN", "OUT", "COST", "SCOPE", "NOW"]
        row = next(line for line in table if "implementation_specialist" in line)
        assert f"{writer.route} / " in row and " src " in row and "result unread" in row
        assert " n/a " in row  # the offline models have no price: never guessed
        assert lines[0].startswith("mmo top — 2 live / 2 sessions · 5 agents")
        panes = next(line for line in lines if "audit · session" in line)
        assert "routes · gateway requests, last 5 min" in panes
        body_lines = lines[lines.index(panes) + 1:]
        assert any("agent_started" in line and REVIEWER[:12] in line for line in body_lines)
        assert any("no gateway requests in the last 5 minutes" in line for line in body_lines)

        # moving to the writer: its patch, result state and its command on the timeline
        await pilot.press("down")
        await until(pilot, lambda: any("patch 1 file(s) changed: src/feature.py" in line
                                       for line in screen(pilot.app)), "the writer's patch")
        lines = screen(pilot.app)
        keep(pilot.app, "top-160x45-writer", tmp_path)
        assert any(line.startswith("> └ implementation_specialist") for line in lines)
        assert any(f"inspect · {WRITER} · {team['writer']}" in line for line in lines)
        assert any("result unread" in line and "requests none" in line for line in lines)
        assert any("$ pytest -q" in line and "completed 1m00s" in line for line in lines)

        # the same app narrowed to 80 columns drops the wide columns and the panes
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: len(screen(pilot.app)[0]) == 80, "the narrow layout")
        await until(pilot, lambda: _table(screen(pilot.app))[0].split()[1] == "STATUS",
                    "the narrow columns")
        lines = screen(pilot.app)
        assert not any("audit ·" in line for line in lines)
        assert any(line.startswith("> └ implementation_specia…") for line in lines), \
            "\n".join(lines)

    run(body, (160, 45))


def test_no_color_leaves_only_greys_on_the_screen(team, tmp_path, monkeypatch):
    def take(name: str) -> set[tuple[int, int, int]]:
        taken: dict[str, set] = {}

        async def body(pilot):
            taken["colours"] = colours(pilot.app)
            keep(pilot.app, name, tmp_path)

        run(body, (80, 24), top=app())
        return taken["colours"]

    coloured = take("top-80x24-colour")
    assert any(not is_grey(c) for c in coloured), coloured  # statuses and borders in colour
    monkeypatch.setenv("NO_COLOR", "1")
    plain = take("top-80x24-no-color")
    assert plain and all(is_grey(c) for c in plain), sorted(plain)
