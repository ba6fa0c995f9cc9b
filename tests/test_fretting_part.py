"""fretting.finger_score: one call fingers a whole GuitarScore."""

from __future__ import annotations

import symusic

from guitarformer.fretting import finger_score, fret
from guitarformer.music.score import GuitarScore


def _part(program: int = 25) -> GuitarScore:
    score = symusic.Score(480)
    track = symusic.Track(program=program)
    for i, p in enumerate([40, 45, 50, 55, 59, 64, 67, 52]):
        track.notes.append(symusic.Note(i * 240, 240, p, 90))
    score.tracks.append(track)
    return GuitarScore(score=score, capo=2)


def test_finger_score_is_frets_of_the_parts_notes_tuning_capo_and_program():
    gs = _part(program=30)
    out = finger_score(gs)
    assert gs.frets is None  # the part passed in is left alone
    assert out.frets == fret(list(gs.track.notes), gs.tuning, gs.capo, program=30)
    assert out.score is gs.score and out.capo == 2
    assert finger_score(gs, position=7).frets == fret(list(gs.track.notes), gs.tuning, 2, position=7, program=30)
    assert finger_score(gs, program=25).frets == fret(list(gs.track.notes), gs.tuning, 2, program=25)


def test_finger_score_keeps_a_parts_own_fingering_only_when_asked():
    gs = _part()
    gs.frets = [(6, 0)] * len(gs.track.notes)  # not what fret() would choose
    assert finger_score(gs, keep_own=True).frets == gs.frets
    assert finger_score(gs).frets != gs.frets
