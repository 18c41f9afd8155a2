"""sim.gcpolicy: the young-generation threshold is raised only while a world runs, and put back after."""

from __future__ import annotations

import gc

from sim.gcpolicy import young_collections_every
from sim.world import World


def test_threshold_raised_inside_and_restored_after() -> None:
    """Inside the block the first threshold is the one asked for; after it (even after an error) the old one is back."""
    before = gc.get_threshold()
    with young_collections_every(before[0] + 1000):
        assert gc.get_threshold() == (before[0] + 1000, *before[1:])
    assert gc.get_threshold() == before
    try:
        with young_collections_every(before[0] + 5):
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.get_threshold() == before


def test_none_or_a_lower_threshold_changes_nothing() -> None:
    """None keeps the process's threshold, and so does a value below it (a host that already collects less often)."""
    before = gc.get_threshold()
    with young_collections_every(None):
        assert gc.get_threshold() == before
    with young_collections_every(max(1, before[0] - 1)):
        assert gc.get_threshold() == before


def test_world_run_uses_the_policy_and_traces_do_not_depend_on_it() -> None:
    """Two worlds of one seed, one with the policy and one without, give the same trace digest."""
    digests = []
    for young in (None, 50_000):
        world = World(3, gc_young=young)
        world.add_node("n1")
        seen: list[tuple[int, int, int]] = []

        async def probe(_system: object) -> None:
            seen.append(gc.get_threshold())

        world.spawn("n1", probe)
        world.run(until=1.0)
        assert seen and (seen[0][0] == 50_000) == (young == 50_000 and gc.get_threshold()[0] < 50_000)
        digests.append(world.trace.digest())
        world.close()
    assert digests[0] == digests[1]
