"""Song: the parts of one file the toolkit reads and writes (guitars, bass, drums), on one bar grid.

Every part is a GuitarScore (a drum part too: its track is a drum track, see music.drums) and carries the song's
tempos and time signatures, the same in each, as the readers build them; the Song holds them together with the
role each part plays. A single guitar part, the common case, is a Song of one part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import symusic

from guitarformer.music.score import ROLES, GuitarScore


@dataclass
class Song:
    """The parts of a file, in its order, on one bar grid (the first part's tempos and time signatures)."""

    parts: list[GuitarScore]
    name: str = ""
    source_format: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.parts:
            raise ValueError("a Song needs at least one part")
        tpqs = {gs.score.ticks_per_quarter for gs in self.parts}
        if len(tpqs) > 1:
            raise ValueError(f"a Song's parts share one grid: ticks per quarter {sorted(tpqs)} differ")

    @property
    def ticks_per_quarter(self) -> int:
        return self.parts[0].score.ticks_per_quarter

    @property
    def tempos(self) -> symusic.core.TempoTickList:
        return self.parts[0].score.tempos

    @property
    def time_signatures(self) -> symusic.core.TimeSignatureTickList:
        return self.parts[0].score.time_signatures

    @property
    def roles(self) -> list[str]:
        """Each part's role ('guitar', 'bass', 'drums' or 'other'), in order."""
        return [gs.role for gs in self.parts]

    def by_role(self, role: str) -> list[GuitarScore]:
        """The parts that play `role` (one of music.score.ROLES), in order."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        return [gs for gs in self.parts if gs.role == role]

    @property
    def guitars(self) -> list[GuitarScore]:
        return self.by_role("guitar")

    @property
    def basses(self) -> list[GuitarScore]:
        return self.by_role("bass")

    @property
    def drums(self) -> list[GuitarScore]:
        return self.by_role("drums")

    @property
    def stringed(self) -> list[GuitarScore]:
        """The parts with strings (everything but drums): the ones a tab shows."""
        return [gs for gs in self.parts if not gs.is_drum]

    def end(self) -> int:
        """The tick where the last note of any part ends."""
        return max((n.time + n.duration for gs in self.parts for n in gs.track.notes), default=0)
