"""Views drawn from traces (see the sim issue)."""

from sim.viz.catchup import catchup_chart
from sim.viz.ownership import ownership_chart
from sim.viz.spacetime import spacetime_diagram
from sim.viz.timeline import activation_timeline

__all__ = ["activation_timeline", "catchup_chart", "ownership_chart", "spacetime_diagram"]
