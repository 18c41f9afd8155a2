"""The forged-frame faults: a stranger that knows the cluster's wire format sends a node one frame.

Why apart from the other kinds: these build real runtime frames (``casty.cluster.routing``'s wire, the
membership heartbeat), imported only when the fault is carried out, so ``import sim.faults`` does not load
the cluster driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import msgspec

from .values import Fault, _check, _nodes

if TYPE_CHECKING:
    from ..world import World


class ForgedHeartbeat(Fault, frozen=True, tag="forged_heartbeat"):
    """A stranger ``sender`` that knows the cluster sends ``node`` one membership heartbeat whose digest names ``fakes``."""

    node: str
    sender: str = "mallory"
    fakes: tuple[str, ...] = ("ghost1", "ghost2")
    kind: ClassVar[str] = "forged_heartbeat"

    def __post_init__(self) -> None:
        super().__post_init__()
        _nodes("forged_heartbeat.fakes", self.fakes)
        _check(bool(self.sender), "forged_heartbeat.sender must name the stranger")

    def args(self) -> list[str]:
        return [f"{self.sender}->{self.node}", *self.fakes]

    def start(self, world: World) -> None:
        from casty.cluster.driver import MEMBERSHIP_CHANNEL
        from casty.protocol.membership import Heartbeat
        from casty.cluster.routing import CLUSTER_WIRE

        digest = tuple((name, 1, "alive", 1) for name in (self.sender, *self.fakes))
        frame = CLUSTER_WIRE.encode(MEMBERSHIP_CHANNEL, Heartbeat(node=self.sender, incarnation=1, seq=1, digest=digest))
        world.inject(self.sender, self.node, frame)


class ForgedRef(Fault, frozen=True, tag="forged_ref"):
    """A stranger routes ``message`` (a message class's ``module:qualname``) to ``actor[key]`` on ``node``; its
    ``reply_to`` is a ref naming ``module``, a module no node has (telling it must never import anything)."""

    node: str
    actor: str
    key: str
    message: str
    module: str = "forged_nowhere"
    sender: str = "mallory"
    kind: ClassVar[str] = "forged_ref"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("actor", "key", "message", "module", "sender"):
            _check(bool(getattr(self, name)), f"forged_ref.{name} must not be empty")

    def args(self) -> list[str]:
        return [f"{self.sender}->{self.node}", f"{self.actor.rsplit(':', 1)[-1]}[{self.key}]", f"ref={self.module}"]

    def start(self, world: World) -> None:
        from casty.cluster.routing import CLUSTER_WIRE, ROUTING_CHANNEL, Deliver

        ref = ["@e", f"{self.module}:forged", "k"]
        body = msgspec.msgpack.encode((self.message, {"reply_to": ref}))
        frame = CLUSTER_WIRE.encode(ROUTING_CHANNEL, Deliver(request=1, actor=self.actor, key=self.key, message=body, reply_node=self.sender, reply_request=1))
        world.inject(self.sender, self.node, frame)
