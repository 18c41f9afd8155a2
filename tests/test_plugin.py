"""The seam between the runtime and a cluster (casty/_core/plugin.py): any ClusterOptions plugs in, the scheduler's claims are provided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from conftest import LoopClock, run_virtual

import casty._core.scheduler as scheduler_module
from casty import ActorSystem, ConfigurationError, Context, actor
from casty._core.plugin import ClusterOptions, ClusterPlugin
from casty._core.system import Placement
from casty.cluster.claims import CLAIMS
from casty.cluster.config import Cluster


@dataclass(frozen=True)
class Add:
    n: int


@actor(initial=0)
async def plugged(ctx: Context[int, Add]) -> None:
    """A key that counts what it is told."""
    async for msg in ctx.inbox:
        await ctx.state.set(ctx.state.value + msg.n)


class FakeTransport:
    """Only what the system reads of a transport before entry: its node id."""

    def __init__(self, node: str) -> None:
        self.node = node


class ElsewhereNode:
    """A ClusterPlugin that places every key on node "far" and records what the system hands it."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def owner_of(self, actor: str, key: str) -> str | None:
        return "far"

    def placement(self, actor: str, key: str) -> Placement:
        return Placement(owner="far", replicas=("far",))

    def members(self) -> list[Any]:
        return []

    def send(self, request: int, actor: str, key: str, message: bytes, reply_request: int | None, origin: str | None) -> None:
        self.log.append(("send", actor, key, reply_request, origin))

    def forget(self, request: int) -> None:
        self.log.append(("forget",))

    def reply(self, ref: Any, value: Any) -> None:
        self.log.append(("reply", value))

    def close(self, *, crashed: bool = False) -> None:
        self.log.append(("close", crashed))

    @property
    def replication(self) -> Any:
        return None

    def replicas_of(self, actor: str, key: str, n: int) -> tuple[str, ...]:
        return ("far",)

    def orphaned(self, entity: tuple[str, str], *, if_marked: bool = False) -> None:
        self.log.append(("orphaned", entity))

    def acquired(self, entity: tuple[str, str]) -> None:
        self.log.append(("acquired", entity))

    def fail(self, ref: Any, error: BaseException, actor: str, key: str, message: Any) -> None:
        self.log.append(("fail", repr(error)))

    def page_writer(self, activation: Any) -> Any:
        raise AssertionError("no key runs here")


class ElsewhereOptions:
    """ClusterOptions that are not casty.Cluster: the system takes them by what they can do."""

    def __init__(self) -> None:
        self.log: list[Any] = []

    def check_transport(self, transport: Any) -> None:
        self.log.append(("check_transport", transport.node))

    def build_node(self, system: ActorSystem) -> ClusterPlugin:
        self.log.append(("build_node", system.node))
        return ElsewhereNode(self.log)


def test_any_cluster_options_plug_in_and_the_system_routes_through_their_node() -> None:
    """Options that only fit the protocol: checked at construction, built at entry, a tell for a key placed elsewhere goes to send, close at exit."""
    options = ElsewhereOptions()

    async def main(clock: LoopClock) -> tuple[Any, list[tuple[str, str]]]:
        system = ActorSystem(node="here", cluster=options, transport=FakeTransport("here"), clock=clock)  # type: ignore[arg-type]
        assert options.log == [("check_transport", "here")]
        async with system:
            system.ref(plugged, "k").tell(Add(2))
            placed = system.placement(plugged, "k")
            return placed, system.activations()

    placed, running = run_virtual(main)
    assert (placed, running) == (Placement(owner="far", replicas=("far",)), [])
    assert options.log == [
        ("check_transport", "here"),
        ("build_node", "here"),
        ("send", plugged.name, "k", None, None),
        ("close", False),
    ]


def test_cluster_fits_the_options_protocol_and_anything_else_is_refused() -> None:
    """casty.Cluster is a ClusterOptions; cluster= given something that is not one is a ConfigurationError naming it."""
    assert isinstance(Cluster(["a"]), ClusterOptions)
    with pytest.raises(ConfigurationError, match=r"a transport needs cluster=Cluster\(\.\.\.\), got cluster='a'"):
        ActorSystem(node="here", cluster="a", transport=FakeTransport("here"))  # type: ignore[arg-type]


@actor(initial=0)
async def cron_target(ctx: Context[int, Add]) -> None:
    """A key node schedules tell."""
    async for _ in ctx.inbox:
        pass


def test_a_cluster_mode_cron_without_provided_claims_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no TickClaims provided (casty.cluster.claims not imported), a cluster-mode cron is refused when registered, naming the module."""
    assert scheduler_module._provided == [CLAIMS]  # casty.cluster.claims provided its claims when imported
    monkeypatch.setattr(scheduler_module, "_provided", [])

    async def main(clock: LoopClock) -> str:
        async with ActorSystem(clock=clock) as system:
            system.scheduler.cluster_mode = True
            with pytest.raises(ConfigurationError) as raised:
                await system.schedule_cron(Add(1), system.ref(cron_target, "c"), "0 * * * * ?", reference="r")
            return str(raised.value)

    assert run_virtual(main) == "cluster mode claims each cron tick, and no claims were provided: import casty.cluster.claims"
