"""The framing core sans I/O (``casty.protocol.framing``): an ``Acceptor`` and a ``Dialer`` driven with plain bytes.

No loop and no socket: each test hands bytes to a core and checks, exactly, what it says to
write, which frames it gives, the state it is in and the error it raises. The nonces are
fixed bytes, so every handshake frame is known in advance.
"""

from __future__ import annotations

import ast
import inspect

import pytest

from casty.protocol import framing
from casty.protocol.framing import (
    HANDSHAKE_MAX,
    HEADER,
    MAGIC,
    NONCE_SIZE,
    Acceptor,
    BufferBudget,
    Challenge,
    Dialer,
    FrameError,
    HandshakeError,
    Hello,
    OverBudget,
    Proof,
    HandshakeRefused as Refused,
    Step,
    Welcome,
    encode_frame,
    encode_handshake,
    proof,
)

SECRET = b"s3cret"
N_DIALER = bytes(range(NONCE_SIZE))
N_ACCEPTOR = bytes(range(100, 100 + NONCE_SIZE))
IDS = {"cluster": "c1", "dialer": "a", "acceptor": "b"}


def hello(node: str = "a", *, cluster: str = "c1", magic: str = MAGIC, nonce: bytes = b"") -> bytes:
    return encode_handshake(Hello(magic, cluster, node, nonce))


def acceptor(*, secret: bytes | None = None, max_frame: int = 1000, budget: BufferBudget | None = None) -> Acceptor:
    return Acceptor("b", "c1", secret=secret, nonce=N_ACCEPTOR if secret else b"", max_frame=max_frame, budget=budget)


def dialer(*, secret: bytes | None = None, peer: str = "b") -> Dialer:
    return Dialer("a", "c1", peer, secret=secret, nonce=N_DIALER if secret else b"")


def challenge(secret: bytes = SECRET, *, node: str = "b") -> bytes:
    mine = proof(secret, "acceptor", **IDS, dialer_nonce=N_DIALER, acceptor_nonce=N_ACCEPTOR)
    return encode_handshake(Challenge(node, N_ACCEPTOR, mine))


def dialer_proof(secret: bytes = SECRET) -> bytes:
    return encode_handshake(Proof(proof(secret, "dialer", **IDS, dialer_nonce=N_DIALER, acceptor_nonce=N_ACCEPTOR)))


# --- the acceptor, no secret ---------------------------------------------------------------


def test_a_hello_split_anywhere_is_welcomed_once_whole() -> None:
    """A hello fed in two pieces waits after the first and is welcomed (Welcome frame written) after the second."""
    core = acceptor()
    data = hello()
    assert core.receive(data[:3]) == Step()
    assert (core.state, core.peer, core.pending) == ("hello", "", 3)
    assert core.receive(data[3:]) == Step(encode_handshake(Welcome("b")), done=True)
    assert (core.state, core.peer, core.open, core.pending) == ("open", "a", True, 0)


def test_frames_after_the_hello_in_its_chunk_come_with_the_welcome() -> None:
    """Two frames in the hello's chunk are handed back in the step, in order, and the partial third stays pending."""
    core = acceptor()
    step = core.receive(hello() + encode_frame(b"x") + encode_frame(b"yy") + HEADER.pack(5) + b"zz")
    assert step == Step(encode_handshake(Welcome("b")), done=True, frames=(b"x", b"yy"))
    assert core.pending == 6
    assert core.feed(b"zzz") == [b"zzzzz"]


def test_feed_rebuilds_frames_from_any_split() -> None:
    """Once open, a frame split byte by byte comes out once, whole, at its last byte."""
    core = acceptor()
    core.receive(hello())
    data = encode_frame(b"payload")
    out = [core.feed(data[i : i + 1]) for i in range(len(data))]
    assert out == [[]] * (len(data) - 1) + [[b"payload"]]


def test_an_oversized_handshake_frame_fails_from_its_header() -> None:
    """A first frame announcing HANDSHAKE_MAX + 1 bytes fails at its 4-byte header, before any payload."""
    core = acceptor()
    with pytest.raises(FrameError) as caught:
        core.receive(HEADER.pack(HANDSHAKE_MAX + 1))
    assert caught.value.reason == "handshake frame of 1025 bytes exceeds the 1024-byte limit"
    assert (core.state, core.pending) == ("failed", 0)


