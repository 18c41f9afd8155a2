"""The views' data layer: what each chart shows, read from a trace into plain values, without matplotlib.

Every chart in ``sim.viz`` reads the trace here and only draws what it gets back; the explorer's
frames and the notebooks' checks read the same functions. So a picture, the text beside it and the
assertion under it come from one extraction: a check that passes says something about what the
picture shows. Nothing in this package imports matplotlib (``tests/test_viz_data.py`` holds it to
that), so a test, a sweep or a notebook cell can read these without a plotting library.

* ``timebase``: the x-axis unit, durations in words, the trace's end, each node's wall clock;
* ``nodes``: faults per node (crash, down, restart, pause, clock step);
* ``activations``: activation runs as bars in sub-rows (the activation timeline);
* ``reports``: daily reports and the days missing between them;
* ``ownership``: owner-epoch spans of a key, handoff rounds, the ownership story in words;
* ``cuts``: network cuts as spells and bands;
* ``catchup``: one schedule's rows and nominal due grid;
* ``clocks``: clock offsets per node, its steps and drift changes;
* ``ticks``: periodic deliveries by (node, source);
* ``spacetime``: the space-time window and the node events' labels;
* ``frames``: the state of the cluster at one instant, and the instants things changed (the explorer);
* ``keys``: which keys are the runtime's own;
* ``notes``: the world's notes, which the timeline and the catch-up chart number.
"""

from __future__ import annotations

from sim.viz.data.activations import Bar, activation_bars, assign_slots, timeline_nodes
from sim.viz.data.catchup import ScheduleRows, grid_dues, grid_segments, schedule_rows, select_schedule
from sim.viz.data.clocks import ClockDrift, ClockStep, clock_drifts, clock_offsets, clock_steps
from sim.viz.data.cuts import Band, Spell, bands, spells
from sim.viz.data.frames import Frame, MemberState, change_times, describe, frame_at, frame_times, keys_of
from sim.viz.data.keys import is_internal
from sim.viz.data.nodes import NodeEvents, Span, node_events
from sim.viz.data.notes import Note, note_rows
from sim.viz.data.ownership import EpochSpan, KeyMarks, epoch_spans, handoff_rounds, key_marks, ownership_story, select_key
from sim.viz.data.reports import day_label, omitted_reports, report_rows
from sim.viz.data.spacetime import default_window, node_marks, spacetime_lanes
from sim.viz.data.ticks import tick_rows
from sim.viz.data.timebase import TimeUnit, WallMap, end_ns, time_unit

__all__ = [
    "Band", "Bar", "ClockDrift", "ClockStep", "EpochSpan", "Frame", "KeyMarks", "ScheduleRows", "MemberState", "NodeEvents", "Note", "Span",
    "Spell", "TimeUnit", "WallMap", "activation_bars", "assign_slots", "bands", "change_times", "clock_drifts", "clock_offsets", "clock_steps", "day_label", "default_window", "describe", "end_ns",
    "epoch_spans", "frame_at", "frame_times", "grid_dues", "grid_segments", "handoff_rounds", "is_internal", "key_marks",
    "keys_of", "node_events", "node_marks", "note_rows", "omitted_reports", "ownership_story", "report_rows", "schedule_rows", "select_key",
    "select_schedule", "spacetime_lanes", "spells", "tick_rows", "time_unit", "timeline_nodes",
]
