"""The fretting's view of a part: (onset, duration, pitch) per note, grouped by onset."""

from __future__ import annotations

from typing import Any, Sequence

from guitarformer.music.score import UNPLAYABLE

__all__ = ["UNPLAYABLE", "group_onsets", "note_tuple"]


def note_tuple(n: Any) -> tuple[int, int, int]:
    if hasattr(n, "pitch"):
        return int(n.time), int(n.duration), int(n.pitch)
    onset, duration, pitch = n
    return int(onset), int(duration), int(pitch)


def group_onsets(notes: Sequence[tuple[int, int, int]]) -> list[list[int]]:
    """Indices of the notes, grouped by onset, in time order."""
    order = sorted(range(len(notes)), key=lambda i: (notes[i][0], -notes[i][2]))
    groups: list[list[int]] = []
    last = None
    for i in order:
        if notes[i][0] != last:
            groups.append([])
            last = notes[i][0]
        groups[-1].append(i)
    return groups

