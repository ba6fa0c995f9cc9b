"""The parts of a song a band stream carries (vocab/song_tokens.py writes them): one per role, each stringed part
with strings a band's tab tokens can name."""

from __future__ import annotations

from collections.abc import Sequence

from guitarformer.fingering import finger_score
from guitarformer.music.guitar import BASS_TUNING, TOKEN_PITCH_RANGE
from guitarformer.music.score import UNPLAYABLE, GuitarScore
from guitarformer.music.song import Song


def pick_parts(song: Song, roles: Sequence[str]) -> list[tuple[str, GuitarScore]]:
    """The part a band stream carries for each of `roles` the song has: the one with the most notes where several
    play it (a second guitar is left out), in `roles`' order. Each stringed part has strings: a part without a
    fingering, or a bass in another tuning, is fingered (`finger_score`) in standard bass tuning, its notes below
    the tokens' lowest pitch moved up by octaves."""
    picked = []
    for role in roles:
        parts = [gs for gs in song.by_role(role) if len(gs.track.notes)]
        if not parts:
            continue
        gs = max(parts, key=lambda p: len(p.track.notes))
        if role == "bass" and (gs.tuning != BASS_TUNING or gs.frets is None or UNPLAYABLE in gs.frets):
            gs = _as_bass(gs)
        elif role == "guitar" and gs.frets is None:
            gs.frets = finger_score(gs).frets
        picked.append((role, gs))
    return picked


def _as_bass(gs: GuitarScore) -> GuitarScore:
    """A bass part in standard 4-string tuning, fingered, no note below the tokens' range (raised by octaves)."""
    score = gs.score.copy()
    for n in score.tracks[0].notes:
        while n.pitch < TOKEN_PITCH_RANGE[0]:
            n.pitch += 12
    score.tracks[0].notes.sort(key=lambda n: (n.time, n.pitch))
    bass = GuitarScore(score=score, tuning=BASS_TUNING, name=gs.name, source_format=gs.source_format,
                       extra=dict(gs.extra))
    bass.frets = finger_score(bass).frets
    return bass
