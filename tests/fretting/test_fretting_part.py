"""fretting.finger_score: one call fingers a whole GuitarScore."""

from __future__ import annotations

import symusic

from guitarformer.fingering import finger_score, fret
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


def test_the_lazy_hand_window_moves_as_its_rule_says():
    """viterbi._window_move against its rule written out case by case, NaN (no hand yet, nothing fretted) included."""
    import math

    import numpy as np

    from guitarformer.fingering.viterbi import _window_move

    def rule(h, lo, hi):
        if math.isnan(lo):
            return h
        if math.isnan(h) or lo < h:
            return lo
        return min(lo, hi - 3) if hi > h + 3 else h

    values = [math.nan, *range(1, 25)]
    spans = [(lo, hi) for lo in values for hi in values if math.isnan(lo) == math.isnan(hi) and not lo > hi]
    h = np.array(values)[:, None]
    lo = np.array([a for a, _ in spans])[None, :]
    hi = np.array([b for _, b in spans])[None, :]
    with np.errstate(invalid="ignore"):
        new, moved = _window_move(h, lo, hi)
    want = np.array([[rule(a, b, c) for b, c in spans] for a in values])
    np.testing.assert_array_equal(new, want)
    np.testing.assert_array_equal(moved, np.abs(want - h))


def test_chord_candidates_kept_between_parts_are_those_of_each_parts_costs_and_guitar():
    """fret() keeps each chord's candidate fingerings for later parts (chords._CANDS), per cost weights and guitar:
    a part fingered after others gets what it gets alone."""
    from dataclasses import replace

    from guitarformer.fingering.chords import _CANDS
    from guitarformer.fingering.costs import DEFAULT_COSTS, DISTORTED_COSTS

    chords = [(k * 240, 240, p) for k, p in enumerate([40, 47, 52, 45, 52, 57, 43, 50, 55, 59, 64, 67])]
    chords += [(3000, 480, p) for p in (40, 47, 52, 55, 59, 64)] + [(3480, 480, p) for p in (45, 52, 57, 61, 64)]
    high = replace(DEFAULT_COSTS, fret=tuple(-2.0 * k for k in range(25)), first_pass=None)  # high frets cheap
    asks = [dict(), dict(costs=DISTORTED_COSTS), dict(costs=high), dict(tuning=(38, 45, 50, 55, 59, 64)),
            dict(capo=3), dict(position=7)]
    alone = []
    for ask in asks:
        _CANDS.clear()
        alone.append(fret(chords, **ask))
    _CANDS.clear()
    for _ in range(2):  # in turn, every list kept from the asks before
        assert [fret(chords, **ask) for ask in asks] == alone
    assert len(_CANDS) > 1 and alone[2] != alone[0]


def test_fitting_adds_a_human_fingering_past_the_top_fret_to_the_candidates():
    """viterbi._decode with `gold` (bench_fretting --fit): each onset's human chord is a candidate, even one whose fret
    is past max_fret, and the Viterbi's hand tables reach it."""
    from guitarformer.fingering import viterbi

    notes = [(k * 240, 240, p) for k, p in enumerate([64, 88, 90, 64, 67])]
    gold = [(5, 0), (5, 24), (5, 26), (5, 0), (5, 3)]  # string index 5 = the high E string
    groups, chosen = viterbi._decode(notes, (40, 45, 50, 55, 59, 64), 0, 24, viterbi.DEFAULT_COSTS, gold=gold)
    assert len(chosen) == 5 and chosen[2].assign == ((5, 26),)  # fret 26 is the only way to play it here
