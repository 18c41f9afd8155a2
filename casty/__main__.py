"""``python -m casty``: run a real casty cluster node, or talk to a running cluster.

    python -m casty node --bind HOST:PORT [--seeds HOST:PORT,...] [--module MODULE ...]
                         [--cluster NAME] [--heartbeat S] [--suspect-after S] [--dead-after S]
                         [--remove-after S] [--leave-timeout S] [--ask-timeout S]
                         [--write-timeout S] [--facts KIND,...|all] [--secret-file PATH]
                         [--max-connections N] [--max-handshakes N] [--handshake-timeout S]
                         [--idle-timeout S] [--max-buffered BYTES] [--trace FILE] [--log-level LEVEL]

    python -m casty ask  --seeds HOST:PORT,... --type MODULE:TYPE --key KEY --message JSON [--timeout S]
    python -m casty tell --seeds HOST:PORT,... --type MODULE:TYPE --key KEY --message JSON
    python -m casty placement --seeds HOST:PORT,... --type MODULE:TYPE --key KEY
    python -m casty members --seeds HOST:PORT,...

``node``: the node listens on ``--bind`` (its node id is that address), joins through the
seeds as a cluster member (an ``ActorSystem`` in cluster mode, see ``casty.cluster.node``),
hosts the actor types of each ``--module`` and prints one JSON object per line on stdout:
``{"event": "ready", "node", "address", ...}`` once it listens, ``{"event": "member.changed",
"node", "status", "incarnation", "by"}`` for every membership change it sees (itself
included), the runtime events chosen by ``--facts`` (``activation.started``,
``epoch.acquired``, ``schedule.fired``, ... with their fields and ``by``, the node that saw
them), and ``{"event": "stopped", "node", "orderly"}`` at the end. Logs go to stderr.
``--trace FILE`` also appends each of those facts to FILE as one JSON line stamped with the
node's wall clock (``casty._core.factlog``); ``sim.trace.Trace.from_jsonl(*files)`` merges several
nodes' files into one trace for the simulator's views. ``--facts net.sent,net.delivered``
adds a fact per cluster frame (with its CRC-32, so the two ends pair up).
SIGTERM or SIGINT make it leave in order (the others see it ``left``, not dead), then exit
0. A bad argument exits 2 with a message naming the bad value; an address already in use
or not local exits 1.

``ask``/``tell``/``placement``/``members``: a client outside the cluster
(``casty.cluster.client.ClusterClient``) sends the request to the first seed it can reach,
which runs it as its own code would (routed to the key's owner). ``--message`` is JSON:
``"Get"``, ``["Get"]`` or ``["Add", {"amount": 5}]`` (the message class's name, then its
fields; refs as ``["@e", "module:type", "key"]``). The answer is one JSON line on stdout:
``{"event": "reply", "value": ..., "gateway": ...}`` (exit 0), or ``{"event": "error",
"error": "Unavailable", "reason": ...}`` (exit 1). A ``tell`` is answered once a gateway
has queued it, not when it is handled.

Every command takes ``--secret-file PATH`` (or reads ``$CASTY_SECRET``): the cluster secret
that nodes and clients prove to each other in the TCP handshake (see ``casty.protocol.framing``).
There is no flag that takes the secret itself: a command line shows in ``ps``.

Signal handling lives here, in the program, and nowhere in the runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import stat
import sys
from typing import Any

from .cluster.client import ClusterClient, RemoteError
from .cluster.client_wire import MAX_TIMEOUT
from .cluster.config import check_cluster_name
from .protocol.membership import MembershipConfig
from .cluster.addresses import Address, parse_address
from .cluster.node import FACTS, SECRET_ENV, NodeConfig, NodeProcess, read_secret
from .cluster.tcp import TcpLimits
from .clock import SystemClock
from .errors import CastyError, ConfigurationError
from .observer import Event
from .protocol.framing import HEADER_SIZE
from .protocol.limits import MAX_FRAME
from ._core.factlog import FactLog
from ._durations import duration

PROG = "python -m casty"
_DEFAULTS = MembershipConfig()
_LIMITS = TcpLimits()
MAX_SECRET_FILE = 64 * 1024
"""The largest ``--secret-file`` read, in bytes: a secret is an HMAC key, and ``/dev/zero`` would be read forever."""


def _address(text: str) -> Address:
    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _addresses(text: str) -> tuple[Address, ...]:
    return tuple(_address(part) for part in text.split(",") if part.strip())


def _gateways(text: str) -> tuple[Address, ...]:
    """A client's ``--seeds``: at least one address (``ClusterClient`` raised ValueError for none: a traceback)."""
    seeds = _addresses(text)
    if not seeds:
        raise argparse.ArgumentTypeError(f"name at least one seed HOST:PORT, got {text!r}")
    return seeds


