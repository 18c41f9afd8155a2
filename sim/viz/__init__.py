"""Views drawn from traces (see the sim issue).

The charts import matplotlib; their data layer (``sim.viz.data``) does not. So this package loads a
chart's module only when one of its names is first asked for (PEP 562): ``import sim.viz.data`` runs
this file, and an eager import here would pull matplotlib into every reader of the data layer.
``from sim.viz import activation_timeline`` works as before.

The explorer's module is ``explorer_panel``, not ``explorer``: importing a submodule sets the package's
attribute of that name, so a module ``sim.viz.explorer`` would hide the function ``sim.viz.explorer``
once anything imported the module first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.viz.catchup import catchup_chart
    from sim.viz.clocks import clock_chart
    from sim.viz.data.clocks import clock_offsets
    from sim.viz.data.frames import Frame, frame_at
    from sim.viz.explorer_panel import Explorer, explorer
    from sim.viz.graph import cluster_graph
    from sim.viz.data.ledger import ledger_table
    from sim.viz.ledger import ledger_chart
    from sim.viz.ownership import ownership_chart
    from sim.viz.spacetime import spacetime_diagram
    from sim.viz.ticks import ticks_chart
    from sim.viz.timeline import activation_timeline

_HOMES = {
    "Explorer": "sim.viz.explorer_panel",
    "Frame": "sim.viz.data.frames",
    "activation_timeline": "sim.viz.timeline",
    "catchup_chart": "sim.viz.catchup",
    "clock_chart": "sim.viz.clocks",
    "clock_offsets": "sim.viz.data.clocks",
    "cluster_graph": "sim.viz.graph",
    "explorer": "sim.viz.explorer_panel",
    "frame_at": "sim.viz.data.frames",
    "ledger_chart": "sim.viz.ledger",
    "ledger_table": "sim.viz.data.ledger",
    "ownership_chart": "sim.viz.ownership",
    "spacetime_diagram": "sim.viz.spacetime",
    "ticks_chart": "sim.viz.ticks",
}

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
    "ledger_chart",
    "ledger_table",
    "ownership_chart",
    "spacetime_diagram",
    "ticks_chart",
]


def __getattr__(name: str) -> Any:
    """Import the module that holds ``name`` on first use (see the module docstring)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sim.viz' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
