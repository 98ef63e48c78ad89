"""The benchmark plots' colours and line styles (optigate.bench.plots draws with them).

A level's curves share its colour and the sides differ by line style (baseline solid, candidate dashed, further
sides dotted / dash-dot). With one level only (a replay, one --concurrency) there is no level to pair: each side has
its own colour as well as its line style, so baseline and candidate never look alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Line styles by side: baseline, candidate, then any further side.
SIDE_STYLES = ("-", "--", ":", "-.")


def level_colours(levels: Sequence[int]) -> dict[int, tuple[float, float, float, float]]:
    """One colour per level: matplotlib's tab10 up to ten levels, viridis beyond."""
    from matplotlib import colormaps

    ordered = sorted(set(levels))
    if len(ordered) <= 10:
        table = colormaps["tab10"]
        return {level: table(index) for index, level in enumerate(ordered)}
    ramp = colormaps["viridis"]
    return {level: ramp(index / (len(ordered) - 1) * 0.9) for index, level in enumerate(ordered)}


def side_style(index: int) -> Any:  # one of matplotlib's line style literals
    return SIDE_STYLES[index % len(SIDE_STYLES)]


@dataclass(frozen=True)
class Palette:
    """The colour of a side's curve at a level: the level's (a level's curves share it, the sides told apart by line
    style), or, with one level and several sides, the side's own (nothing to pair; the sides differ in both)."""

    levels: dict[int, Any]
    sides: tuple[Any, ...] = ()

    @classmethod
    def of(cls, levels: Sequence[int], sides: int) -> Palette:
        """For the levels measured (by any side) and the number of sides."""
        if len(set(levels)) == 1 and sides > 1:
            from matplotlib import colormaps

            table = colormaps["tab10"]
            return cls({levels[0]: "0.25"}, tuple(table(index % 10) for index in range(sides)))
        return cls(level_colours(levels))

    def colour(self, side: int, level: int) -> Any:
        return self.sides[side] if self.sides else self.levels[level]

    def side_colour(self, side: int) -> Any:
        """The colour of a side's line joining its levels (grey while colours stand for levels)."""
        return self.sides[side] if self.sides else "0.25"