def _seconds(text: str) -> float:
    """A positive duration in seconds, refused by the same rule as the runtime's options (``duration``).

    Checked here rather than where the config is built, so argparse names the flag: a NaN,
    an infinity or a value past ``timedelta.max`` used to pass here and fail later naming a
    field (``MembershipConfig.heartbeat``) instead of the flag the operator typed.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    try:
        return duration(value, "a duration", positive=True)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds (at most timedelta.max), got {text!r}") from None


def _client_timeout(text: str) -> float:
    """A client's ``--timeout``: ``_seconds`` and at most ``MAX_TIMEOUT``, the bound ``ClusterClient`` and the gateway hold."""
    value = _seconds(text)
    if value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_TIMEOUT:g} seconds (a gateway holds an ask no longer), got {text!r}")
    return value


def _count(field: str, least: int, why: str | None = None) -> Any:
    """An int flag for ``TcpLimits.field`` of at least ``least``, refused by argparse naming the flag (``why``: the reason)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(why.format(value=value) if why else f"{field} must be an int of at least {least}, got {value}")
        return value

    return parse


def _cluster(text: str) -> str:
    """``--cluster``: the shared rule of a cluster name (``check_cluster_name``: printable, 1-200 UTF-8 bytes)."""
    try:
        return check_cluster_name(text, "the cluster name")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def event_kinds() -> frozenset[str]:
    """Every runtime event kind a node can emit: the ``kind`` of each ``Event`` class the CLI's imports define."""
    kinds: set[str] = set()
    todo: list[type[Event]] = [Event]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls is not Event:
            kinds.add(cls.kind)
    return frozenset(kinds)


def _facts(text: str) -> frozenset[str]:
    """``--facts``: known event kinds or ``all``; a typo (``schedule.fird``) is refused, not a silently empty filter."""
    kinds = frozenset(part.strip() for part in text.split(",") if part.strip())
    if not kinds:
        raise argparse.ArgumentTypeError(f"name at least one event kind (or 'all'), got {text!r}")
    known = event_kinds()
    unknown = sorted(kinds - known - {"all"})
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown event kind{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"known: all, {', '.join(sorted(known))}"
        )
    return kinds


def _text(text: str) -> str:
    """An argument that travels as UTF-8 (``--type``, ``--key``): a byte of argv that is not UTF-8 arrives as a lone surrogate."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise argparse.ArgumentTypeError(f"{ascii(text)} is not valid unicode ({exc.reason})") from None
    return text


def _message(text: str) -> tuple[str, dict[str, Any]]:
    """``--message`` JSON: ``"Name"``, ``["Name"]`` or ``["Name", {fields}]`` -> (name, fields)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise argparse.ArgumentTypeError(f"nested too deeply to be a message ({len(text)} characters of JSON)") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {ascii(text)} ({exc})") from None
    try:
        json.dumps(value, ensure_ascii=False).encode()  # a "\ud800" escape decodes to a lone surrogate: no frame carries it
    except UnicodeEncodeError as exc:
        raise argparse.ArgumentTypeError(f"a string in it is not valid unicode ({exc.reason}): {ascii(text)}") from None
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, list) and 1 <= len(value) <= 2 and isinstance(value[0], str) and value[0]):
        raise argparse.ArgumentTypeError(f'expected "Name", ["Name"] or ["Name", {{fields}}], got {text!r}')
    fields = value[1] if len(value) == 2 else {}
    if not isinstance(fields, dict):
        raise argparse.ArgumentTypeError(f"the fields of {value[0]!r} must be a JSON object, got {json.dumps(fields)}")
    return value[0], fields


