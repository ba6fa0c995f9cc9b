"""Facts about the instrument, defined once: tunings, the fret range, General MIDI programs, ticks."""

from __future__ import annotations

from guitarformer.errors import GuitarformerError

TPQ = 480  # ticks per quarter for every score we build ourselves (Guitar Pro, music21, ASCII tab, corpus)

# MIDI pitches of the open strings, lowest string first.
STANDARD_TUNING: tuple[int, ...] = (40, 45, 50, 55, 59, 64)
TUNINGS: dict[str, tuple[int, ...]] = {
    "standard": STANDARD_TUNING,
    "drop-d": (38, 45, 50, 55, 59, 64),
    "half-step-down": (39, 44, 49, 54, 58, 63),
    "d-standard": (38, 43, 48, 53, 57, 62),
    "drop-c": (36, 43, 48, 53, 57, 62),
    "open-g": (38, 43, 50, 55, 59, 62),
    "open-d": (38, 45, 50, 54, 57, 62),
    "dadgad": (38, 45, 50, 55, 57, 62),
    "seven-string": (35, 40, 45, 50, 55, 59, 64),
}
GUITAR_PROGRAM = 25  # General MIDI: Acoustic Guitar (steel)
MAX_FRET = 24
GUITAR_PROGRAMS = range(24, 32)  # General MIDI guitars, 0-based
BASS_PROGRAMS = range(32, 40)
BASS_TUNING: tuple[int, ...] = (28, 33, 38, 43)  # E1 A1 D2 G2
PITCH_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")


def pitch_name(pitch: int) -> str:
    """'E2' for MIDI 40 (scientific pitch notation, C4 = 60)."""
    return f"{PITCH_NAMES[pitch % 12]}{pitch // 12 - 1}"


def parse_tuning(spec: str) -> tuple[int, ...]:
    """A tuning name (standard, drop-d, ...) or MIDI numbers low to high ("38,45,50,55,59,64")."""
    key = spec.strip().lower().replace("_", "-").replace(" ", "-")
    if key in TUNINGS:
        return TUNINGS[key]
    try:
        notes = tuple(int(x) for x in spec.split(","))
    except ValueError:
        notes = ()
    if not 4 <= len(notes) <= 8 or not all(20 <= n <= 90 for n in notes):
        raise GuitarformerError(f"unknown tuning {spec!r}",
                                f"use one of {', '.join(TUNINGS)} or MIDI numbers low to high, e.g. 38,45,50,55,59,64")
    return tuple(sorted(notes))
