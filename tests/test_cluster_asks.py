"""Cross-node asks answer like local ones, and a type's ``replicas=`` decides its placement.

Replies and failures of an ask that crossed nodes: the asker gets what a local ask gets (the
same ``ActorFailed`` wording, ``Fenced``/``Unavailable`` as such, a dataclass reply as that
dataclass), and a reply that does not fit the ask's ``Askable[R]`` fails that ask alone with a
``SchemaError``. Placement: the owner is chosen among the type's own replicas (1, 3 or 5).
Every node is a real ``ActorSystem`` on a simulated network, on virtual time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
import pytest

from casty import ActorSystem, Askable, Context, actor
from casty._core.activation import PendingAsk
from casty.cluster.config import Cluster
from casty.cluster.routing import CLUSTER_WIRE, MAX_TEXT, ROUTING_CHANNEL, Deliver, Failed
from casty.errors import ActorFailed, Fenced, RemoteError, SchemaError, Unavailable, UnknownActor
from casty._core.ref import EntityRef, reply_type
from sim.network import Latency, LinkModel
from sim.world import World

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
CONVERGED = 2.0
DECLARED_DEAD = 0.2 + 1 + 1 + 0.5  # silence, suspect_after, dead_after, slack

T = TypeVar("T")


@dataclass(frozen=True)
class Item:
    key: str
    count: int
    tags: tuple[str, ...]
    owner: EntityRef[Any]


class Point(msgspec.Struct, frozen=True):
    x: int
    y: float


@dataclass(frozen=True)
class GetItem(Askable[Item]):
    pass


@dataclass(frozen=True)
class GetPoint(Askable[Point]):
    pass


@dataclass(frozen=True)
class Query(Askable[list[T]], Generic[T]):
    """A generic ask: the reply type is fixed by the subclass."""


@dataclass(frozen=True)
class GetItems(Query[Item]):
    pass


@dataclass(frozen=True)
class Explode(Askable[int]):
    what: str


@dataclass(frozen=True)
class Liar(Askable[int]):
    """Asks for an int; the body answers a str."""


@dataclass(frozen=True)
class Unsendable(Askable[int]):
    """The body answers an object the codec cannot encode."""


@dataclass(frozen=True)
class Count(Askable[int]):
    pass


Msg = GetItem | GetPoint | GetItems | Explode | Liar | Unsendable | Count


@actor(initial=0)
async def answers(ctx: Context[int, Msg]) -> None:
    """Answers each ask with a typed value, or fails it the way its message asks for."""
    async for msg in ctx.inbox:
        if isinstance(msg, Count):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        elif isinstance(msg, GetItem):
            msg.reply_to.tell(Item(ctx.key, ctx.state.value, ("a", "b"), EntityRef(None, answers.name, ctx.key)))
        elif isinstance(msg, GetPoint):
            msg.reply_to.tell(Point(3, 0.5))
        elif isinstance(msg, GetItems):
            msg.reply_to.tell([Item(ctx.key, n, (), EntityRef(None, answers.name, "x")) for n in range(2)])
        elif isinstance(msg, Liar):
            msg.reply_to.tell("not an int")
        elif isinstance(msg, Unsendable):
            msg.reply_to.tell(object())
        elif msg.what == "value":
            raise ValueError("boom " + ctx.key)
        elif msg.what == "fenced":
            raise Fenced(f"fenced {ctx.key}")
        elif msg.what == "unavailable":
            raise Unavailable(f"no quorum for {ctx.key}")
        elif msg.what == "huge":
            raise RuntimeError("x" * (3 * MAX_TEXT))


@dataclass(frozen=True)
class Forward(Askable[int]):
    what: str


@actor
async def forwarder(ctx: Context[None, Forward]) -> None:
    """Passes the ask on to ``answers[same key]`` with the asker's reply_to: that key answers (or fails) it."""
    async for msg in ctx.inbox:
        ctx.system.ref(answers, ctx.key + "-target").tell(Explode(msg.what, reply_to=msg.reply_to))


@pytest.fixture
def world() -> Iterator[World]:
    w = World(11, network=LinkModel(latency=Latency(0.002, 0.0)))
    for name in NODES:
        w.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)
    w.run(until=CONVERGED)
    yield w
    w.close()


