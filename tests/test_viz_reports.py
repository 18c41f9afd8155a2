"""Daily reports on the charts: a day missing between two reports is marked "omitted", dates read as dates.

The effects ledger's reports (``effect`` rows whose details carry a ``day``, an ISO date) are
drawn like the world's ``report.built`` rows (a day number): a reader of a chart must see the
omission the text announces, not infer it from a gap.
"""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from sim.trace import Trace  # noqa: E402
from sim.viz import activation_timeline, catchup_chart  # noqa: E402
from sim.viz.data.reports import day_label, omitted_reports, report_rows  # noqa: E402

START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
DAY_US = 86_400_000_000


def _trace(kind: str) -> Trace:
    """Key 'acme' on n1: a daily schedule, reports of Jan 01, Jan 02, Jan 04 (Jan 03 missing), each 30 s after midnight."""
    trace = Trace()

    def add(t_us: int, kind_: str, **fields: object) -> None:
        trace.add(t_us * 1000, "n1", START_US + t_us, kind_, fields)

    add(0, "activation.started", actor="reporter", key="acme", lease=1, behavior="run", recovered=False, restart=0)
    add(0, "schedule.armed", actor="reporter", key="acme", name="daily", due_us=START_US + DAY_US, every_us=DAY_US)
    for day in (1, 2, 3, 4, 5):
        add(day * DAY_US, "schedule.fired", actor="reporter", key="acme", name="daily", due_us=START_US + day * DAY_US,
            now_us=START_US + day * DAY_US, next_us=START_US + (day + 1) * DAY_US)
    for day in (0, 1, 3):  # the report of a day is built 30 s into the next one
        t = (day + 1) * DAY_US + 30_000_000
        if kind == "effect":
            date = f"2026-01-{day + 1:02d}"
            add(t, "effect", actor="reporter", key="acme", effect=f"report:acme:{date}", node="n1", details={"day": date})
        else:
            add(t, "report.built", key="acme", day=20_454 + day)
    return trace


def _texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def _points(ax: Axes, gid: str) -> int:
    return sum(len(np.asarray(c.get_offsets())) for c in ax.collections if c.get_gid() == gid and isinstance(c, PathCollection))


def test_the_missing_day_is_found_between_two_reports_and_placed_one_day_after_the_report_before_it() -> None:
    """omitted_reports finds 2026-01-03 (spelled as the effects spell it) at 3 days + 30 s, on n1; day numbers stay numbers."""
    ((row, day),) = omitted_reports(report_rows(_trace("effect")))
    assert (day, row.node, row.t_ns, row.kind) == ("2026-01-03", "n1", (3 * DAY_US + 30_000_000) * 1000, "report.omitted")
    ((_, number),) = omitted_reports(report_rows(_trace("report.built")))
    assert number == 20_456 and day_label(number) == day_label("2026-01-03") == "Jan 03"


def test_the_activation_timeline_marks_the_omitted_day_and_labels_effect_reports_as_dates() -> None:
    """Three black stars labelled Jan 01/02/04, one hollow red star 'report Jan 03 omitted', and its legend entry."""
    ax = activation_timeline(_trace("effect")).axes[0]
    assert _points(ax, "report.built") == 3 and _points(ax, "report.omitted") == 1
    assert [t for t in _texts(ax) if t.startswith("report")] == ["report Jan 01", "report Jan 02", "report Jan 04", "report Jan 03 omitted"]
    legend = ax.get_legend()
    assert legend is not None and "report omitted (a day missing)" in [t.get_text() for t in legend.get_texts()]


def test_the_catchup_chart_marks_the_omitted_day_of_the_world_s_report_rows() -> None:
    """On the schedule's chart (report.built rows with day numbers): one hollow red star, 'report Jan 03 omitted'."""
    top = catchup_chart(_trace("report.built"), schedule="daily").axes[0]
    assert _points(top, "report.omitted") == 1
    assert "report Jan 03 omitted" in _texts(top)


def _two_keys() -> Trace:
    """Keys 'acme' and 'bolt' of one type, both active on n1 for three days; each reports Jan 01 and Jan 02 (bolt 30 s later)."""
    trace = Trace()

    def add(t_us: int, kind_: str, **fields: object) -> None:
        trace.add(t_us * 1000, "n1", START_US + t_us, kind_, fields)

    for lease, key in enumerate(("acme", "bolt"), start=1):
        add(0, "activation.started", actor="reporter", key=key, lease=lease, behavior="run", recovered=False, restart=0)
    for day in (0, 1):
        for late, key in enumerate(("acme", "bolt")):
            date = f"2026-01-{day + 1:02d}"
            add((day + 1) * DAY_US + (1 + late) * 30_000_000, "effect", actor="reporter", key=key,
                effect=f"report:{key}:{date}", node="n1", details={"day": date})
    add(3 * DAY_US, "activation.ended", actor="reporter", key="acme", lease=1, reason="idle")
    add(3 * DAY_US, "activation.ended", actor="reporter", key="bolt", lease=2, reason="idle")
    return trace


def test_the_reports_of_two_keys_on_one_node_sit_on_their_keys_bars_and_name_their_key() -> None:
    """acme's stars on acme's bar, bolt's on bolt's (not both on the node's row), labels name the key; bar names off the labels."""
    fig = activation_timeline(_two_keys())
    ax = fig.axes[0]
    centre = {str(p.get_gid()).split(":", 1)[1].strip('"'): p.get_y() + p.get_height() / 2
              for p in ax.patches if str(p.get_gid()).startswith("activation:") and isinstance(p, Rectangle)}
    (stars,) = [c for c in ax.collections if c.get_gid() == "report.built" and isinstance(c, PathCollection)]
    ys = [float(y) for _, y in np.asarray(stars.get_offsets())]
    assert sorted(centre) == ["acme", "bolt"] and centre["acme"] != centre["bolt"]
    assert ys == [centre["acme"], centre["bolt"], centre["acme"], centre["bolt"]]
    assert [t for t in _texts(ax) if "report" in t] == ['"acme": report Jan 01', '"bolt": report Jan 01', '"acme": report Jan 02', '"bolt": report Jan 02']
    renderer = fig._get_renderer()  # type: ignore[attr-defined]  # the one the chart laid its labels out with
    reports = [t.get_window_extent(renderer) for t in ax.texts if "report" in t.get_text()]
    names = [t for t in ax.texts if t.get_text().endswith(" as run")]
    assert len(names) == 2 and not any(n.get_window_extent(renderer).overlaps(r) for n in names for r in reports)