def test_an_oversized_frame_after_the_welcome_fails_with_the_frames_before_it() -> None:
    """Over max_frame (1000 here) a frame fails the stream; the whole frame before it travels in the error."""
    core = acceptor()
    core.receive(hello())
    with pytest.raises(FrameError) as caught:
        core.feed(encode_frame(b"ok") + HEADER.pack(1001))
    assert (caught.value.reason, caught.value.frames) == ("frame of 1001 bytes exceeds the 1000-byte limit", [b"ok"])
    assert core.state == "failed"
    with pytest.raises(RuntimeError, match="no frame before the handshake ends"):
        core.feed(b"")


@pytest.mark.parametrize(
    "data, why",
    [
        (hello(magic="casty/0"), "unsupported protocol 'casty/0' (this node speaks 'casty/1')"),
        (hello(cluster="other"), "cluster 'other' is not this node's cluster 'c1'"),
        (hello(""), "empty node id"),
        (hello("b"), "node id 'b' is this node's own"),
        (hello(nonce=N_DIALER), "the dialer has a cluster secret and this node has none"),
    ],
    ids=["bad-magic", "other-cluster", "empty-id", "own-id", "dialer-has-secret"],
)
def test_a_refused_hello_gets_a_refused_frame_and_ends_the_handshake(data: bytes, why: str) -> None:
    """Each refusal writes Refused(reason) and ends in state refused, with the hello's node id kept."""
    core = acceptor()
    assert core.receive(data) == Step(encode_handshake(Refused(why)), done=True, refused=why)
    assert core.state == "refused"
    assert core.peer == ("" if why == "empty node id" else "b" if why.endswith("own") else "a")  # the id the hello gave
    with pytest.raises(RuntimeError, match="the handshake is over"):
        core.receive(b"")


@pytest.mark.parametrize("field", ["magic", "cluster"])
def test_a_refusal_quoting_a_strangers_long_name_stays_under_the_handshake_limit(field: str) -> None:
    """A Hello whose magic or cluster is 500 backslashes is refused with a Refused frame under HANDSHAKE_MAX (the name cut, its size said), not a frame error."""
    core = acceptor()
    long = "\\" * 500
    step = core.receive(hello(**{field: long}))
    assert step.done and step.refused is not None and core.state == "refused"
    assert "(500 characters)" in step.refused
    assert len(step.write) <= HANDSHAKE_MAX


def test_garbage_where_the_hello_should_be_is_a_frame_error() -> None:
    """A first frame that is not a msgpack Hello fails as a malformed handshake, no refusal written."""
    core = acceptor()
    with pytest.raises(FrameError, match="^malformed handshake: "):
        core.receive(encode_frame(b"\x93\x01\x02\x03"))
    assert (core.state, core.peer) == ("failed", "")


def test_no_frame_reaches_the_driver_before_the_welcome() -> None:
    """feed() refuses to run while the handshake is going on: the frames of an unproven peer are never decoded."""
    core = acceptor()
    with pytest.raises(RuntimeError, match="no frame before the handshake ends \\(state 'hello'\\)"):
        core.feed(encode_frame(b"x"))


# --- the acceptor with a secret ------------------------------------------------------------


def test_with_a_secret_the_acceptor_challenges_then_welcomes_the_right_proof() -> None:
    """Hello -> Challenge(b, its nonce, its proof); the dialer's right Proof -> Welcome; then frames flow."""
    core = acceptor(secret=SECRET)
    assert core.receive(hello(nonce=N_DIALER)) == Step(challenge())
    assert core.state == "proof"
    assert core.receive(dialer_proof()) == Step(encode_handshake(Welcome("b")), done=True)
    assert core.feed(encode_frame(b"x")) == [b"x"]


def test_a_wrong_proof_is_refused() -> None:
    """A Proof made with another secret is answered Refused('wrong proof of the cluster secret')."""
    core = acceptor(secret=SECRET)
    core.receive(hello(nonce=N_DIALER))
    why = "wrong proof of the cluster secret"
    assert core.receive(dialer_proof(b"guess")) == Step(encode_handshake(Refused(why)), done=True, refused=why)


def test_a_reflected_acceptor_proof_is_refused() -> None:
    """The acceptor's own proof sent back as the dialer's does not pass: the role is in the MAC."""
    core = acceptor(secret=SECRET)
    core.receive(hello(nonce=N_DIALER))
    mine = proof(SECRET, "acceptor", **IDS, dialer_nonce=N_DIALER, acceptor_nonce=N_ACCEPTOR)
    assert core.receive(encode_handshake(Proof(mine))).refused == "wrong proof of the cluster secret"