def ask(world: World, node: str, target: Any, key: str, message: Askable[Any], *, run_for: float = 0.5) -> Any:
    """Ask ``target[key]`` from ``node``; run the world; the result, or the exception raised."""

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(target, key).ask(message)
        except Exception as exc:  # returned, to be asserted on
            return exc

    task = world.spawn(node, client)
    world.run(until=world.now + run_for)
    assert task.done(), f"ask {message!r} from {node} to {key!r} still pending"
    return task.result()


def owner(world: World, target: Any, key: str, node: str = "n1") -> str:
    found = world.system(node).placement(target, key).owner
    assert found is not None
    return found


def remote_key(world: World, prefix: str, target: Any = None) -> tuple[str, str, str]:
    """A key, its owner and a node that does not own it."""
    target = target if target is not None else answers
    key = f"{prefix}0"
    home = owner(world, target, key)
    return key, home, next(n for n in NODES if n != home)


# ================================================================ remote failures ====


def test_a_body_that_raises_fails_the_remote_ask_with_the_local_actor_failed(world: World) -> None:
    """A cross-node ask whose body raises gets ActorFailed (not TimeoutError), worded exactly as the same ask asked on the owner."""
    key, home, away = remote_key(world, "f")
    remote = ask(world, away, answers, key, Explode("value"))
    local = ask(world, home, answers, key, Explode("value"))
    assert isinstance(local, ActorFailed) and isinstance(remote, ActorFailed), (local, remote)
    assert str(remote) == str(local) == f"{answers.name}[{key!r}] failed on Explode: ValueError('boom {key}')"
    assert (remote.actor, remote.key) == (answers.name, key)
    assert isinstance(remote.error, RemoteError) and isinstance(local.error, ValueError)
    assert (remote.error.type_name, remote.error.text) == ("ValueError", f"boom {key}")
    assert isinstance(remote.message, Explode) and remote.message.what == "value"
    assert ask(world, away, answers, key, Count()) == 1  # the key restarted after backoff and serves on


@pytest.mark.parametrize("what, cls", [("fenced", Fenced), ("unavailable", Unavailable)])
def test_fenced_and_unavailable_cross_as_their_own_classes(world: World, what: str, cls: type[Exception]) -> None:
    """Fenced and Unavailable raised on the owner reach a remote asker as those classes with their text, as they do locally."""
    key, home, away = remote_key(world, what)
    remote = ask(world, away, answers, key, Explode(what))
    local = ask(world, home, answers, key, Explode(what))
    assert type(remote) is cls and type(local) is cls, (remote, local)
    assert str(remote) == str(local)


def test_a_huge_error_text_is_cut_not_lost(world: World) -> None:
    """An exception with a 12 KiB message still fails the remote ask with ActorFailed, its texts cut to MAX_TEXT characters."""
    key, _home, away = remote_key(world, "h")
    remote = ask(world, away, answers, key, Explode("huge"))
    assert isinstance(remote, ActorFailed) and isinstance(remote.error, RemoteError), remote
    assert remote.error.type_name == "RuntimeError"
    assert len(remote.error.text) == MAX_TEXT and remote.error.text.endswith("(truncated)")


def test_a_forwarded_ask_fails_at_the_asker_naming_the_key_that_raised(world: World) -> None:
    """An ask forwarded (reply_to passed on) to a key on another node whose body raises reaches the first asker as ActorFailed naming that key."""
    key = next(
        k for k in (f"w{i}" for i in range(200))
        if len({owner(world, forwarder, k), owner(world, answers, k + "-target"), "n1"}) == 3
    )
    result = ask(world, "n1", forwarder, key, Forward("value"), run_for=1.0)
    assert isinstance(result, ActorFailed), result
    assert (result.actor, result.key) == (answers.name, key + "-target")
    assert str(result) == f"{answers.name}[{key + '-target'!r}] failed on Explode: ValueError('boom {key}-target')"
    assert isinstance(result.message, Forward)  # what the asker sent


def test_a_forwarded_ask_fails_the_same_way_on_one_node() -> None:
    """On one node too, an ask forwarded (reply_to passed on) to a key whose body raises fails with that ActorFailed, not TimeoutError."""
    from tests.conftest import LoopClock, run_virtual

    async def main(clock: LoopClock) -> Any:
        async with ActorSystem(clock=clock, ask_timeout=2.0) as system:
            try:
                return await system.ref(forwarder, "w").ask(Forward("value"))
            except Exception as exc:
                return exc

    result = run_virtual(main)
    assert isinstance(result, ActorFailed), result
    assert str(result) == f"{answers.name}['w-target'] failed on Explode: ValueError('boom w-target')"
    assert isinstance(result.message, Forward) and isinstance(result.error, ValueError)


