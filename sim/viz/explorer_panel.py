"""The explorer: scrub a finished run frame by frame, and fork it with one more fault.

``explorer(run)`` returns an ``Explorer``: displayed in a notebook it is an ipywidgets panel; its
parts read only the run's trace (through ``sim.viz.data.frames``):

* a **Play** button and an **IntSlider** over the frame times (``step`` seconds apart), linked in
  the browser (``jslink``), the slider with ``continuous_update=False`` so that dragging draws one
  frame when the mouse lets go, not one per pixel (each frame is drawn by the kernel);
* at time ``t``: the **cluster graph** (``sim.viz.graph``), the **events** of the last step in
  words, and the **lanes up to t**: the key's ownership chart with what comes after ``t`` veiled;
* one **seed** control (the run again under another seed) and four **fault buttons** that act on
  the selected node at ``t``: crash, pause (``pause_for`` s), partition (the node cut from all
  others for ``cut_for`` s), clock step (``step_by`` s). A button **forks** the run: the same
  scenario and seed with exactly one more fault (``sim.faults.FaultPlan`` applied on top of the
  scenario's own script), shown beside the original at the same ``t``. The fork is real: a
  second world runs the runtime again, so a student sees what the fault *does*, not a guess.

Why frames are pre-rendered too: an exported page (``make html``) has no kernel, so a slider
there moves nothing. ``Explorer`` therefore also offers a ``text/html`` fallback, a filmstrip of
``stills`` frames as PNG images inside the page; the export template (``notebooks/tools``)
shows it in place of the dead widget, and a front end without the widget manager shows it too.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image as PILImage

from sim.faults import ClockStep, Crash, Fault, FaultPlan, Partition, Pause
from sim.scenarios import Run
from sim.scenarios import run as run_scenario
from sim.trace import Trace
from sim.world import World
from sim.viz.data.frames import Frame, change_times, frame_at, frame_times, keys_of
from sim.viz.data.keys import key_label
from sim.viz.data.timebase import time_unit
from sim.viz.graph import cluster_graph
from sim.viz.ownership import ownership_chart
from sim.viz.timeline import activation_timeline

__all__ = ["Explorer", "explorer", "png", "FAULT_BUTTONS"]

FAULT_BUTTONS = ("crash", "pause", "partition", "clock step")
_DPI = 72  # the live panel: redrawn by the kernel at every slider move, kept small
# The static copy is drawn once: its stills at 1.5x the pixels of the 340 px they are shown at (sharp legends), and
# the lanes at the inline charts' 100 dpi, shown at their own size, not a 72 dpi raster whose 8 px labels blur.
_STILL_DPI = 110
_STATIC_LANES_DPI = 100


def png(fig: Figure, dpi: int = _DPI) -> bytes:
    """A figure as PNG bytes (the explorer's images and the static filmstrip use the same)."""
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi)
    return out.getvalue()


def _nice_step(end_s: float, frames: int) -> float:
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0):
        if end_s / step <= frames:
            return step
    return end_s / frames


class _Lanes:
    """The lanes chart of one trace, drawn once; ``at(t_ns)`` veils what comes after ``t`` and marks ``t``.

    The chart is rasterized once and each frame only paints the veil and the cursor on a copy of
    the pixels: drawing the chart again for every position of the slider took most of a second.
    """

    VEIL = 0.78  # how much of white covers the future

    def __init__(self, trace: Trace, actor: str | None, key: str | None, title: str | None) -> None:
        self.fig = self.chart(trace, actor, key, title)
        self.fig.set_dpi(_DPI)
        canvas = FigureCanvasAgg(self.fig)
        canvas.draw()  # type: ignore[no-untyped-call]
        self.pixels = np.asarray(canvas.buffer_rgba()).copy()  # type: ignore[no-untyped-call]
        ax = self.fig.axes[0]
        self.unit = time_unit(trace.end_ns / 1e9)
        box = ax.get_window_extent()
        height = self.pixels.shape[0]
        self.rows = (max(int(height - box.y1), 0), min(int(height - box.y0), height))
        self.right = min(int(box.x1), self.pixels.shape[1])
        self.to_pixel = ax.transData

    @staticmethod
    def chart(trace: Trace, actor: str | None, key: str | None, title: str | None) -> Figure:
        """The key's ownership chart, or the activation timeline when the trace has no owner epoch of the key."""
        try:
            if key is None:
                raise ValueError("no key")
            return ownership_chart(trace, actor, key, title=title)
        except ValueError:  # no owner epoch of this key in this trace (a single node, or a fork where nobody won it)
            return activation_timeline(trace, title=title)

    def at(self, t_ns: int) -> bytes:
        x = int(round(self.to_pixel.transform((self.unit.x(t_ns), 0.0))[0]))
        x = max(0, min(x, self.right))
        image = self.pixels.copy()
        top, bottom = self.rows
        future = image[top:bottom, x:self.right, :3].astype(np.float32)
        image[top:bottom, x:self.right, :3] = (future * (1 - self.VEIL) + 255 * self.VEIL).astype(np.uint8)
        image[top:bottom, max(x - 1, 0):x + 1, :3] = 34
        out = io.BytesIO()
        PILImage.fromarray(image).save(out, format="png", compress_level=3)
        return out.getvalue()


