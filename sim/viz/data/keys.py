"""Which keys of a trace are the user's: the views draw the program's keys and leave the runtime's own out.

The runtime keeps some state in keys of its own types (the cron claim per tick is a key of
``casty.cluster.claims:schedule_fire``): real keys with epochs, writes and schedules, which a view
chosen by default would otherwise pick (a cron run acquires a claim key per tick, so the claim key is
"the key whose owner changed most"). Every view leaves them out unless asked for by name.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_internal"]


def is_internal(actor: Any) -> bool:
    """A type of the runtime itself (a module under ``casty.``), not of the user's program."""
    return str(actor).startswith("casty.")