def test_a_reply_that_cannot_be_encoded_fails_the_body_and_the_ask_with_actor_failed(world: World) -> None:
    """A body replying an unencodable value raises SchemaError in the body: the ask fails with ActorFailed at once, remote as local."""
    key, home, away = remote_key(world, "u")
    start = world.now
    remote = ask(world, away, answers, key, Unsendable(), run_for=0.2)
    assert world.now - start < 2.0
    local = ask(world, home, answers, key, Unsendable(), run_for=0.5)
    assert isinstance(remote, ActorFailed) and isinstance(local, ActorFailed), (remote, local)
    assert isinstance(remote.error, RemoteError) and remote.error.type_name == "SchemaError"
    assert isinstance(local.error, SchemaError)
    assert remote.error.text.startswith("cannot encode the reply object: ") and str(local.error).startswith("cannot encode the reply object: ")


def test_a_deliver_for_an_unknown_type_fails_the_ask_with_unknown_actor(world: World) -> None:
    """A Deliver naming an actor type the receiving node cannot look up is refused: the asker's ask fails with UnknownActor, the node serves on."""
    got: dict[str, Any] = {}

    async def client(system: ActorSystem) -> None:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        system._pending[990001] = PendingAsk(future, Count())
        deliver = Deliver(990001, "no_such_module:thing", "k", b"", "n1", 990001)
        assert system.transport is not None
        system.transport.send("n2", CLUSTER_WIRE.encode(ROUTING_CHANNEL, deliver))
        try:
            got["result"] = await asyncio.wait_for(future, 1.0)
        except Exception as exc:
            got["result"] = exc

    world.spawn("n1", client)
    world.run(until=world.now + 0.5)
    result = got["result"]
    assert isinstance(result, UnknownActor) and "no_such_module:thing" in str(result) and "n2" in str(result), result
    key = next(k for k in (f"k{i}" for i in range(100)) if owner(world, answers, k) == "n2")
    assert ask(world, "n1", answers, key, Count()) == 1


def test_failed_frames_refuse_an_unknown_kind() -> None:
    """A Failed frame's kind is a closed set: the wire refuses a frame with another kind (WireError), so the asker never guesses."""
    from casty.protocol.wire import WireError

    data = CLUSTER_WIRE.encode(ROUTING_CHANNEL, Failed(1, "failed", "x"))
    assert CLUSTER_WIRE.decode(data).frame == Failed(1, "failed", "x")
    forged = data.replace(b"failed", b"exotic")
    with pytest.raises(WireError) as caught:
        CLUSTER_WIRE.decode(forged)
    assert caught.value.reason == "body"


# ================================================================ typed replies ======


def test_a_dataclass_reply_crossing_nodes_equals_the_local_one(world: World) -> None:
    """A dataclass reply (tuple and ref fields) asked from another node equals, and is of the same class as, the reply asked on the owner."""
    key, home, away = remote_key(world, "d")
    ask(world, away, answers, key, Count())
    local = ask(world, home, answers, key, GetItem())
    remote = ask(world, away, answers, key, GetItem())
    assert type(remote) is Item and remote == local == Item(key, 1, ("a", "b"), EntityRef(None, answers.name, key))
    assert type(remote.tags) is tuple and remote.owner._system is world.system(away)  # the ref is bound to the asker


def test_struct_and_generic_replies_cross_typed(world: World) -> None:
    """A msgspec Struct reply and a list[Item] reply (R fixed by a generic subclass of Askable) arrive typed, equal to the local replies."""
    key, home, away = remote_key(world, "s")
    for message in (GetPoint(), GetItems()):
        local = ask(world, home, answers, key, message)
        remote = ask(world, away, answers, key, message)
        assert remote == local and type(remote) is type(local), (remote, local)
    assert type(ask(world, away, answers, key, GetPoint())) is Point
    items = ask(world, away, answers, key, GetItems())
    assert [type(i) for i in items] == [Item, Item]


