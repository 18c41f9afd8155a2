"""Stream helpers both sides of the TCP transport use: closing a connection, naming a peer, logging a crash.

No framing here (that is ``casty.protocol.framing``) and no policy: each helper does one
thing to an asyncio stream or task, for ``casty.cluster.tcp`` and ``casty.cluster.tcp_incoming``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

__all__ = ["READ_CHUNK", "CLOSE_GRACE", "log", "format_peer", "describe", "shut", "log_crash"]

READ_CHUNK: Final = 256 * 1024
"""The most one read of a connection asks for (and each stream's buffer limit)."""

CLOSE_GRACE: Final = 1.0
"""Seconds a graceful close may take to flush before the connection is reset."""

log = logging.getLogger("casty.tcp")


def format_peer(address: Any) -> str:
    """A socket's peer name as ``HOST:PORT`` (brackets around an IPv6 host), or its ``str`` if it is not a pair."""
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(address)


def describe(exc: BaseException) -> str:
    """An exception as ``Type: text`` (or its type alone) for a reason in a log line or an event."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def shut(writer: asyncio.StreamWriter, *, graceful: bool) -> None:
    """Close a connection: flush and FIN when ``graceful`` (for at most a second), else reset it at once.

    The close itself is started before the first ``await``, so even a cancellation landing
    here cannot leave the socket open.
    """
    transport = writer.transport
    if graceful and not transport.is_closing():
        writer.close()
    else:
        transport.abort()
    try:
        async with asyncio.timeout(CLOSE_GRACE):
            await writer.wait_closed()
    except TimeoutError:
        transport.abort()
    except asyncio.CancelledError:
        transport.abort()
        raise
    except Exception:
        pass  # the connection ended with an error: it is closed all the same


def log_crash(task: asyncio.Task[None]) -> None:
    """A done callback: log a transport task that ended with an exception (none should)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("internal task %s crashed", task.get_name(), exc_info=task.exception())
