"""The simulated network's trace rows: counted always, built only when the trace keeps them."""

from __future__ import annotations

from sim.scenarios.cluster import CLUSTER, NODES
from sim.world import World


def _three_nodes(world: World) -> World:
    for name in NODES:
        world.add_node(name, cluster=CLUSTER)
    world.run(until=3.0)
    return world


def test_unkept_frame_rows_are_counted_like_kept_ones() -> None:
    """A world that keeps no net.* rows counts the same net.sent / net.delivered events as one that keeps them all."""
    kept = _three_nodes(World(5))
    counted = _three_nodes(World(5, keep=lambda kind: not kind.startswith("net.")))
    assert kept.trace.counts["net.sent"] > 0
    for kind in ("net.sent", "net.delivered"):
        assert counted.trace.counts[kind] == kept.trace.counts[kind] == len(kept.trace.of(kind))
        assert not counted.trace.of(kind)
    same = [(r.t_ns, r.node, r.wall_us, r.kind, dict(r.fields)) for r in kept.trace if not r.kind.startswith("net.")]
    assert [(r.t_ns, r.node, r.wall_us, r.kind, dict(r.fields)) for r in counted.trace] == same
