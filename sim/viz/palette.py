"""The views' shared look: Okabe-Ito (colour-blind safe) for meaning, keys get the rest; type sizes.

Plain strings and numbers, no matplotlib: the data layer (``sim.viz.data``) names a mark's colour
with these too (a space-time event's label), and every chart draws with them, so a crash is the
same red everywhere.
"""

from __future__ import annotations

__all__ = [
    "BLUE", "SKY", "ORANGE", "GREEN", "YELLOW", "VERMILLION", "PURPLE", "GREY", "LIGHT_GREY", "GRID_GREY", "INK",
    "KEY_COLOURS", "KEY_HATCHES", "FONT", "SMALL", "key_style", "text_colour_on",
]

BLUE = "#0072B2"
SKY = "#56B4E9"
ORANGE = "#E69F00"
GREEN = "#009E73"
YELLOW = "#F0E442"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#8C8C8C"
LIGHT_GREY = "#D9D9D9"
GRID_GREY = "#C8C8C8"
INK = "#222222"

# Keys: Okabe-Ito without vermillion (kept for failures/crashes) and black, then Paul Tol's
# "muted" set. Beyond these, colours repeat with a hatch so two keys never look identical.
KEY_COLOURS = (
    BLUE, ORANGE, GREEN, PURPLE, SKY, YELLOW,
    "#332288", "#88CCEE", "#117733", "#DDCC77", "#882255", "#44AA99", "#999933", "#AA4499",
)
KEY_HATCHES = ("", "..", "xx", "\\\\")

FONT = 10
SMALL = 8.5


def key_style(index: int) -> tuple[str, str]:
    """Colour and hatch of the index-th key (colours cycle first, then hatches)."""
    colour = KEY_COLOURS[index % len(KEY_COLOURS)]
    hatch = KEY_HATCHES[(index // len(KEY_COLOURS)) % len(KEY_HATCHES)]
    return colour, hatch


def text_colour_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour``."""
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
