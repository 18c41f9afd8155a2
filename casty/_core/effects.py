"""What an effect record (``ctx.effect``) may carry: a key and plain JSON details.

An effect row must read the same in a simulated trace, in a node's JSON facts and in a log,
and must survive a round trip through JSON Lines unchanged (a check compares details read
back from a file). So the details are held to plain JSON values at the call, where the
actor's author can see the mistake, instead of being turned into ``repr`` strings later.
Tuples become lists, as JSON would give them back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import SchemaError

__all__ = ["MAX_DEPTH", "effect_key", "plain_details"]

MAX_DEPTH = 32
"""How deeply details may nest: deeper is refused (a self-containing list would never end)."""

_PLAIN = "None, bool, int, finite float, str, list, or dict with str keys"


def effect_key(key: object) -> str:
    """The effect's key, checked: a non-empty string that is valid unicode (it names the effect everywhere)."""
    if type(key) is not str:
        raise SchemaError(f"an effect key must be a str, got {type(key).__qualname__} {key!r}")
    if not key:
        raise ValueError("an effect key must not be empty: it is the effect's identity (e.g. 'charge:order-17')")
    _utf8(key, key, "the key")
    return key


def plain_details(effect: str, details: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``details`` as plain JSON values; ``SchemaError`` naming the first field that is not one."""
    return {name: _plain(effect, value, f"details.{name}", 1) for name, value in details.items()}


def _plain(effect: str, value: Any, path: str, depth: int) -> Any:
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is str:
        _utf8(effect, value, path)
        return value
    if kind is float:
        if not math.isfinite(value):
            raise SchemaError(f"effect {effect!r}: {path} is {value!r}; JSON has no NaN or infinity")
        return value
    if depth >= MAX_DEPTH and kind in (list, tuple, dict):
        raise SchemaError(f"effect {effect!r}: {path} nests deeper than {MAX_DEPTH} levels")
    if kind is list or kind is tuple:
        return [_plain(effect, item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if kind is dict:
        out: dict[str, Any] = {}
        for name, item in value.items():
            if type(name) is not str:
                raise SchemaError(f"effect {effect!r}: {path} has the key {name!r} ({type(name).__qualname__}); JSON keys are str")
            _utf8(effect, name, f"a key of {path}")
            out[name] = _plain(effect, item, f"{path}.{name}" if name.isidentifier() else f"{path}[{name!r}]", depth + 1)
        return out
    raise SchemaError(f"effect {effect!r}: {path} is a {kind.__qualname__} ({value!r:.60}), not a plain JSON value ({_PLAIN})")


def _utf8(effect: str, text: str, path: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise SchemaError(f"effect {effect!r}: {path} is not valid unicode ({exc.reason}): {ascii(text)}") from None
