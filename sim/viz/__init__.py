"""Views drawn from traces (see the sim issue)."""

from sim.viz.catchup import catchup_chart
from sim.viz.clocks import clock_chart, clock_offsets
from sim.viz.explorer import Explorer, explorer
from sim.viz.frames import Frame, frame_at
from sim.viz.graph import cluster_graph
from sim.viz.ownership import ownership_chart
from sim.viz.spacetime import spacetime_diagram
from sim.viz.ticks import ticks_chart
from sim.viz.timeline import activation_timeline

__all__ = [
    "Explorer",
    "Frame",
    "activation_timeline",
    "catchup_chart",
    "clock_chart",
    "clock_offsets",
    "cluster_graph",
    "explorer",
    "frame_at",
    "ownership_chart",
    "spacetime_diagram",
    "ticks_chart",
]
