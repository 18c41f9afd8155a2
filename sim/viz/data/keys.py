"""Keys as the views name them, and which keys of a trace are the user's.

Every view names a key the one way, ``type["key"]`` (``key_label``): a key is a string the program
chose, and bare (``beater[dormant]``, ``both``, ``k``) a key like ``dormant`` or ``both`` reads as a state
of the actor, not as its key. The type is its name without the module (``counted``, not
``sim.scenarios.lab:counted``), so a label stays short enough to sit beside a lane.

The runtime keeps some state in keys of its own types (the cron claim per tick is a key of
``casty.cluster.claims:schedule_fire``): real keys with epochs, writes and schedules, which a view
chosen by default would otherwise pick (a cron run acquires a claim key per tick, so the claim key is
"the key whose owner changed most"). Every view leaves them out unless asked for by name.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_internal", "key_label", "short_type"]


def is_internal(actor: Any) -> bool:
    """A type of the runtime itself (a module under ``casty.``), not of the user's program."""
    return str(actor).startswith("casty.")


def short_type(actor: Any) -> str:
    """The type's name without its module: ``sim.scenarios.cluster:cl_ticker`` -> ``cl_ticker``."""
    return str(actor).split(":")[-1]


def key_label(actor: Any, key: Any, *, with_type: bool = True) -> str:
    """The key named as a key: ``counted["k"]``, or ``"k"`` alone (``with_type=False``) where the type is said once nearby."""
    quoted = f'"{key}"'
    return f"{short_type(actor)}[{quoted}]" if with_type else quoted