def test_a_wrong_typed_reply_fails_the_body_with_actor_failed_remote_as_local_and_the_node_serves_on(world: World) -> None:
    """A str reply to an Askable[int] raises SchemaError in the body: asked across nodes or on the owner, ActorFailed worded the same."""
    key, home, away = remote_key(world, "l")
    remote = ask(world, away, answers, key, Liar())
    local = ask(world, home, answers, key, Liar())
    assert isinstance(remote, ActorFailed) and isinstance(local, ActorFailed), (remote, local)
    assert str(remote) == str(local) == f"{answers.name}[{key!r}] failed on Liar: SchemaError('the reply must be int: expected int, got str')"
    assert ask(world, away, answers, key, Count()) == 1
    assert world.system(away).running


def test_reply_type_reads_r_through_subclasses_and_falls_back_to_any() -> None:
    """reply_type finds R through generic and plain subclasses and resolves strings; bare Askable, open T or an unknown name give Any."""

    @dataclass(frozen=True)
    class Plain(GetItem):
        pass

    @dataclass(frozen=True)
    class Bare(Askable):  # type: ignore[type-arg]
        pass

    @dataclass(frozen=True)
    class Named(Askable["Item | None"]):
        pass

    @dataclass(frozen=True)
    class Nowhere(Askable["NoSuchName"]):  # type: ignore[name-defined]  # noqa: F821
        pass

    assert reply_type(GetItem) is Item and reply_type(Plain) is Item
    assert reply_type(GetItems) == list[Item]
    assert reply_type(Named) == Item | None
    assert reply_type(Count) is int
    for unknown in (Bare, Query, Nowhere):
        assert reply_type(unknown) is Any


# ================================================================ placement by type ==

FIVE = ("n1", "n2", "n3", "n4", "n5")


@actor(initial=0, replicas=1)
async def single(ctx: Context[int, Count]) -> None:
    """A counter with one replica: its only node is its only possible owner."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


@actor(initial=0, replicas=5)
async def everywhere(ctx: Context[int, Count]) -> None:
    """A counter replicated on five nodes (write majority: three)."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


@pytest.fixture
def five() -> Iterator[World]:
    w = World(5, network=LinkModel(latency=Latency(0.002, 0.0)))
    for name in FIVE:
        w.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)
    w.run(until=CONVERGED + 1.0)
    yield w
    w.close()


def test_placement_answers_the_types_replicas(five: World) -> None:
    """On 5 nodes, placement lists 1 replica for a replicas=1 type, 5 for replicas=5, 3 by default; the owner is the first; all nodes agree."""
    for target, count in ((single, 1), (everywhere, 5), (answers, 3)):
        for key in (f"p{i}" for i in range(20)):
            views = {five.system(n).placement(target, key) for n in FIVE}
            assert len(views) == 1, (target, key, views)
            placed = views.pop()
            assert len(placed.replicas) == count and len(set(placed.replicas)) == count
            assert placed.owner == placed.replicas[0]
    owners = {five.system("n1").placement(single, f"p{i}").owner for i in range(40)}
    assert owners == set(FIVE)  # one replica each, still spread over every node


def test_a_replicas_1_key_has_no_other_owner_when_its_node_is_down(five: World) -> None:
    """A replicas=1 key runs on its one node; with that node dead (quorum kept), nobody owns it and asks fail Unavailable, while a replicas=5 key moves on."""
    key = next(k for k in (f"o{i}" for i in range(100)) if owner(five, single, k) not in ("n1", "n2"))
    home = owner(five, single, key)
    assert ask(five, "n1", single, key, Count()) == 1
    assert [r.node for r in five.trace.of("activation.started", actor=single.name, key=key)] == [home]
    wide = next(k for k in (f"e{i}" for i in range(100)) if owner(five, everywhere, k) == home)
    assert ask(five, "n1", everywhere, wide, Count()) == 1
    five.crash(home)
    five.run(until=five.now + DECLARED_DEAD)
    assert five.system("n1").placement(single, key).owner is None
    assert five.system("n1").placement(single, key).replicas == (home,)
    assert isinstance(ask(five, "n1", single, key, Count(), run_for=1.5), Unavailable)
    moved = owner(five, everywhere, wide)
    assert moved == five.system("n1").placement(everywhere, wide).replicas[1] != home
    assert ask(five, "n1", everywhere, wide, Count()) == 2  # the confirmed count survived on the other replicas


