"""finger_score: the one call that fingers a whole guitar part (GuitarScore) with `fret()`."""

from __future__ import annotations

from dataclasses import replace

from guitarformer.fingering.viterbi import fret
from guitarformer.music.score import GuitarScore


def finger_score(gs: GuitarScore, position: int | None = None, program: int | None = None,
                 keep_own: bool = False) -> GuitarScore:
    """`gs` with a (string, fret) for every note (a copy: `gs` is left as it is).

    The fingering is `fret()`'s for the part's notes, tuning and capo; `position` and `program` as `fret()` takes
    them (`program` defaults to the part's own General MIDI program, which picks the fitted costs). `keep_own`:
    a part that has a fingering already (a tab, a Guitar Pro file) keeps it, and only parts without one are
    fingered.
    """
    if keep_own and gs.frets is not None:
        return replace(gs)
    program = gs.track.program if program is None else program
    return replace(gs, frets=fret(list(gs.track.notes), gs.tuning, gs.capo, position=position, program=program))
