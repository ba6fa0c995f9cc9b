"""A riff's parts as the page and the JSON API name them (guitars, bass, drums: the tracks alphaTab draws and
plays, in the order of the riff's Guitar Pro file), and the part a Regenerate fills.

Each part: {"index" (its track in the file, from 0), "name", "kind" ('guitar', 'bass', 'drums' or 'other'),
"instrument" (its General MIDI sound), "tuning" (plain words), "strings", "capo", "notes", "edited" (the part the
model wrote: the continued or regenerated one)}.
"""

from __future__ import annotations

from typing import Any

from guitarformer.errors import GuitarformerError
from guitarformer.music.guitar import BASS_TUNING, TUNINGS, pitch_name, program_name
from guitarformer.music.score import GuitarScore

NAMED_TUNINGS = {**{notes: name.replace("-", " ") for name, notes in TUNINGS.items()}, BASS_TUNING: "standard bass"}


def part_name(gs: GuitarScore) -> str:
    """The part's track name as its Guitar Pro file names it (render/gp5.py), else its instrument."""
    return (gs.extra.get("track_name") or gs.name or "").strip() or program_name(gs.program, gs.is_drum)


def tuning_words(gs: GuitarScore) -> str:
    """'standard: E2 A2 D3 G3 B3 E4', 'drop d: D2 A2 D3 G3 B3 E4, capo 2', 'drum kit (no strings)'."""
    if gs.is_drum:
        return "drum kit (no strings)"
    notes = " ".join(pitch_name(p) for p in gs.tuning)
    name = NAMED_TUNINGS.get(tuple(gs.tuning), f"{len(gs.tuning)} strings")
    return f"{name}: {notes}" + (f", capo {gs.capo}" if gs.capo else "")


def parts_json(parts: list[GuitarScore], edited: int) -> list[dict[str, Any]]:
    """Every part of a riff, in its file's track order."""
    return [{"index": k, "name": part_name(gs), "kind": gs.role, "instrument": program_name(gs.program, gs.is_drum),
             "tuning": tuning_words(gs), "strings": 0 if gs.is_drum else len(gs.tuning), "capo": gs.capo,
             "notes": len(gs.track.notes), "edited": k == edited} for k, gs in enumerate(parts)]


def fill_part(parts: list[GuitarScore], part: int) -> GuitarScore:
    """The part (index from 0) a Regenerate fills: one of the riff's stringed parts."""
    if not 0 <= part < len(parts):
        raise GuitarformerError(f"part {part}: the riff has parts 0-{len(parts) - 1}",
                                "send the index of one of the riff's parts (its \"parts\" list)")
    gs = parts[part]
    if gs.is_drum:
        raise GuitarformerError(f"part {part} ({part_name(gs)}) is a drum part: drums have no strings to regenerate",
                                "choose a guitar or bass part")
    return gs


def track_of(parts: list[GuitarScore], part: int) -> str:
    """The part's number as `infill --track` counts them with --tracks all: among the stringed parts, from 1."""
    return str(sum(1 for gs in parts[:part] if not gs.is_drum) + 1)
