"""The frame limit of a cluster, one number for every transport (TCP and the simulator alike).

Why one place. A frame the simulator carries but TCP drops makes a run in the simulator
prove nothing about a real cluster; so both import ``MAX_FRAME`` from here, and a sender
checks its frame against it (``check_frame``) before handing it over, so that a message too
large for the network fails at the call with ``MessageTooLarge`` instead of vanishing and
leaving its ask to time out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..errors import MessageTooLarge

__all__ = ["MAX_FRAME", "PAGE_OVERHEAD", "KEY_MARGIN", "frame_limit", "check_frame", "pages_size"]

MAX_FRAME: Final = 4 * 1024 * 1024
"""The largest frame payload a transport carries by default, in bytes (4 MiB)."""


PAGE_OVERHEAD: Final = 16
"""Bytes a page costs in a frame besides its name and data, at most (msgpack's string and binary headers, 5 each)."""

KEY_MARGIN: Final = 16 * 1024
"""Room left in a frame for what carries one key's pages besides them: the envelope, the entity, epochs, stamp, counters.

A key's pages (``pages_size``) must fit in ``frame_limit - KEY_MARGIN - the entity's own
bytes``, so that every frame that carries them whole (the owner's ``Write``, a replica's
``Promise``, a handoff ``Snapshot``) fits a frame; a replicated write that would pass it is
refused at the sender (``OwnerSlot.stage``).
"""


def pages_size(pages: Mapping[str, bytes | None]) -> int:
    """What ``pages`` weigh in a frame, at most: names, data and ``PAGE_OVERHEAD`` each (None pages weigh nothing)."""
    return sum(len(name) + len(data) + PAGE_OVERHEAD for name, data in pages.items() if data is not None)


def frame_limit(transport: object) -> int:
    """The largest frame ``transport`` carries: its ``max_frame`` if it says, else ``MAX_FRAME``."""
    limit = getattr(transport, "max_frame", MAX_FRAME)
    return limit if isinstance(limit, int) else MAX_FRAME


def check_frame(size: int, limit: int, what: str) -> None:
    """``MessageTooLarge`` naming ``what`` if a frame of ``size`` bytes exceeds ``limit``."""
    if size > limit:
        raise MessageTooLarge(f"{what}: its frame is {size} bytes, over the {limit}-byte frame limit")
