"""What the probe scripts share: a three-node cluster that declares a node dead fast, and clients whose answers land in ``world.results``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

import simpy

from casty import ActorSystem
from casty.cluster.config import Cluster

from ...checks import CheckFailed, epochs_only_grow, no_confirmed_write_lost, single_writer_per_epoch
from ...world import World
from . import Add, tally


NODES = ("n1", "n2", "n3")
FIVE = ("n1", "n2", "n3", "n4", "n5")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
CONVERGED = 2.0
DECLARED_DEAD = 0.2 + 1 + 1 + 0.5  # silence, suspect_after, dead_after, slack
CLUSTER_CHECKS = (epochs_only_grow, single_writer_per_epoch, no_confirmed_write_lost)


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


def _ask(world: World, node: str, key: str, message: Any, result: str, actor_type: Any = tally) -> None:
    """Ask ``actor_type[key]`` from ``node`` in the background; the answer (or the exception's name) lands in ``world.results[result]``."""

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(actor_type, key).ask(message)
        except Exception as exc:
            return type(exc).__name__

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: world.results.__setitem__(result, _outcome(t)))


def _outcome(task: Any) -> Any:
    """A client task's result; ``"cancelled"`` if its node crashed under it."""
    return "cancelled" if task.cancelled() else task.result()


def _adds(world: World, node: str, key: str, count: int, result: str, actor_type: Any = tally) -> None:
    """``count`` Adds one after the other from ``node``; ``world.results[result]`` gets the list of answers."""

    async def client(system: ActorSystem) -> list[Any]:
        answers: list[Any] = []
        for _ in range(count):
            try:
                answers.append(await system.ref(actor_type, key).ask(Add()))
            except Exception as exc:
                answers.append(type(exc).__name__)
        return answers

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: world.results.__setitem__(result, _outcome(t)))


def _nodes(world: World, cluster: Cluster = CLUSTER, nodes: tuple[str, ...] = NODES) -> None:
    for name in nodes:
        world.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=1.0)


def _placed(world: World, key: str, actor_type: Any = tally) -> tuple[str | None, tuple[str, ...]]:
    placed = world.system("n1").placement(actor_type, key)
    return placed.owner, placed.replicas


def _key_owned_by(world: World, node: str, prefix: str, actor_type: Any = tally) -> str:
    return next(k for k in (f"{prefix}{i}" for i in range(500)) if _placed(world, k, actor_type)[0] == node)


def _on_a_key(
    world: World,
    owner: str,
    prefix: str,
    script: Callable[[World, str], Generator[simpy.Event, Any, None]],
    *,
    cluster: Cluster = CLUSTER,
    nodes: tuple[str, ...] = NODES,
    actor_type: Any = tally,
) -> None:
    """The setup most probes share: ``nodes`` join ``cluster``; once they converged, the first key named ``prefix0``,
    ``prefix1``, ... that ``owner`` holds is chosen (``world.results["key"]``) and ``script(world, key)`` goes on from there."""
    _nodes(world, cluster, nodes)

    def run() -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, owner, prefix, actor_type)
        yield from script(world, key)

    world.process(run())


def _ints(answers: Any) -> list[int]:
    return [a for a in answers if isinstance(a, int)] if isinstance(answers, list) else []


def _paced_adds(world: World, node: str, key: str, seconds: float, result: str) -> None:
    """An Add every 0.5 s for ``seconds`` from ``node``; the answers (or the errors' names) in ``world.results[result]``."""

    async def client(system: ActorSystem) -> list[Any]:
        answers: list[Any] = []
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end:
            try:
                answers.append(await system.ref(tally, key).ask(Add()))
            except Exception as exc:
                answers.append(type(exc).__name__)
            await asyncio.sleep(0.5)
        return answers

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: world.results.__setitem__(result, _outcome(t)))