@pytest.mark.parametrize(
    "data, why",
    [
        (hello(), "this cluster needs its secret: the dialer has none"),
        (hello(nonce=b"short"), "a nonce of 5 bytes (expected 32)"),
    ],
    ids=["no-nonce", "short-nonce"],
)
def test_with_a_secret_a_hello_without_a_good_nonce_is_refused(data: bytes, why: str) -> None:
    """A hello without a nonce, or with one of the wrong size, is refused before any challenge."""
    assert acceptor(secret=SECRET).receive(data) == Step(encode_handshake(Refused(why)), done=True, refused=why)


def test_a_frame_slipped_in_before_the_challenge_fails_the_connection() -> None:
    """A data frame in the hello's chunk (before any challenge) is a frame error, never a frame handed on."""
    core = acceptor(secret=SECRET)
    with pytest.raises(FrameError) as caught:
        core.receive(hello(nonce=N_DIALER) + encode_frame(b"sneaky"))
    assert (caught.value.reason, caught.value.frames, core.state) == ("data after the hello, before the challenge", [], "failed")


def test_a_partial_frame_after_the_proof_fails_the_connection() -> None:
    """Even one byte after the proof, before the welcome, fails it."""
    core = acceptor(secret=SECRET)
    core.receive(hello(nonce=N_DIALER))
    with pytest.raises(FrameError, match="^data after the proof, before the welcome$"):
        core.receive(dialer_proof() + b"\x00")


def test_the_second_handshake_frame_has_the_handshake_limit() -> None:
    """With a secret the proof frame is held to HANDSHAKE_MAX too, not to max_frame."""
    core = acceptor(secret=SECRET, max_frame=1_000_000)
    core.receive(hello(nonce=N_DIALER))
    with pytest.raises(FrameError, match="^handshake frame of 1025 bytes exceeds the 1024-byte limit$"):
        core.receive(HEADER.pack(HANDSHAKE_MAX + 1))


def test_a_core_with_a_secret_needs_a_full_nonce() -> None:
    """An acceptor or a dialer with a secret and a nonce of the wrong size is a ValueError naming the size."""
    with pytest.raises(ValueError, match="needs a nonce of 32 bytes, got 1"):
        Acceptor("b", "c1", secret=SECRET, nonce=b"x")
    with pytest.raises(ValueError, match="needs a nonce of 32 bytes, got 0"):
        Dialer("a", "c1", "b", secret=SECRET)


# --- the dialer ----------------------------------------------------------------------------


def test_the_dialer_hello_names_it_and_carries_its_nonce_only_with_a_secret() -> None:
    """hello is Hello(MAGIC, cluster, node, nonce) as a frame; without a secret the nonce is empty."""
    assert dialer().hello == hello()
    assert dialer(secret=SECRET).hello == hello(nonce=N_DIALER)


def test_the_dialer_is_open_after_the_welcome_of_the_node_it_meant() -> None:
    """A Welcome from b, split in two, opens the dialer at its last byte, writing nothing."""
    core = dialer()
    data = encode_handshake(Welcome("b"))
    assert core.receive(data[:2]) == Step()
    assert core.receive(data[2:]) == Step(done=True)
    assert core.open


def test_with_a_secret_the_dialer_checks_the_challenge_and_answers_with_its_proof() -> None:
    """A right Challenge is answered with the dialer's Proof; the Welcome after it (same chunk) opens it."""
    core = dialer(secret=SECRET)
    assert core.receive(challenge()) == Step(dialer_proof())
    assert core.receive(encode_handshake(Welcome("b"))) == Step(done=True)
    core = dialer(secret=SECRET)
    assert core.receive(challenge() + encode_handshake(Welcome("b"))) == Step(dialer_proof(), done=True)


@pytest.mark.parametrize(
    "secret, data, why",
    [
        (None, encode_handshake(Refused("no")), "refused: no"),
        (None, encode_handshake(Welcome("c")), "reached node 'c' instead of 'b'"),
        (None, challenge(), "the acceptor asks for a cluster secret and this node has none"),
        (SECRET, encode_handshake(Welcome("b")), "the acceptor did not prove the cluster secret (it has none)"),
        (SECRET, challenge(b"other"), "the acceptor's proof of the cluster secret is wrong"),
        (SECRET, challenge(node="c"), "reached node 'c' instead of 'b'"),
        (SECRET, challenge() + challenge(), "a second challenge"),
        (None, encode_handshake(Welcome("b")) + b"\x00", "unexpected data after the welcome"),
    ],
    ids=["refused", "other-node", "unasked-challenge", "no-challenge", "wrong-proof", "challenge-other-node", "two-challenges", "data-after-welcome"],
)
def test_the_dialer_raises_why_it_was_not_welcomed(secret: bytes | None, data: bytes, why: str) -> None:
    """Each way a handshake can fail at the dialer is a HandshakeError with its exact reason, and the core stays failed."""
    core = dialer(secret=secret)
    with pytest.raises(HandshakeError) as caught:
        core.receive(data)
    assert (caught.value.reason, core.state) == (why, "failed")


