"""How many frames per second one ``TcpTransport`` carries to another over loopback.

Two transports in one asyncio program on 127.0.0.1: ``a`` sends ``--frames`` frames of
``--size`` bytes to ``b`` as fast as ``send`` takes them (in bursts of ``--burst``, yielding
to the loop between bursts so the peer's task writes), and the clock stops when ``b``'s
handler has seen the last one. The figure is frames/s and MB/s of payload, the best of
``--reps`` runs, each on fresh transports after a warm-up (the connection and handshake are
outside the timed part). ``--secret`` measures the authenticated handshake's transport (the
frames after it cost the same: the secret does not sign them).

Why: the framing core (``casty.protocol.framing``) sits on the receiving side's hot path
(every chunk the socket gives goes through its ``feed``), so a change to it must not make
this figure lower.

    python bench/tcp_throughput.py
    python bench/tcp_throughput.py --frames 100000 --size 64 --reps 5
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time

from casty.cluster.tcp import TcpTransport


async def one_run(frames: int, size: int, burst: int, secret: bytes | None) -> float:
    """Seconds for ``frames`` frames of ``size`` bytes from a to b (handshake excluded)."""
    seen = 0
    done = asyncio.Event()
    warm = asyncio.Event()

    def handler(source: str, frame: bytes) -> None:
        nonlocal seen
        if frame[:1] == b"w":
            warm.set()
            return
        seen += 1
        if seen == frames:
            done.set()

    room = max(64 * 1024 * 1024, (size + 4) * (frames + 1))  # no frame is dropped for a full queue
    b = TcpTransport("b", secret=secret)
    b.set_handler(handler)
    await b.start()
    a = TcpTransport("a", peers={"b": b.address}, queue_frames=frames + 1, queue_bytes=room, secret=secret)
    await a.start()
    try:
        a.send("b", b"w")
        await asyncio.wait_for(warm.wait(), 10)
        payload = b"x" * size
        start = time.perf_counter()
        sent = 0
        while sent < frames:
            n = min(burst, frames - sent)
            for _ in range(n):
                a.send("b", payload)
            sent += n
            await asyncio.sleep(0)
        await asyncio.wait_for(done.wait(), 120)
        return time.perf_counter() - start
    finally:
        await a.close()
        await b.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--secret", action="store_true")
    args = parser.parse_args()
    secret = b"bench secret" if args.secret else None
    walls = [asyncio.run(one_run(args.frames, args.size, args.burst, secret)) for _ in range(args.reps)]
    best = min(walls)
    print(f"python {platform.python_version()}, {args.frames} frames of {args.size} B, burst {args.burst}, secret {bool(secret)}")
    print("runs frames/s: " + " ".join(f"{args.frames / w:.0f}" for w in walls))
    print(f"frames/s {args.frames / best:.0f}")
    print(f"MB/s {args.frames * args.size / best / 1e6:.1f}")


if __name__ == "__main__":
    main()
