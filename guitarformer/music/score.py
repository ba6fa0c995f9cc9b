"""GuitarScore: one guitar part as a symusic Score, plus tuning, capo and (where known) string, fret and the
playing techniques of each note."""

from __future__ import annotations

from dataclasses import dataclass, field

import symusic

from guitarformer.music.guitar import BASS_PROGRAMS, GUITAR_PROGRAMS, STANDARD_TUNING, playable_range


@dataclass(frozen=True)
class Technique:
    """How one note is played, beyond its string and fret: the per-note record every reader fills.

    Bends are points along the note: (position 0..1 of the note's length, amount in quarter tones above the
    fretted pitch), e.g. a full-step bend and release is ((0, 0), (0.5, 4), (1, 0)). Slides and legato link a
    note to the previous (slide in, hammer-on/pull-off) or next (slide out) note on the same string.
    """

    bend: tuple[tuple[float, float], ...] = ()
    slide_in: str = ""  # "" | "below" | "above": slides into the note from below/above
    slide_out: str = ""  # "" | "shift" | "legato" (to the next note on the string) | "down" | "up" (off the note)
    hammer: bool = False  # hammer-on or pull-off from the previous note on this string (the pitches say which)
    palm_mute: bool = False
    dead: bool = False  # muted, no pitch: "x" in tab
    ghost: bool = False
    harmonic: str = ""  # "" | "natural" | "artificial" | "pinch" | "tap" | "semi" | "feedback"
    vibrato: bool = False
    let_ring: bool = False
    tap: bool = False

    @property
    def release(self) -> bool:
        """A bend that comes back down within the note."""
        return len(self.bend) > 1 and max(a for _, a in self.bend) > self.bend[-1][1]

    def __bool__(self) -> bool:
        return self != PLAIN


PLAIN = Technique()  # a note played plainly
UNPLAYABLE: tuple[int, int] = (-1, -1)  # the (string, fret) of a note no string of the tuning can take
ROLES = ("guitar", "bass", "drums", "other")  # what a part plays in a song


@dataclass
class GuitarScore:
    """A single guitar part.

    `score` holds exactly one track (the guitar part) with tempos and time signatures.
    `frets`, where the source knows it, has one (string, fret) per note of score.tracks[0].notes,
    in the same order; strings are numbered 1 (highest) .. len(tuning) (lowest), as in tab.
    `techniques`, where the source knows them, has one Technique per note in the same order.
    A drum part (read with tracks="all") is one too: its track is a drum track (is_drum), each note's pitch the
    General MIDI kit piece it strikes, with no tuning (()) and no frets.
    """

    score: symusic.Score
    tuning: tuple[int, ...] = STANDARD_TUNING
    capo: int = 0
    frets: list[tuple[int, int]] | None = None
    techniques: list[Technique] | None = None
    name: str = ""
    source_format: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def track(self) -> symusic.Track:
        return self.score.tracks[0]

    @property
    def is_drum(self) -> bool:
        """A drum kit part (General MIDI percussion): no strings, no tab."""
        return bool(self.score.tracks) and self.track.is_drum

    @property
    def program(self) -> int:
        """The General MIDI program (0-based) the part is played with (a drum part: its kit, 0 = the standard kit)."""
        return int(self.track.program)

    @property
    def role(self) -> str:
        """'guitar', 'bass', 'drums' or 'other' (ROLES): as the reader found it, else from the track's program."""
        role = self.extra.get("role")
        if role in ROLES:
            return role
        if self.is_drum:
            return "drums"
        return "bass" if self.program in BASS_PROGRAMS else "guitar" if self.program in GUITAR_PROGRAMS else "other"

    @property
    def pitch_range(self) -> tuple[int, int]:
        """Lowest and highest playable MIDI pitch for this tuning and capo."""
        return playable_range(self.tuning, self.capo)
