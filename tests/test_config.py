"""``Cluster(...)`` options: the cluster secret is kept as bytes, never shown, and must match the transport's."""

from __future__ import annotations

import pytest

from casty import ActorSystem
from casty.cluster.config import Cluster, check_transport
from casty.cluster.tcp import TcpTransport
from casty.errors import ConfigurationError


def test_the_secret_is_bytes_never_in_repr_and_never_empty() -> None:
    """A str secret is kept as its UTF-8 bytes, repr leaves it out, an empty or non-text one is refused naming Cluster.secret."""
    cluster = Cluster(["n1"], secret="s\u00e9same")
    assert cluster.secret == "s\u00e9same".encode()
    assert "same" not in repr(cluster) and "secret" not in repr(cluster)
    assert Cluster(["n1"], secret=b"\x00\xff").secret == b"\x00\xff"
    assert Cluster(["n1"]).secret is None
    with pytest.raises(ValueError, match="^Cluster.secret must not be empty$"):
        Cluster(["n1"], secret=b"")
    with pytest.raises(TypeError, match="^Cluster.secret must be bytes or str, got int$"):
        Cluster(["n1"], secret=42)  # type: ignore[arg-type]


def test_a_secret_the_transport_does_not_check_is_a_configuration_error() -> None:
    """Cluster(secret=) over a TCP transport without it, with another one, or over a transport that cannot check one, is refused at ActorSystem(...)."""
    cluster = Cluster(["n1"], secret="s3cret")
    with pytest.raises(ConfigurationError, match="Cluster\\(secret=...\\) and the transport's secret differ"):
        ActorSystem(node="n1", cluster=cluster, transport=TcpTransport("n1"))
    with pytest.raises(ConfigurationError, match="Cluster\\(secret=...\\) and the transport's secret differ"):
        ActorSystem(node="n1", cluster=cluster, transport=TcpTransport("n1", secret="other"))
    with pytest.raises(ConfigurationError, match="needs a transport that checks it in its handshake; object does not"):
        check_transport(cluster, object())
    system = ActorSystem(node="n1", cluster=cluster, transport=TcpTransport("n1", secret=b"s3cret"))
    assert system.cluster is cluster
    check_transport(Cluster(["n1"]), object())  # no secret: any transport


def test_a_cluster_name_is_checked_the_same_in_process_and_on_the_wire() -> None:
    """Cluster(name=) and ClusterClient(cluster=) refuse the same names: over 200 UTF-8 bytes, a control character, not UTF-8, empty."""
    from casty.cluster.client import ClusterClient

    for bad, why in [
        ("c" * 201, "is 201 bytes, over the 200-byte limit of a cluster name (it must fit the 1024-byte handshake frame)"),
        ("\u00e9" * 101, "is 202 bytes, over the 200-byte limit"),
        ("a\nb", "must be printable text (no control characters), got 'a\\nb'"),
        ("x\udcff", "'x\\udcff' is not valid unicode (surrogates not allowed)"),
        ("", "must be a non-empty string, got ''"),
    ]:
        with pytest.raises(ValueError) as local:
            Cluster(["n1"], name=bad)
        with pytest.raises(ValueError) as wire:
            ClusterClient(["127.0.0.1:9"], cluster=bad)
        assert (why in str(local.value), why in str(wire.value)) == (True, True), (local.value, wire.value)
        assert str(local.value).startswith("Cluster.name ") and str(wire.value).startswith("ClusterClient.cluster ")
    assert Cluster(["n1"], name="\u00e9" * 100).name == "\u00e9" * 100  # 200 bytes: the longest


def test_the_longest_cluster_name_fits_every_handshake_frame() -> None:
    """A 200-byte name (the worst for repr: backslashes) fits a Hello from the longest IPv6 node id and a refusal naming two such names (theirs cut to 64 characters)."""
    from casty.protocol.framing import HANDSHAKE_MAX, MAGIC, NONCE_SIZE, HandshakeRefused, Hello, encode_handshake, refusal

    from casty.cluster.config import MAX_CLUSTER_NAME

    node = "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
    ours, theirs = "\\" * MAX_CLUSTER_NAME, "\\" * (MAX_CLUSTER_NAME - 1) + "x"
    hello = Hello(MAGIC, theirs, node, b"n" * NONCE_SIZE)
    why = refusal(hello, cluster=ours, node=node)
    assert why is not None and why.startswith("cluster '\\\\")
    sizes = (len(encode_handshake(hello)), len(encode_handshake(HandshakeRefused(why))))
    assert sizes == (334, 616) and max(sizes) <= HANDSHAKE_MAX  # the refusal quotes 64 of their 200 characters
