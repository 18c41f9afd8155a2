"""The dedupe rule of routed messages: a receiver runs a sender's request at most once.

A network may hand the same frame over twice (a duplicated datagram, a replayed segment,
the simulator's ``duplicate`` fault), and the router's own retries can put a second copy of
a ``Deliver`` on the wire: a duplicated ``WrongOwner`` re-arms a retry whose first copy the
owner already took. Without a memory of what it accepted, the owner would run the message
twice, and the at-most-once delivery REFERENCE.md promises would be broken (seed 0, 3
nodes, ``duplicate(1.0,+0.1s,n1+n2+n3,5s)@5``: every Add asked in the window logged twice).

No new field is needed on the wire: a ``Deliver`` already carries ``request``, the sender's
routing id, and the request rule (``casty.cluster.delivery.REQUEST_BITS``) makes a node's ids
distinct across its lives (a life numbers from its birth µs shifted up). So the pair
``(sender, request)`` names one message for good, and a window per sender name covers every
incarnation of that sender with no incarnation bookkeeping.

This module is the rule alone, a small deterministic state machine with no loop, no clock
and no I/O, so that it can be read and tested apart:

1. **First copy wins.** ``admit(sender, request)`` is True the first time the pair is seen
   and False for every later copy while the pair is remembered. The caller records only
   what it accepts (a copy answered ``WrongOwner`` is not remembered, so the retry that
   follows is still taken).
2. **Bounded memory.** Each sender's window remembers its last ``per_sender`` admitted
   requests (oldest admitted forgotten first), and at most ``senders`` senders are kept
   (the one admitted least recently forgotten first). Memory is therefore at most
   ``senders * per_sender`` integers whatever the traffic.
3. **The limit, said plainly.** A duplicate that trails its original by more than
   ``per_sender`` admitted requests of the same sender, or arrives after its sender was
   forgotten, is admitted again. So is one arriving at a receiver that restarted since (the
   window is not persisted) or at another node that became the key's owner meanwhile.
   The defaults make the first two need thousands of requests between a frame and its copy.

Orders are insertion orders of ``dict`` (integers and names as keys, never iterated by
hash), so two runs of the same history make the same decisions.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_PER_SENDER", "DEFAULT_SENDERS", "DedupeWindow"]

DEFAULT_PER_SENDER: Final = 4096
"""How many admitted requests of one sender a receiver remembers (a copy trailing by more is admitted again).

About 76 bytes a request in CPython (the int and its dict slot, measured with tracemalloc): some 310 KB per busy sender."""

DEFAULT_SENDERS: Final = 256
"""How many senders a receiver remembers (above a cluster's size; the least recently admitted is forgotten first).

With ``DEFAULT_PER_SENDER``, the worst case is some 80 MB, reached only by 256 senders each
with 4096 requests admitted here; a cluster of a few nodes holds a few MB at most."""


class DedupeWindow:
    """Which ``(sender, request)`` pairs a receiver has already accepted, within a bounded window (the dedupe rule)."""

    __slots__ = ("per_sender", "senders", "_seen", "duplicates", "forgotten")

    def __init__(self, *, per_sender: int = DEFAULT_PER_SENDER, senders: int = DEFAULT_SENDERS) -> None:
        if per_sender < 1:
            raise ValueError(f"DedupeWindow: per_sender must be at least 1, got {per_sender}")
        if senders < 1:
            raise ValueError(f"DedupeWindow: senders must be at least 1, got {senders}")
        self.per_sender: Final = per_sender
        self.senders: Final = senders
        # sender -> its admitted requests, oldest first; the dict of senders is ordered by last admission.
        self._seen: dict[str, dict[int, None]] = {}
        self.duplicates = 0
        """Copies refused so far (rule 1)."""
        self.forgotten = 0
        """Requests dropped from memory by rule 2 (each a copy that would now be admitted again)."""

    def admit(self, sender: str, request: int) -> bool:
        """True (and remember the pair) if ``request`` of ``sender`` is new here; False for a copy already admitted."""
        window = self._seen.get(sender)
        if window is not None and request in window:
            self.duplicates += 1
            return False
        if window is None:
            window = {}
        else:
            del self._seen[sender]  # re-inserted below: the senders' order is their last admission
        self._seen[sender] = window
        window[request] = None
        if len(window) > self.per_sender:
            del window[next(iter(window))]
            self.forgotten += 1
        if len(self._seen) > self.senders:
            oldest = next(iter(self._seen))
            self.forgotten += len(self._seen.pop(oldest))
        return True

    def seen(self, sender: str, request: int) -> bool:
        """Whether ``request`` of ``sender`` is remembered as admitted (no change of state)."""
        window = self._seen.get(sender)
        return window is not None and request in window

    def remembered(self) -> int:
        """How many pairs are remembered now (at most ``senders * per_sender``)."""
        return sum(len(window) for window in self._seen.values())