def test_a_replicas_5_key_is_served_with_two_of_its_replicas_dead(five: World) -> None:
    """With the first two of a replicas=5 key's nodes dead, its owner is the third replica and its writes still reach a quorum of 3."""
    key = next(k for k in (f"q{i}" for i in range(100)) if "n1" not in five.system("n1").placement(everywhere, k).replicas[:2])
    replicas = five.system("n1").placement(everywhere, key).replicas
    assert ask(five, "n1", everywhere, key, Count()) == 1
    five.crash(replicas[0])
    five.crash(replicas[1])
    five.run(until=five.now + DECLARED_DEAD)
    assert owner(five, everywhere, key) == replicas[2]
    assert ask(five, "n1", everywhere, key, Count(), run_for=1.0) == 2


def test_placement_of_an_unknown_type_name_is_unknown_actor(five: World) -> None:
    """The cluster's placement and owner_of look a type up by name: a name no module defines raises UnknownActor."""
    cluster = five.system("n1").cluster_node
    assert cluster is not None
    with pytest.raises(UnknownActor, match="no_such_module"):
        cluster.placement("no_such_module:thing", "k")
    with pytest.raises(UnknownActor, match="no_such_module"):
        cluster.owner_of("no_such_module:thing", "k")



# ================================================================ one set of checks (issue 10 #10, #11)


@dataclass(frozen=True)
class Put:
    """Told: set the state to ``v``."""

    v: int


@dataclass(frozen=True)
class SetTo(Askable[str]):
    """Asked: ``ctx.state.set`` of ``value`` (or of a lone-surrogate str if ``surrogate``); "ok" once confirmed."""

    value: Any = None
    surrogate: bool = False


@dataclass(frozen=True)
class Peek(Askable[Any]):
    pass


@actor(initial=0)
async def holder(ctx: Context[int, Put | SetTo | Peek]) -> None:
    """An int state written by Put and SetTo; Peek answers it."""
    async for msg in ctx.inbox:
        if isinstance(msg, Put):
            await ctx.state.set(msg.v)
        elif isinstance(msg, SetTo):
            await ctx.state.set("a\ud800" if msg.surrogate else msg.value)
            msg.reply_to.tell("ok")
        else:
            msg.reply_to.tell(ctx.state.value)


def test_a_wrongly_typed_field_is_refused_at_the_call_on_the_owner_as_on_another_node(world: World) -> None:
    """tell(Put("seven")) raises the same SchemaError on the key's owner and on a node that would route it; nothing arrives."""
    key, home, away = remote_key(world, "p", holder)
    texts: dict[str, str] = {}

    async def client(system: ActorSystem) -> None:
        try:
            system.ref(holder, key).tell(Put("seven"))  # type: ignore[arg-type]
            texts[system.node] = "accepted"
        except SchemaError as exc:
            texts[system.node] = str(exc)

    for node in (home, away):
        world.spawn(node, client)
    world.run(until=world.now + 0.3)
    assert texts == {node: f"Put for {holder.name}: v: expected int, got str" for node in (home, away)}
    assert ask(world, away, holder, key, Peek()) == 0


def test_a_wrongly_typed_state_is_never_confirmed_so_the_key_survives_a_change_of_owner(world: World) -> None:
    """state.set("x") on an int key fails the body (ActorFailed, remote as local); after its owner stops, the next owner serves the last good state."""
    key, home, away = remote_key(world, "o", holder)
    assert ask(world, away, holder, key, SetTo(3)) == "ok"
    remote = ask(world, away, holder, key, SetTo("x"))
    local = ask(world, home, holder, key, SetTo("x"))
    assert isinstance(remote, ActorFailed) and isinstance(local, ActorFailed), (remote, local)
    expected = f"{holder.name}[{key!r}] failed on SetTo: SchemaError('state of {holder.name} must be int: expected int, got str')"
    assert str(remote) == str(local) == expected
    world.stop(home)
    world.run(until=world.now + 0.5)
    assert owner(world, holder, key, away) != home
    assert ask(world, away, holder, key, Peek()) == 3


