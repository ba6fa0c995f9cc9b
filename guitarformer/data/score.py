"""GuitarScore: one guitar part as a symusic Score, plus tuning, capo and (where known) string/fret per note."""

from __future__ import annotations

from dataclasses import dataclass, field

import symusic

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


@dataclass
class GuitarScore:
    """A single guitar part.

    `score` holds exactly one track (the guitar part) with tempos and time signatures.
    `frets`, where the source knows it, has one (string, fret) per note of score.tracks[0].notes,
    in the same order; strings are numbered 1 (highest) .. len(tuning) (lowest), as in tab.
    """

    score: symusic.Score
    tuning: tuple[int, ...] = STANDARD_TUNING
    capo: int = 0
    frets: list[tuple[int, int]] | None = None
    name: str = ""
    source_format: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def track(self) -> symusic.Track:
        return self.score.tracks[0]

    @property
    def pitch_range(self) -> tuple[int, int]:
        """Lowest and highest playable MIDI pitch for this tuning and capo."""
        return min(self.tuning) + self.capo, max(self.tuning) + MAX_FRET
