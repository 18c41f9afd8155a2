"""The frame limit of a cluster, one number for every transport (TCP and the simulator alike).

Why one place. A frame the simulator carries but TCP drops makes a run in the simulator
prove nothing about a real cluster; so both import ``MAX_FRAME`` from here, and a sender
checks its frame against it (``check_frame``) before handing it over, so that a message too
large for the network fails at the call with ``MessageTooLarge`` instead of vanishing and
leaving its ask to time out.
"""

from __future__ import annotations

from typing import Final

from ..errors import MessageTooLarge

__all__ = ["MAX_FRAME", "frame_limit", "check_frame"]

MAX_FRAME: Final = 4 * 1024 * 1024
"""The largest frame payload a transport carries by default, in bytes (4 MiB)."""


def frame_limit(transport: object) -> int:
    """The largest frame ``transport`` carries: its ``max_frame`` if it says, else ``MAX_FRAME``."""
    limit = getattr(transport, "max_frame", MAX_FRAME)
    return limit if isinstance(limit, int) else MAX_FRAME


def check_frame(size: int, limit: int, what: str) -> None:
    """``MessageTooLarge`` naming ``what`` if a frame of ``size`` bytes exceeds ``limit``."""
    if size > limit:
        raise MessageTooLarge(f"{what}: its frame is {size} bytes, over the {limit}-byte frame limit")