def test_one_bad_key_never_fails_another_keys_write_in_the_same_turn(world: World) -> None:
    """In one turn: a ref to a key with a lone surrogate (SchemaError at ref), a state with one (SchemaError in its body), and a good write, which is confirmed; World.run never raises."""
    good, home, away = remote_key(world, "g", holder)
    other = next(k for k in (f"b{i}" for i in range(100)) if owner(world, holder, k) == home)
    got: dict[str, Any] = {}

    async def client(system: ActorSystem) -> None:
        try:
            system.ref(holder, "bad\udc80")
        except Exception as exc:
            got["ref"] = exc
        writes = [system.ref(holder, good).ask(SetTo(41)), system.ref(holder, other).ask(SetTo(surrogate=True))]
        got["writes"] = await asyncio.gather(*writes, return_exceptions=True)

    world.spawn(away, client)
    world.run(until=world.now + 0.5)
    assert type(got["ref"]) is SchemaError and "'bad\\udc80'" in str(got["ref"]), got["ref"]
    confirmed, refused = got["writes"]
    assert confirmed == "ok"
    assert isinstance(refused, ActorFailed) and isinstance(refused.error, RemoteError), refused
    assert refused.error.type_name == "SchemaError" and "surrogates not allowed" in refused.error.text
    assert ask(world, home, holder, good, Peek()) == 41
    assert ask(world, home, holder, other, Peek()) == 0


def test_a_replication_frame_that_cannot_be_encoded_is_dropped_alone(world: World) -> None:
    """A frame the wire refuses (a key with a lone surrogate, queued past every check) is dropped at the flush; the turn's other writes are confirmed."""
    from casty.protocol.replication import Epoch, Prepare

    key = next(k for k in (f"e{i}" for i in range(100)) if owner(world, holder, k) == "n1")
    replication = world.system("n1").cluster_node
    assert replication is not None
    got: dict[str, Any] = {}

    async def client(system: ActorSystem) -> None:
        writing = asyncio.ensure_future(system.ref(holder, key).ask(SetTo(9)))
        for _ in range(3):  # the write's frames and the forged one leave in the same flush
            await asyncio.sleep(0)
            for peer in ("n2", "n3"):
                replication.replication.send(peer, Prepare((holder.name, "bad\udc80"), Epoch(1, "n1")))
        got["write"] = await writing

    world.spawn("n1", client)
    world.run(until=world.now + 0.5)
    assert got["write"] == "ok"
    assert ask(world, "n2", holder, key, Peek()) == 9


# ================================================================ one life's replies (issue 10, swarm seed 1411)


@dataclass(frozen=True)
class Slow(Askable[str]):
    """Answer ``tag`` after ``seconds``."""

    seconds: float
    tag: str


@actor(initial=0)
async def slow(ctx: Context[int, Slow]) -> None:
    """Sleeps, then answers the ask's tag (several asks of one key wait side by side, one task each)."""
    async for msg in ctx.inbox:
        task = asyncio.get_running_loop().create_task(_answer_later(msg))
        _LATER.add(task)
        task.add_done_callback(_LATER.discard)


_LATER: set[asyncio.Task[None]] = set()


async def _answer_later(msg: Slow) -> None:
    await asyncio.sleep(msg.seconds)
    msg.reply_to.tell(msg.tag)


def test_a_reply_to_an_ask_of_a_previous_life_never_answers_an_ask_of_the_next(world: World) -> None:
    """A node restarted while its asks were in flight gets their late replies; none of them answers the new life's asks.

    Swarm seed 1411: a Get of counter f0 on a restarted n3 returned 22, the count of another key
    (c1) that n3's previous life had incremented: request ids restarted at 1 with each life,
    and the late Reply of the old ask matched the new ask of the same number.
    """
    away = "n3"
    old_keys = [k for k in (f"old{i}" for i in range(40)) if owner(world, slow, k) != away][:4]
    new_key = next(k for k in (f"new{i}" for i in range(40)) if owner(world, slow, k) != away)
    asked: list[Any] = []

    async def old_life(system: ActorSystem) -> None:
        for key in old_keys:  # the first asks of this life: request ids 1..4
            system.loop.create_task(system.ref(slow, key).ask(Slow(3.0, f"old:{key}")))

    world.spawn(away, old_life)
    world.run(until=world.now + 0.2)
    world.crash(away)
    world.restart(away)
    world.run(until=world.now + 1.5)  # the new life has learned the view; the old asks' bodies still sleep

    async def new_life(system: ActorSystem) -> None:
        try:
            asked.append(await system.ref(slow, new_key).ask(Slow(1.8, "new")))
        except Exception as exc:  # recorded, to be asserted on
            asked.append(exc)

    world.spawn(away, new_life)  # this life's first ask: request id 1 as well, before the fix
    world.run(until=world.now + 2.5)  # the old replies arrive at 3.2 s, the new one at 3.5 s
    assert asked == ["new"]