def test_an_oversized_reply_fails_the_dialer_from_its_header() -> None:
    """A reply announcing more than HANDSHAKE_MAX bytes is a FrameError (not a HandshakeError) at once."""
    with pytest.raises(FrameError) as caught:
        dialer().receive(HEADER.pack(HANDSHAKE_MAX + 1))
    assert type(caught.value) is FrameError and caught.value.reason == "frame of 1025 bytes exceeds the 1024-byte limit"


def test_a_dialer_and_an_acceptor_with_the_same_secret_shake_hands_through_bytes() -> None:
    """Piping each core's writes into the other opens both, and the acceptor then decodes the dialer's frames."""
    d, a = dialer(secret=SECRET), acceptor(secret=SECRET)
    step = a.receive(d.hello)
    while not d.open:
        back = d.receive(step.write)
        if back.write:
            step = a.receive(back.write)
    assert (a.open, d.open, a.peer) == (True, True, "a")
    assert a.feed(encode_frame(b"one") + encode_frame(b"two")) == [b"one", b"two"]


def test_a_dialer_with_another_secret_is_refused_by_the_acceptor_or_refuses_it() -> None:
    """With secrets that differ the dialer finds the acceptor's proof wrong before sending its own."""
    d, a = Dialer("a", "c1", "b", secret=b"mine", nonce=N_DIALER), acceptor(secret=SECRET)
    step = a.receive(d.hello)
    with pytest.raises(HandshakeError, match="^the acceptor's proof of the cluster secret is wrong$"):
        d.receive(step.write)


# --- the buffered-byte budget --------------------------------------------------------------


def test_partial_frames_of_every_connection_count_in_one_budget() -> None:
    """Two connections' partial frames add up in the budget; a complete frame gives its bytes back; release gives all."""
    budget = BufferBudget(100)
    one, two = acceptor(budget=budget), acceptor(budget=budget)
    one.receive(hello() + HEADER.pack(50) + b"x" * 20)
    two.receive(hello() + HEADER.pack(50) + b"y" * 30)
    assert (budget.total, one.held, two.held) == (24 + 34, 24, 34)
    assert one.feed(b"x" * 30) == [b"x" * 50]
    assert (budget.total, one.held) == (34, 0)
    two.release()
    assert (budget.total, two.held) == (0, 0)


def test_the_chunk_that_takes_the_budget_over_fails_its_connection_with_its_whole_frames() -> None:
    """Past the limit the feeding connection fails with OverBudget naming the total; its frames before travel in it."""
    budget = BufferBudget(60)
    one, two = acceptor(budget=budget), acceptor(budget=budget)
    one.receive(hello() + HEADER.pack(50) + b"x" * 40)
    with pytest.raises(OverBudget) as caught:
        two.receive(hello())
        two.feed(encode_frame(b"ok") + HEADER.pack(50) + b"y" * 20)
    assert (caught.value.reason, caught.value.frames) == ("68 bytes buffered across connections, over max_buffered 60", [b"ok"])
    assert (two.state, budget.total) == ("failed", 68)
    two.release()
    assert budget.total == 44


def test_a_stranger_over_the_budget_fails_during_its_handshake() -> None:
    """A partial handshake frame that takes the budget over fails the connection before any hello is read."""
    budget = BufferBudget(10)
    core = acceptor(budget=budget)
    with pytest.raises(OverBudget, match="^14 bytes buffered across connections, over max_buffered 10$"):
        core.receive(HEADER.pack(500) + b"z" * 10)
    core.release()
    assert budget.total == 0


# --- what the core may not do -------------------------------------------------------------


def test_the_core_imports_no_loop_socket_clock_or_randomness() -> None:
    """casty.protocol.framing imports none of asyncio, socket, time, os, random, selectors, threading."""
    tree = ast.parse(inspect.getsource(framing))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert imported == {"__future__", "dataclasses", "hashlib", "hmac", "msgspec", "struct", "typing"}
