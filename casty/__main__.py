"""``python -m casty``: run a real casty node.

    python -m casty node --bind HOST:PORT [--seeds HOST:PORT,...] [--module MODULE ...]
                         [--cluster NAME] [--heartbeat S] [--suspect-after S] [--dead-after S]
                         [--remove-after S] [--leave-timeout S] [--log-level LEVEL]

The node listens on ``--bind`` (its node id is that address), joins through the seeds,
hosts the actor types of each ``--module`` and prints one JSON object per line on stdout:
``{"event": "ready", "node", "address", ...}`` once it listens, ``{"event": "member.changed",
"node", "status", "incarnation", "by"}`` for every membership change it sees (itself
included), and ``{"event": "stopped", "node", "orderly"}`` at the end. Logs go to stderr.

SIGTERM or SIGINT make it leave in order (the others see it ``left``, not dead), then exit
0. A bad argument exits 2 with a message naming the bad value; an address already in use
or not local exits 1.

Signal handling lives here, in the program, and nowhere in the runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import Any

from .cluster.membership import MembershipConfig
from .cluster.node import NodeConfig, NodeProcess, parse_address
from .cluster.tcp import Address
from .errors import ConfigurationError

PROG = "python -m casty"
_DEFAULTS = MembershipConfig()


def _address(text: str) -> Address:
    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _addresses(text: str) -> tuple[Address, ...]:
    return tuple(_address(part) for part in text.split(",") if part.strip())


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _emit(fact: dict[str, Any]) -> None:
    """One fact as one JSON line on stdout, flushed at once (a reader waits for it)."""
    try:
        sys.stdout.write(json.dumps(fact) + "\n")
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
    node.add_argument("--cluster", default="casty", metavar="NAME",
                      help="cluster name; nodes of another cluster are refused at the handshake (default: casty)")
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
    node.add_argument("--log-level", default="WARNING", type=str.upper,
                      choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level (default WARNING)")
    return parser


async def _serve(config: NodeConfig) -> int:
    """Run the node until SIGTERM or SIGINT, then leave in order; the exit status."""
    loop = asyncio.get_running_loop()
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
        node = NodeProcess(config, _emit)
        try:
            await node.start()
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
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "node":  # pragma: no cover - argparse allows only the subcommands above
        parser.error(f"unknown command {args.command!r}")
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
        )
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(
        stream=sys.stderr, level=getattr(logging, args.log_level), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return asyncio.run(_serve(config))
    except KeyboardInterrupt:  # a SIGINT before the handlers were installed
        return 130


if __name__ == "__main__":
    sys.exit(main())
