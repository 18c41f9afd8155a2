"""Node ids that are addresses: ``HOST:PORT`` parsed, formatted and made canonical.

A real node's id is its canonical ``HOST:PORT`` (``127.0.0.1:7001``, ``[::1]:7001`` for
IPv6), so a seed given as ``HOST:PORT`` is at once a node id and a place to dial (see
``casty.cluster.node``), and a client's id is its listening address, so that a gateway can
dial it back from the id alone (``casty.cluster.client``). Hosts are IP literals in canonical
form (``ipaddress``), so two nodes never know one peer under two ids.

Why a module of its own: the node and the client both need these helpers, and the node
also imports the gateway's frames; with the helpers in ``node.py`` the client had to import
``node.py`` late to dodge an import cycle. Here they import nothing of the cluster.
"""

from __future__ import annotations

import ipaddress

__all__ = ["Address", "parse_address", "format_address", "node_id", "address_of"]

Address = tuple[str, int]
"""A listening place: ``(host, port)``, the host an IP literal."""


def parse_address(text: str, *, allow_any: bool = False) -> Address:
    """``HOST:PORT`` (``[V6]:PORT`` for IPv6) -> ``(canonical host, port)``; ``ValueError`` naming ``text`` if it is not one.

    The host must be an IP literal; the port 1..65535. ``allow_any`` accepts the unspecified
    hosts (``0.0.0.0``, ``::``), which no other node could dial.
    """
    raw = text.strip()
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"not a HOST:PORT address: {text!r} (IPv6 is written [::1]:7001)")
        port_text = rest[1:]
    else:
        host, sep, port_text = raw.rpartition(":")
        if not sep or not host:
            raise ValueError(f"not a HOST:PORT address: {text!r} (e.g. 127.0.0.1:7001)")
        if ":" in host:
            raise ValueError(f"not a HOST:PORT address: {text!r} (write an IPv6 host in brackets: [::1]:7001)")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"not an IP address: {host!r} in {text!r} (give an IP literal, e.g. 127.0.0.1)") from None
    if not (port_text.isascii() and port_text.isdigit()):
        raise ValueError(f"not a port: {port_text!r} in {text!r}")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} out of range 1..65535 in {text!r}")
    if ip.is_unspecified and not allow_any:
        raise ValueError(f"{text!r} is the unspecified address: bind an address other nodes can dial (e.g. 127.0.0.1)")
    return (str(ip), port)


def format_address(address: Address) -> str:
    """``(host, port)`` -> ``HOST:PORT``, with brackets around an IPv6 host."""
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def node_id(address: Address | str) -> str:
    """The node id of a node listening on ``address`` (``(host, port)`` or ``HOST:PORT``): its canonical ``HOST:PORT``."""
    text = address if isinstance(address, str) else format_address(address)
    return format_address(parse_address(text))


def address_of(node: str) -> Address | None:
    """Where node ``node`` listens (its id is its address), or None if the id is not an address."""
    try:
        return parse_address(node)
    except ValueError:
        return None
