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
