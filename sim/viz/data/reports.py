"""Daily reports read from a trace: which day each report is about, and the days missing between them (no matplotlib).

A report is a ``report.built`` row, or an ``effect`` row of the effects ledger whose details carry
a ``day``. An omission is a gap, and a gap draws nothing unless marked: ``omitted_reports`` turns
each missing day into a row a chart can draw (a hollow red star) and a check can count.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from sim.trace import Row, Trace

__all__ = ["day_label", "day_number", "report_day", "report_rows", "omitted_reports"]


def day_label(day: Any) -> str:
    """A report's day (whole days since the epoch, or an ISO date) as a short date, e.g. 'Jan 03'; anything else as is."""
    number = day_number(day)
    if number is not None:
        return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(days=number)).strftime("%b %d")
    return str(day)


def day_number(day: Any) -> int | None:
    """Whole days since the epoch of a report's day: an int as is, an ISO date ('2026-01-03') converted; else None."""
    if isinstance(day, int) and not isinstance(day, bool):
        return day
    if isinstance(day, str):
        try:
            return (datetime.fromisoformat(day).replace(tzinfo=timezone.utc).date() - datetime(1970, 1, 1).date()).days
        except ValueError:
            return None
    return None


def report_day(row: Row) -> Any:
    """The day a report row is about: ``day`` of a ``report.built`` row, ``details.day`` of an ``effect`` row."""
    if row.kind == "effect":
        details = row.get("details")
        return details.get("day") if isinstance(details, dict) else None
    return row.get("day")


def report_rows(trace: Trace) -> list[Row]:
    """The daily reports of a run: ``report.built`` rows, and ``effect`` rows (the effects ledger) whose details carry a day."""
    return [r for r in trace.rows if r.kind == "report.built" or (r.kind == "effect" and report_day(r) is not None)]


def omitted_reports(reports: Sequence[Row]) -> list[tuple[Row, Any]]:
    """Days missing between the first and the last report of each key, with the report row before the gap.

    Each comes back as ``(row, day)``: ``row`` a copy of the last report before the gap, moved to where
    the missing day's report was due (one period, the distance between two reported days, after it),
    so a chart can draw it on that node's row; ``day`` the missing day, as the reports spell days.
    """
    by_key: dict[Any, dict[int, Row]] = {}
    spelled_as_date: dict[Any, bool] = {}
    for r in reports:
        number = day_number(report_day(r))
        if number is None:
            continue
        by_key.setdefault(r.get("key"), {}).setdefault(number, r)
        spelled_as_date[r.get("key")] = isinstance(report_day(r), str)
    out: list[tuple[Row, Any]] = []
    for key, days in by_key.items():
        ordered = sorted(days)
        for before, after in zip(ordered, ordered[1:]):
            per_day = (days[after].t_ns - days[before].t_ns) / (after - before)
            for missing in range(before + 1, after):
                due = days[before].t_ns + int(per_day * (missing - before))
                spelled = (datetime(1970, 1, 1) + timedelta(days=missing)).date().isoformat() if spelled_as_date[key] else missing
                out.append((Row(days[before].seq, due, days[before].node, None, "report.omitted", {"key": key, "day": spelled}), spelled))
    return out