def _emit(fact: dict[str, Any]) -> None:
    """One fact as one JSON line on stdout, flushed at once (a reader waits for it)."""
    try:
        sys.stdout.write(json.dumps(fact, default=repr) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # nobody reads any more (or stdout is closed): keep running
        pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="casty: virtual actors on asyncio")
    sub = parser.add_subparsers(dest="command", required=True)
    node = sub.add_parser(
        "node",
        help="run a real node: TCP transport, membership, and the actor types of --module",
        description="Run a real casty node; one JSON fact per line on stdout, logs on stderr.",
    )
    node.add_argument("--bind", type=_address, required=True, metavar="HOST:PORT",
                      help="where to listen; also this node's id (an IP literal and a port, e.g. 127.0.0.1:7001)")
    node.add_argument("--seeds", type=_addresses, default=(), metavar="HOST:PORT,...",
                      help="nodes to join through (this node's own address may be listed; none: found a cluster)")
    node.add_argument("--module", action="append", default=[], metavar="MODULE",
                      help="import MODULE so that its actor types are hosted (repeatable)")
    node.add_argument("--cluster", type=_cluster, default="casty", metavar="NAME",
                      help="cluster name, printable, at most 200 UTF-8 bytes; nodes of another cluster are refused at "
                           "the handshake (default: casty)")
    node.add_argument("--heartbeat", type=_seconds, default=_DEFAULTS.heartbeat, metavar="S",
                      help=f"seconds between heartbeats (default {_DEFAULTS.heartbeat:g})")
    node.add_argument("--suspect-after", type=_seconds, default=_DEFAULTS.suspect_after, metavar="S",
                      help=f"silence before a member is suspect (default {_DEFAULTS.suspect_after:g})")
    node.add_argument("--dead-after", type=_seconds, default=_DEFAULTS.dead_after, metavar="S",
                      help=f"suspicion before a member is dead (default {_DEFAULTS.dead_after:g})")
    node.add_argument("--remove-after", type=_seconds, default=_DEFAULTS.remove_after, metavar="S",
                      help=f"dead or left before a member is forgotten (default {_DEFAULTS.remove_after:g})")
    node.add_argument("--leave-timeout", type=_seconds, default=2.0, metavar="S",
                      help="on SIGTERM/SIGINT, at most this long to hand the leave frames to the network (default 2)")
    node.add_argument("--ask-timeout", type=_seconds, default=10.0, metavar="S",
                      help="an ask with no reply by then raises TimeoutError (default 10)")
    node.add_argument("--write-timeout", type=_seconds, default=5.0, metavar="S",
                      help="routing retries and quorum writes give up after this long (default 5)")
    node.add_argument("--facts", type=_facts, default=FACTS, metavar="KIND,...",
                      help="runtime events printed as JSON facts, or 'all' (default: " + ",".join(sorted(FACTS)) + ")")
    node.add_argument("--max-connections", type=_count("max_connections", 1), default=_LIMITS.max_connections, metavar="N",
                      help=f"incoming connections open at once; the next is closed (default {_LIMITS.max_connections})")
    node.add_argument("--max-handshakes", type=_count("max_handshakes", 1), default=_LIMITS.max_handshakes, metavar="N",
                      help=f"incoming connections in their handshake; one more closes the oldest (default {_LIMITS.max_handshakes})")
    node.add_argument("--handshake-timeout", type=_seconds, default=5.0, metavar="S",
                      help="seconds an incoming connection has to complete its handshake (default 5)")
    node.add_argument("--idle-timeout", type=_seconds, default=_LIMITS.idle_timeout, metavar="S",
                      help=f"a welcomed connection silent this long is closed (default {_LIMITS.idle_timeout:g})")
    node.add_argument("--max-buffered", type=_count("max_buffered", MAX_FRAME + HEADER_SIZE,
                      f"max_buffered ({{value}}) must hold one partial frame of MAX_FRAME ({MAX_FRAME}) bytes"), default=_LIMITS.max_buffered, metavar="BYTES",
                      help=f"bytes of partial frames held across connections (default {_LIMITS.max_buffered})")
    node.add_argument("--trace", metavar="FILE",
                      help="also append every fact to FILE, one JSON line each with the node's wall time (for "
                           "sim.trace.Trace.from_jsonl); kept across restarts with the same FILE")
    _secret_file(node)
    _log_level(node)
    node.set_defaults(subparser=node)
    for name, text in (
        ("ask", "ask an actor through a node of the cluster; print its reply"),
        ("tell", "tell an actor through a node of the cluster (at most once)"),
        ("placement", "print a node's view of a key's owner and replicas"),
        ("members", "print a node's view of the membership"),
    ):
        client = sub.add_parser(name, help=text, description=text.capitalize() + "; one JSON line on stdout.")
        client.add_argument("--seeds", type=_gateways, required=True, metavar="HOST:PORT,...",
                            help="nodes to send the request through, first reachable first")
        client.add_argument("--cluster", type=_cluster, default="casty", metavar="NAME", help="cluster name (default: casty)")
        _secret_file(client)
        client.add_argument("--timeout", type=_client_timeout, default=10.0, metavar="S",
                            help=f"how long to wait for the answer, at most {MAX_TIMEOUT:g} (default 10)")
        if name != "members":
            client.add_argument("--type", type=_text, required=True, metavar="MODULE:TYPE", help="the actor type, e.g. app:counter")
            client.add_argument("--key", type=_text, required=True, metavar="KEY", help="the actor key")
        if name in ("ask", "tell"):
            client.add_argument("--message", type=_message, required=True, metavar="JSON",
                                help='the message: "Name", ["Name"] or ["Name", {"field": value}]')
        _log_level(client)
        client.set_defaults(subparser=client)
    return parser