class Explorer:
    """The widget panel and its state (see the module docstring); ``widget`` is the ipywidgets root."""

    def __init__(
        self,
        source: Run | Trace,
        *,
        actor: str | None = None,
        key: str | None = None,
        step: float | None = None,
        replicas: int = 3,
        stills: int = 8,
        pause_for: float = 2.0,
        cut_for: float = 3.0,
        step_by: float = -5.0,
    ) -> None:
        if stills < 1:
            raise ValueError(f"stills must be at least 1, got {stills}")
        self.run: Run | None = source if isinstance(source, Run) else None
        self.trace: Trace = source.trace if isinstance(source, Run) else source
        if not isinstance(self.trace, Trace):
            raise TypeError(f"explorer() takes a scenario Run or a Trace, got {type(source).__name__}")
        if len(self.trace) == 0:
            raise ValueError("the trace is empty: nothing to explore")
        self.until = timedelta(seconds=self.run.world.now) if self.run is not None else None
        self.actor, self.key = actor, key
        self.replicas = replicas
        self.stills = stills
        self.pause_for, self.cut_for, self.step_by = pause_for, cut_for, step_by
        self.step = step if step is not None else _nice_step(self.trace.end_ns / 1e9, 150)
        self.fork_run: Run | None = None
        self.fork_fault: Fault | None = None
        self.fork_error: str | None = None  # why the fork's run stopped early (its script met the fault), or None
        self._lanes: dict[str, _Lanes] = {}
        self._pick_key()
        self._times = frame_times(self.trace, self.step)
        self.widget: Any = None
        self._build_widgets()

    # --- data ------------------------------------------------------------------------------

    def _pick_key(self) -> None:
        found = frame_at(self.trace, 0.0, actor=self.actor, key=self.key, replicas=self.replicas)
        self.actor, self.key = found.actor, found.key
        self._nodes = [m.node for m in found.members]

    @property
    def times(self) -> list[int]:
        """The frame times in ns (the slider's positions)."""
        return list(self._times)

    @property
    def t_ns(self) -> int:
        """The time the slider shows."""
        return self._times[self.slider.value] if self.widget is not None else 0

    def frame(self, t: float | None = None, *, fork: bool = False) -> Frame:
        """The frame at ``t`` seconds (default: the slider's time), of the original or of the fork."""
        trace = self._trace(fork)
        when = self.t_ns / 1e9 if t is None else t
        return frame_at(trace, when, actor=self.actor, key=self.key, window=self.step, replicas=self.replicas)

    def _trace(self, fork: bool) -> Trace:
        if not fork:
            return self.trace
        if self.fork_run is None:
            raise RuntimeError("no fork yet: press a fault button (or call fork()) first")
        return self.fork_run.trace

    def nodes(self) -> list[str]:
        """The run's nodes, in the order they started."""
        return list(self._nodes)

    def fault_for(self, button: str, node: str, t: float) -> Fault:
        """The one fault a button adds: ``crash``, ``pause``, ``partition`` or ``clock step`` of ``node`` at ``t`` s."""
        if node not in self.nodes():
            raise ValueError(f"no node {node!r} in this run; its nodes: {', '.join(self.nodes())}")
        if button == "crash":
            return Crash(at=t, node=node)
        if button == "pause":
            return Pause(at=t, node=node, duration=self.pause_for)
        if button == "partition":
            others = tuple(n for n in self.nodes() if n != node)
            if not others:
                raise ValueError(f"a partition needs another node than {node}")
            return Partition(at=t, a=(node,), b=others, duration=self.cut_for)
        if button == "clock step":
            return ClockStep(at=t, node=node, seconds=self.step_by)
        raise ValueError(f"no fault button {button!r}; the buttons are {', '.join(FAULT_BUTTONS)}")

    def fork(self, fault: Fault) -> Run:
        """Run the same scenario and seed again with ``fault`` added to whatever it does; keep it as the fork."""
        if self.run is None:
            raise RuntimeError("a fork needs a scenario run (explorer(scenarios.run(...))); this explorer was given a bare trace")
        unknown = [n for n in fault.nodes() if n not in self.nodes()]
        if unknown:
            raise ValueError(f"{fault} names node(s) {', '.join(unknown)}; the run has {', '.join(self.nodes())}")
        plan = FaultPlan.of(fault)
        worlds: list[World] = []

        def apply(world: World) -> None:
            worlds.append(world)
            plan.apply(world)

        self.fork_error = None
        try:
            self.fork_run = run_scenario(self.run.scenario.name, self.run.seed, until=self.until, on_world=apply)
        except Exception as exc:  # the scenario's own script may not survive the fault (a client on the crashed node)
            if not worlds:
                raise
            world = worlds[0]
            world.close()
            self.fork_error = f"the run stopped at {world.now:.2f} s: {type(exc).__name__}: {exc}"
            self.fork_run = Run(self.run.scenario, self.run.seed, world, [])
        self.fork_fault = fault
        self._lanes.pop("fork", None)
        if self.widget is not None:
            self._refresh_times()
            self._draw()
        return self.fork_run

    def reseed(self, seed: int) -> Run:
        """The original run under another seed (the fork is dropped: it belonged to the old seed)."""
        if self.run is None:
            raise RuntimeError("a new seed needs a scenario run; this explorer was given a bare trace")
        self.run = run_scenario(self.run.scenario.name, seed, until=self.until)
        self.trace = self.run.trace
        self.fork_run, self.fork_fault, self.fork_error = None, None, None
        self._lanes.clear()
        self._pick_key()
        if self.widget is not None:
            self._refresh_times()
            self._draw()
        return self.run

    # --- pictures --------------------------------------------------------------------------

    def graph_png(self, t_ns: int, *, fork: bool = False, dpi: int = _DPI) -> bytes:
        frame = frame_at(self._trace(fork), t_ns / 1e9, actor=self.actor, key=self.key, window=self.step, replicas=self.replicas)
        return png(cluster_graph(frame), dpi=dpi)

    def lanes_png(self, t_ns: int, *, fork: bool = False) -> bytes:
        name = "fork" if fork else "original"
        lanes = self._lanes.get(name)
        if lanes is None:
            title = None
            if fork and self.fork_fault is not None:
                title = f"fork: the same seed + {self.fork_fault}"
            lanes = self._lanes[name] = _Lanes(self._trace(fork), self.actor, self.key, title)
        return lanes.at(t_ns)

    def still_times(self, count: int | None = None) -> list[int]:
        """``count`` frame times for the static filmstrip: the first and last, and the moments things changed.

        The moments are the frames just after each fault, clock change, owner epoch or end of the
        key's run (a filmstrip spaced evenly would show quiet frames between them); when there are
        more moments than room, an even pick of them; when fewer, evenly spaced frames fill in.
        """
        n = self.stills if count is None else count
        times = self._times
        if n >= len(times):
            return list(times)
        if n == 1:
            return [times[-1]]
        step_ns = times[1] - times[0]
        moments: list[int] = []
        for t_ns in change_times(self.trace, self.actor, self.key):
            index = min(-(-t_ns // step_ns), len(times) - 1)  # the first frame at or after the change
            if times[index] not in moments and 0 < index < len(times) - 1:
                moments.append(times[index])
        inner = n - 2
        if len(moments) > inner:
            moments = [moments[round(i * (len(moments) - 1) / max(inner - 1, 1))] for i in range(inner)] if inner else []
        chosen = sorted({times[0], times[-1], *moments})
        spread = [times[round(i * (len(times) - 1) / (n - 1))] for i in range(n)]
        for t in spread:  # fill in, evenly, when the run had fewer moments than stills
            if len(chosen) >= n:
                break
            if t not in chosen:
                chosen.append(t)
                chosen.sort()
        return chosen[:n] if len(chosen) > n else chosen

    def filmstrip_html(self, count: int | None = None) -> str:
        """The static fallback: ``count`` pre-rendered frames (graph and events), then the full lanes chart."""
        cells = []
        for t_ns in self.still_times(count):
            frame = self.frame(t_ns / 1e9)
            image = base64.b64encode(self.graph_png(t_ns, dpi=_STILL_DPI)).decode()
            events = "".join(f"<li>{html.escape(e)}</li>" for e in frame.events[:8]) or "<li>(nothing happened in this step)</li>"
            more = f"<li>... {len(frame.events) - 8} more</li>" if len(frame.events) > 8 else ""
            cells.append(
                f'<figure class="casty-still" style="display:inline-block;vertical-align:top;width:340px;margin:4px">'
                f'<img alt="the cluster at t = {frame.t:.2f} s" src="data:image/png;base64,{image}" style="width:100%"/>'
                f'<figcaption style="font-size:12px"><ul style="margin:0;padding-left:16px">{events}{more}</ul></figcaption></figure>'
            )
        # the whole chart, no veil or cursor, drawn afresh: saving the live panel's figure at another dpi would move its layout
        whole = _Lanes.chart(self.trace, self.actor, self.key, None)
        lanes = base64.b64encode(png(whole, dpi=_STATIC_LANES_DPI)).decode()
        what = key_label(self.actor, self.key) if self.actor and self.key else "the run"
        return (
            '<div class="casty-explorer-static">'
            f"<p><b>Explorer, static copy</b>: {len(cells)} frames of {html.escape(what)} rendered when the notebook ran. "
            "Run the notebook with a kernel to scrub every frame and fork the run with a fault.</p>"
            + "".join(cells)
            + f'<img class="casty-lanes" alt="the lanes of the whole run" src="data:image/png;base64,{lanes}" style="max-width:100%"/>'
            "</div>"
        )

    # --- widgets ---------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        import ipywidgets as widgets  # type: ignore[import-untyped]

        self.play = widgets.Play(value=0, min=0, max=len(self._times) - 1, step=1, interval=900, description="play")
        self.slider = widgets.IntSlider(value=0, min=0, max=len(self._times) - 1, step=1, continuous_update=False,
                                        readout=False, description="frame", layout=widgets.Layout(width="420px"))
        self._link = widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.clock = widgets.Label(value="")
        self.node_box = widgets.Dropdown(options=self.nodes(), description="node", layout=widgets.Layout(width="160px"))
        known = keys_of(self.trace)
        key_options: list[tuple[str, tuple[str, str] | None]] = [(key_label(a, k), (a, k)) for a, k in known]
        chosen = (self.actor, self.key) if self.actor is not None and self.key is not None else None
        if chosen is not None and chosen not in known:  # an internal key asked for by name
            key_options.append((key_label(*chosen), chosen))
        self.key_box = widgets.Dropdown(options=key_options or [("(no key)", None)], value=chosen, description="key",
                                        layout=widgets.Layout(width="260px"))
        can_fork = self.run is not None
        self.seed_box = widgets.IntText(value=self.run.seed if self.run is not None else 0, description="seed",
                                        disabled=not can_fork, layout=widgets.Layout(width="150px"))
        self.buttons = {name: widgets.Button(description=name, disabled=not can_fork,
                                             tooltip=f"fork: the same seed with a {name} of the selected node at t")
                        for name in FAULT_BUTTONS}
        self.status = widgets.HTML(value="")
        self.images = {side: widgets.Image(format="png", layout=widgets.Layout(max_width="100%")) for side in ("original", "fork")}
        self.events = {side: widgets.HTML(value="") for side in ("original", "fork")}
        self.lanes = {side: widgets.Image(format="png", layout=widgets.Layout(max_width="100%")) for side in ("original", "fork")}
        # the same height on both sides, so the two graphs line up however long the fork's verdict is
        self.headers = {side: widgets.HTML(value="", layout=widgets.Layout(min_height="4.5em")) for side in ("original", "fork")}
        panel = {side: widgets.VBox([self.headers[side], self.images[side], self.events[side]],
                                    layout=widgets.Layout(width="50%")) for side in ("original", "fork")}
        self.slider.observe(self._on_slide, names="value")
        self.key_box.observe(self._on_key, names="value")
        self.seed_box.observe(self._on_seed, names="value")
        for name, button in self.buttons.items():
            button.on_click(self._on_fault(name))
        self.widget = widgets.VBox([
            widgets.HBox([self.play, self.slider, self.clock]),
            widgets.HBox([self.seed_box, self.key_box, self.node_box, *self.buttons.values()]),
            self.status,
            widgets.HBox([panel["original"], panel["fork"]]),
            self.lanes["original"],
            self.lanes["fork"],
        ])
        self._draw()

    def _refresh_times(self) -> None:
        ends = [self.trace.end_ns] + ([self.fork_run.trace.end_ns] if self.fork_run is not None else [])
        longest = self.trace if ends[0] >= max(ends) else self.fork_run.trace  # type: ignore[union-attr]
        self._times = frame_times(longest, self.step)
        top = len(self._times) - 1
        for control in (self.play, self.slider):
            control.max = top
            if control.value > top:
                control.value = top

    def _on_slide(self, change: dict[str, Any]) -> None:
        self._draw()

    def _on_key(self, change: dict[str, Any]) -> None:
        if change["new"] is None:
            return
        self.actor, self.key = change["new"]
        self._lanes.clear()
        self._draw()

    def _on_seed(self, change: dict[str, Any]) -> None:
        self.status.value = f"running seed {change['new']}..."
        self.reseed(int(change["new"]))

    def _on_fault(self, name: str) -> Callable[[Any], None]:
        def click(_: Any) -> None:
            fault = self.fault_for(name, str(self.node_box.value), round(self.t_ns / 1e9, 6))
            self.status.value = f"forking: the same seed with {html.escape(str(fault))}..."
            self.fork(fault)

        return click

    def _draw(self) -> None:
        t_ns = self.t_ns
        self.clock.value = f"t = {t_ns / 1e9:.2f} s of {self._times[-1] / 1e9:.2f} s (step {self.step:g} s)"
        sides = ["original"] + (["fork"] if self.fork_run is not None else [])
        for side in sides:
            fork = side == "fork"
            trace = self._trace(fork)
            frame = frame_at(trace, min(t_ns, max(self._times)) / 1e9, actor=self.actor, key=self.key,
                             window=self.step, replicas=self.replicas)
            self.images[side].value = png(cluster_graph(frame))
            items = "".join(f"<li>{html.escape(e)}</li>" for e in frame.events) or "<li>(nothing happened in this step)</li>"
            self.events[side].value = f'<ul style="font-size:12px;margin:0">{items}</ul>'
            self.lanes[side].value = self.lanes_png(t_ns, fork=fork)
            self.images[side].layout.display = self.lanes[side].layout.display = None
        run = self.run
        self.headers["original"].value = (
            f"<b>original</b>: {html.escape(run.scenario.name)} seed {run.seed}, checks {'hold' if run.ok else 'FAIL'}"
            if run is not None else "<b>original</b>: a trace (no scenario: forks need one)"
        )
        if self.fork_run is not None:
            fork_run = self.fork_run
            failures = "".join(f"<br/>{html.escape(str(f))}" for f in fork_run.failures[:3])
            verdict = f"checks {'hold' if fork_run.ok else 'FAIL'}" if self.fork_error is None else html.escape(self.fork_error)
            self.headers["fork"].value = (
                f"<b>fork</b>: the same seed + {html.escape(str(self.fork_fault))}: {verdict}{failures}"
            )
            self.status.value = ""
        else:
            self.headers["fork"].value = "<b>fork</b>: none yet. Pick a node and a time, then press a fault button."
            self.images["fork"].value = b""
            self.events["fork"].value = ""
            self.lanes["fork"].value = b""
            self.images["fork"].layout.display = self.lanes["fork"].layout.display = "none"  # no broken-image icons

    # --- display ---------------------------------------------------------------------------

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The widget view, with the filmstrip as ``text/html`` for a page without a kernel (see the module docstring)."""
        data: dict[str, Any] = dict(self.widget._repr_mimebundle_() or {})
        data["text/html"] = self.filmstrip_html()
        data["text/plain"] = repr(self)
        return data, {"casty": {"static_fallback": "text/html"}}

    def __repr__(self) -> str:
        what = key_label(self.actor, self.key) if self.actor and self.key else "no key"
        return f"<Explorer {what}, {len(self._times)} frames of {self.step:g} s>"


def explorer(source: Run | Trace, **options: Any) -> Explorer:
    """An ``Explorer`` of a finished scenario run (forkable) or of a bare trace (scrub only); see ``Explorer``."""
    return Explorer(source, **options)
