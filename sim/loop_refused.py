"""What asyncio's event loop offers and a VirtualLoop refuses: threads, sockets, DNS, file descriptors, processes.

Each refused call raises ``ForbiddenInSimulation`` naming the call and why it has no place in virtual time.
A mixin of ``VirtualLoop`` (no slots, no state), apart from ``sim.loop`` so the loop module holds what runs.
``run_forever`` / ``run_until_complete`` / ``stop`` are refused too: the world's simpy environment drives the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import ForbiddenInSimulation

if TYPE_CHECKING:
    from .loop import VirtualLoop




def _forbidden(call: str, why: str) -> Callable[..., Any]:
    def forbidden(self: VirtualLoop, *args: Any, **kwargs: Any) -> Any:
        raise ForbiddenInSimulation(f"{call} is not available on VirtualLoop {self.name!r}: {why}")

    forbidden.__name__ = call.split("(")[0].split(".")[-1]
    forbidden.__doc__ = f"Refused in the simulation: {why}."
    return forbidden


_THREADS = "it would run real threads outside virtual time; do the work inline, and model its duration with asyncio.sleep"
_SOCKETS = "real sockets would bypass the simulated network; simulated nodes talk through the transport port (SimNetwork)"
_DNS = "a DNS lookup would query the real network; simulated nodes are addressed by node id through the transport port"
_FDS = "watching file descriptors needs a real selector, and nothing real happens in the simulation"
_PROCS = "a subprocess runs in real time, outside the simulation"
_SIGNALS = "signals are real, process-wide events outside virtual time"
_PIPES = "pipes are real file descriptors outside virtual time"
_DRIVEN = "a VirtualLoop is driven by the world's simpy environment; use sim.loop.run_until_complete(env, loop, coro) or the World"


class RefusedCalls:
    """The asyncio event-loop methods a VirtualLoop refuses (a mixin listed before ``asyncio.AbstractEventLoop``)."""

    __slots__ = ()

    # ---------------------------------------------------------------- refused: the world drives the loop

    run_forever = _forbidden("loop.run_forever()", _DRIVEN)
    run_until_complete = _forbidden("loop.run_until_complete()", _DRIVEN)
    stop = _forbidden("loop.stop()", _DRIVEN)

    # ---------------------------------------------------------------- refused: outside virtual time

    run_in_executor = _forbidden("asyncio.to_thread / loop.run_in_executor()", _THREADS)
    set_default_executor = _forbidden("loop.set_default_executor()", _THREADS)
    shutdown_default_executor = _forbidden("loop.shutdown_default_executor()", _THREADS)
    getaddrinfo = _forbidden("loop.getaddrinfo()", _DNS)
    getnameinfo = _forbidden("loop.getnameinfo()", _DNS)
    create_connection = _forbidden("asyncio.open_connection / loop.create_connection()", _SOCKETS)
    create_server = _forbidden("asyncio.start_server / loop.create_server()", _SOCKETS)
    create_unix_connection = _forbidden("asyncio.open_unix_connection / loop.create_unix_connection()", _SOCKETS)
    create_unix_server = _forbidden("asyncio.start_unix_server / loop.create_unix_server()", _SOCKETS)
    create_datagram_endpoint = _forbidden("loop.create_datagram_endpoint()", _SOCKETS)
    connect_accepted_socket = _forbidden("loop.connect_accepted_socket()", _SOCKETS)
    sendfile = _forbidden("loop.sendfile()", _SOCKETS)
    start_tls = _forbidden("loop.start_tls()", _SOCKETS)
    sock_recv = _forbidden("loop.sock_recv()", _SOCKETS)
    sock_recv_into = _forbidden("loop.sock_recv_into()", _SOCKETS)
    sock_recvfrom = _forbidden("loop.sock_recvfrom()", _SOCKETS)
    sock_recvfrom_into = _forbidden("loop.sock_recvfrom_into()", _SOCKETS)
    sock_sendall = _forbidden("loop.sock_sendall()", _SOCKETS)
    sock_sendto = _forbidden("loop.sock_sendto()", _SOCKETS)
    sock_connect = _forbidden("loop.sock_connect()", _SOCKETS)
    sock_accept = _forbidden("loop.sock_accept()", _SOCKETS)
    sock_sendfile = _forbidden("loop.sock_sendfile()", _SOCKETS)
    add_reader = _forbidden("loop.add_reader()", _FDS)
    remove_reader = _forbidden("loop.remove_reader()", _FDS)
    add_writer = _forbidden("loop.add_writer()", _FDS)
    remove_writer = _forbidden("loop.remove_writer()", _FDS)
    subprocess_exec = _forbidden("asyncio.create_subprocess_exec / loop.subprocess_exec()", _PROCS)
    subprocess_shell = _forbidden("asyncio.create_subprocess_shell / loop.subprocess_shell()", _PROCS)
    add_signal_handler = _forbidden("loop.add_signal_handler()", _SIGNALS)
    remove_signal_handler = _forbidden("loop.remove_signal_handler()", _SIGNALS)
    connect_read_pipe = _forbidden("loop.connect_read_pipe()", _PIPES)
    connect_write_pipe = _forbidden("loop.connect_write_pipe()", _PIPES)