class _NoSecretOnTheCommandLine(argparse.Action):
    """``--secret VALUE`` is an error, not an abbreviation of ``--secret-file`` (which would read VALUE as a path)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        parser.error(f"--secret: a secret on the command line shows in ps; use --secret-file PATH or ${SECRET_ENV}")


def _secret_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--secret-file", metavar="PATH",
                        help=f"the cluster secret is this file's content (else ${SECRET_ENV}; no flag takes it on the "
                             "command line, where ps would show it)")
    parser.add_argument("--secret", action=_NoSecretOnTheCommandLine, help=argparse.SUPPRESS)


def _log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="WARNING", type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level (default WARNING)")


async def _client(args: argparse.Namespace) -> int:
    """Run one client request; its answer (or error) as one JSON line; the exit status."""
    try:
        async with ClusterClient(args.seeds, cluster=args.cluster, timeout=args.timeout, secret=args.secret) as client:
            gateway = client.gateway
            try:
                if args.command == "ask":
                    name, fields = args.message
                    value: Any = await client.ask(args.type, args.key, name, fields)
                elif args.command == "tell":
                    name, fields = args.message
                    await client.tell(args.type, args.key, name, fields)
                    value = None
                elif args.command == "placement":
                    value = await client.placement(args.type, args.key)
                else:
                    value = await client.members()
                gateway = client.gateway
            except (CastyError, TimeoutError, ValueError, TypeError) as exc:
                error = exc.error if isinstance(exc, RemoteError) else type(exc).__name__
                reason = exc.reason if isinstance(exc, RemoteError) else str(exc)
                _emit({"event": "error", "error": error, "reason": reason, "gateway": client.gateway})
                return 1
    except OSError as exc:
        _emit({"event": "error", "error": "OSError", "reason": f"cannot listen for answers: {exc}"})
        return 1
    _emit({"event": "reply", "value": value, "gateway": gateway})
    return 0


async def _serve(config: NodeConfig, trace: str | None = None) -> int:
    """Run the node until SIGTERM or SIGINT, then leave in order; the exit status.

    With ``trace``, every fact is also appended to that file (``FactLog``), stamped with the
    clock the node runs on.
    """
    loop = asyncio.get_running_loop()
    clock = SystemClock()
    emit = _emit
    factlog: FactLog | None = None
    created = trace is not None and not os.path.lexists(trace)  # a file this run makes: removed if the node never starts
    started = False
    if trace is not None:
        try:
            factlog = FactLog(trace, config.node, clock)
        except OSError as exc:
            print(f"{PROG} node: error: --trace: cannot open {trace!r} for appending: {exc.strerror or exc}", file=sys.stderr)
            return 2
        recorder = factlog

        def emit(fact: dict[str, Any]) -> None:
            _emit(fact)
            recorder.record(fact)
    stop = asyncio.Event()
    log = logging.getLogger("casty.node")

    def on_signal(signum: signal.Signals) -> None:
        if not stop.is_set():
            log.info("%s: %s: leaving", config.node, signum.name)
        stop.set()

    installed: list[signal.Signals] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, on_signal, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError):  # no signal handlers on this platform's loop
            pass
    try:
        node = NodeProcess(config, emit, clock=clock)
        try:
            await node.start()
            started = True
        except ConfigurationError as exc:
            print(f"{PROG} node: error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"{PROG} node: error: cannot listen on {config.node}: {exc}", file=sys.stderr)
            return 1
        try:
            await stop.wait()
        finally:
            await node.stop()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        if factlog is not None:
            factlog.close()
            if not started and created and factlog.written == 0:
                _remove_quietly(factlog.path)
    return 0


def _remove_quietly(path: str) -> None:
    """Remove the empty ``--trace`` file of a node that never started (nothing half-made is left behind)."""
    try:
        if os.path.getsize(path) == 0:
            os.unlink(path)
    except OSError:
        pass


def _check_secret_file(path: str) -> None:
    """``ValueError`` unless ``path`` is a file (or device) that ends within ``MAX_SECRET_FILE`` bytes.

    Why before ``read_secret``: it reads the whole file, so ``/dev/zero`` made the command
    read forever (memory growing) and a FIFO nobody writes made it hang at the open, instead
    of saying what was wrong. Opened without blocking, a FIFO or socket is refused; anything
    else is read up to one byte past the limit.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"cannot read the secret file {path!r}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            raise ValueError(f"the secret file {path!r} is a pipe or socket, not a file")
        size = 0
        while size <= MAX_SECRET_FILE and (chunk := os.read(fd, MAX_SECRET_FILE + 1 - size)):
            size += len(chunk)
    except OSError as exc:
        raise ValueError(f"cannot read the secret file {path!r}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_SECRET_FILE:
        raise ValueError(f"the secret file {path!r} is over the {MAX_SECRET_FILE}-byte limit of a secret")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    parser = args.subparser  # its errors say "python -m casty node: error: ..." with that command's usage
    try:
        if args.secret_file is not None:
            _check_secret_file(args.secret_file)
        args.secret = read_secret(args.secret_file, os.environ)
    except ValueError as exc:
        parser.error(f"--secret-file: {exc}" if args.secret_file is not None else str(exc))
    if args.command != "node":
        logging.basicConfig(stream=sys.stderr, level=getattr(logging, args.log_level),
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return asyncio.run(_client(args))
    try:
        membership = MembershipConfig(
            heartbeat=args.heartbeat,
            suspect_after=args.suspect_after,
            dead_after=args.dead_after,
            remove_after=args.remove_after,
        )
        config = NodeConfig(
            bind=args.bind,
            seeds=args.seeds,
            modules=tuple(args.module),
            cluster=args.cluster,
            membership=membership,
            leave_timeout=args.leave_timeout,
            ask_timeout=args.ask_timeout,
            write_timeout=args.write_timeout,
            facts=frozenset() if "all" in args.facts else args.facts,
            all_facts="all" in args.facts,
            secret=args.secret,
            limits=TcpLimits(
                max_connections=args.max_connections,
                max_handshakes=args.max_handshakes,
                handshake_timeout=args.handshake_timeout,
                idle_timeout=args.idle_timeout,
                max_buffered=args.max_buffered,
            ),
        )
        config.cluster_options()  # what start() builds once the port is bound: refused here, before anything is bound
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(
        stream=sys.stderr, level=getattr(logging, args.log_level), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return asyncio.run(_serve(config, args.trace))
    except KeyboardInterrupt:  # a SIGINT before the handlers were installed
        return 130


if __name__ == "__main__":
    sys.exit(main())
