"""Probes of the runtime's own rules: the activation lease, catch-up of node schedules, tombstones."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem

from ...world import World
from .. import scenario
from . import Add, Forget, Outlive, Read, tally
from .kit import CLUSTER_CHECKS, DECLARED_DEAD, NODES, _adds, _ask, _expect, _on_a_key, _placed


# ==================================================================== the lease ======


def _late_write_refused(world: World) -> None:
    """The failed run's late write was refused as fenced (its lease is gone); the count is the confirmed one."""
    check = "late_write_refused"
    _expect(check, world.results.get("counted") == [1, 2, 3], f"the counts before: {world.results.get('counted')}")
    late = [r for r in world.trace.of("write.failed", key="k") if r.get("reason") == "fenced"]
    _expect(check, len(late) == 1, f"{len(late)} fenced writes, expected the one late write")
    started = world.trace.of("activation.started", key="k")
    _expect(check, len(started) >= 2 and late[0].get("lease") == started[0].get("lease"), "the fenced write was not the first run's")
    _expect(check, world.results.get("after") == 3, f"the count after the late write is {world.results.get('after')}, expected 3")


@scenario(
    "stale-run-fenced",
    "a body starts a background write and fails; the write comes after the body restarted: refused as fenced (the lease)",
    until=timedelta(seconds=10),
    checks=(_late_write_refused,),
)
def stale_run_fenced(world: World) -> None:
    world.add_node("n1")

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(0.5)
        _adds(world, "n1", "k", 3, "counted")
        yield world.timeout(0.5)
        _ask(world, "n1", "k", Outlive(1.0), "outlived")
        yield world.timeout(2.0)
        _ask(world, "n1", "k", Read(), "after")

    world.process(script(world))


# ================================================================= node catch-up ======

NODE_EVERY = 10.0
PAUSE_AT = 25.0
PAUSED_FOR = 60.0


def _node_caught_up_once(world: World) -> None:
    """After the pause the node schedule delivered once (skipping the ticks missed, counted), then kept its grid: no burst."""
    check = "node_caught_up_once"
    resume = world.trace.of("fault.resume")[0]
    fired = world.trace.of("node_schedule.fired")
    at_resume = [r for r in fired if r.t_ns == resume.t_ns]
    _expect(check, len(at_resume) == 1, f"{len(at_resume)} ticks delivered at the resume, expected 1")
    instants = [r.t_ns for r in fired]
    _expect(check, len(instants) == len(set(instants)), "two ticks delivered at the same instant")
    caught = [r for r in world.trace.of("node_schedule.caught_up") if r.t_ns >= resume.t_ns]
    _expect(check, len(caught) == 1, f"{len(caught)} catch-ups after the resume, expected 1")
    after = [r for r in fired if r.t_ns > resume.t_ns]
    _expect(check, len(after) >= 3, f"only {len(after)} ticks after the resume")


@scenario(
    "node-pause-catch-up",
    "a node schedule (every 10 s) on a node paused for 60 s: one late delivery at the resume, the missed ticks skipped, no burst",
    until=timedelta(seconds=130),
    checks=(_node_caught_up_once,),
)
def node_pause_catch_up(world: World) -> None:
    world.add_node("n1")

    async def arm(system: ActorSystem) -> str:
        return await system.schedule(Add(), system.ref(tally, "beats"), timedelta(seconds=NODE_EVERY), reference="beats")

    world.spawn("n1", arm)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(PAUSE_AT)
        world.pause("n1")
        yield world.timeout(PAUSED_FOR)
        world.resume("n1")

    world.process(script(world))


# ==================================================================== tombstones ======


def _deleted_stays_deleted(world: World) -> None:
    """The key counted to 5, was deleted while one replica was cut off, and its next owner started it from 0 again."""
    check = "deleted_stays_deleted"
    _expect(check, world.results.get("counted") == [1, 2, 3, 4, 5], f"the counts before the delete: {world.results.get('counted')}")
    _expect(check, world.results.get("forgot") is None, f"the delete failed: {world.results.get('forgot')}")
    _expect(check, world.results.get("released") == "released", f"the release failed: {world.results.get('released')}")
    after = world.results.get("after")
    _expect(check, after == 1, f"the first Add after the delete answered {after}, expected 1 (a deleted key starts from 0)")


@scenario(
    "delete-and-return",
    "3 nodes: a key is deleted and released while one replica is cut off, then its owner crashes: the next owner finds it deleted",
    until=timedelta(seconds=12),
    checks=(_deleted_stays_deleted, *CLUSTER_CHECKS),
)
def delete_and_return(world: World) -> None:
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key)
        assert owner == "n3" and len(replicas) == 3
        client = replicas[1]  # on the side of the owner while replicas[2] is cut off
        _adds(world, client, key, 5, "counted")
        yield world.timeout(1.0)
        world.partition([replicas[2]], [n for n in NODES if n != replicas[2]])
        _ask(world, client, key, Forget(), "forgot")

        async def release(system: ActorSystem) -> str:
            await asyncio.sleep(0.1)
            await system.release(tally, key)
            return "released"

        task = world.spawn(owner, release)
        task.add_done_callback(lambda t: world.results.__setitem__("released", t.result() if t.exception() is None else repr(t.exception())))
        yield world.timeout(0.5)
        world.heal()
        yield world.timeout(0.5)
        world.crash(owner)
        yield world.timeout(DECLARED_DEAD + 1.0)
        _ask(world, client, key, Add(), "after")

    _on_a_key(world, "n3", "gone", script)
