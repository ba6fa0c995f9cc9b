"""evaluation/form.py: the share of a piece's opening bars that repeat an earlier bar exactly."""

from __future__ import annotations

import symusic

from guitarformer.evaluation.form import bar_notes, form_report, repeat_share

TPQ = 480


def _score(bars: list[list[tuple[int, int, int]]], ts: list[tuple[int, int, int]] = ((0, 4, 4),)) -> symusic.Score:
    """A score whose bar k holds notes (onset in quarters from the bar start, duration in quarters, pitch)."""
    s = symusic.Score(TPQ)
    for t, n, d in ts:
        s.time_signatures.append(symusic.TimeSignature(t, n, d))
    track = symusic.Track("g", 25)
    start = 0
    for notes in bars:
        for on, du, p in notes:
            track.notes.append(symusic.Note(start + int(on * TPQ), int(du * TPQ), p, 80))
        start += 4 * TPQ
    s.tracks.append(track)
    return s


RIFF = [(0, 1, 40), (1, 1, 43), (2, 2, 45)]


def test_exact_repeats_count_and_near_misses_do_not():
    shifted = [(0, 1, 40), (1, 1, 43), (2.5, 1.5, 45)]  # one note half a beat late
    transposed = [(on, du, p + 2) for on, du, p in RIFF]
    held = [(0, 1, 40), (1, 1, 43), (2, 1, 45)]  # one note held shorter
    bars = bar_notes(_score([RIFF, shifted, RIFF, [], transposed, [], held, RIFF]))
    assert len(bars) == 8
    assert repeat_share(bars) == 2 / 8  # bars 3 and 8; the empty bar 6 repeats nothing


def test_only_the_first_sixteen_bars_count_and_short_pieces_count_all_their_bars():
    assert repeat_share(bar_notes(_score([RIFF] * 20))) == 15 / 16
    assert len(bar_notes(_score([RIFF] * 20), max_bars=4)) == 4
    assert repeat_share(bar_notes(_score([RIFF] * 3))) == 2 / 3
    assert repeat_share([]) is None and bar_notes(symusic.Score(TPQ)) == []


def test_bars_follow_the_time_signature():
    # In 2/4 the 4/4 riff is two different half bars, each repeated once over two 4/4 bars.
    bars = bar_notes(_score([RIFF, RIFF], ts=[(0, 2, 4)]))
    assert len(bars) == 4 and repeat_share(bars) == 2 / 4


def test_form_report_averages_over_pieces_with_notes():
    rep = form_report([_score([RIFF, RIFF]), _score([RIFF, [(0, 4, 50)]]), symusic.Score(TPQ)])
    assert rep.pieces == 2 and rep.bars == 4 and abs(rep.repeat_share - (0.5 + 0.0) / 2) < 1e-12
