"""vocab/controls.py counts bars as music/bars.py does, so its bars are the bars of miditok's Bar tokens (a time
signature inside a bar takes effect at the next bar line)."""

from __future__ import annotations

import pytest
import symusic

from guitarformer.config import DataConfig
from guitarformer.vocab.controls import bar_controls, controls_per_bar, notes_of
from guitarformer.vocab.tab_tokens import bar_notes
from guitarformer.vocab.tokenization import build_tokenizer, decode_guitar, encode
from guitarformer.fingering import finger_score
from guitarformer.music.score import GuitarScore

TPQ = 480


def _part(signatures, onsets) -> GuitarScore:
    score = symusic.Score(TPQ)
    for t, num, den in signatures:
        score.time_signatures.append(symusic.TimeSignature(t, num, den))
    score.tempos.append(symusic.Tempo(0, 120))
    track = symusic.Track(program=25)
    for i, t in enumerate(onsets):
        for k in range(1 + (i % 3 == 0)):  # every third onset a dyad, so Poly varies between bars
            track.notes.append(symusic.Note(t, TPQ // 2, 52 + 7 * k + (i % 5), 90))
    score.tracks.append(track)
    return finger_score(GuitarScore(score=score))


@pytest.mark.parametrize("signatures, onsets", [
    # 3/4 written in the middle of bar 2: bar 2 stays 4/4, 3/4 from bar 3 on
    ([(0, 4, 4), (6 * TPQ, 3, 4)], [i * TPQ // 2 for i in range(30)]),
    # on a bar line: 6/8 from bar 3 (after two bars of 3/4), sparse notes and an empty bar
    ([(0, 3, 4), (6 * TPQ, 6, 8)], [0, TPQ, 2 * TPQ, 3 * TPQ, 9 * TPQ, 9 * TPQ + TPQ // 2, 13 * TPQ]),
])
def test_controls_bars_are_the_bar_tokens_bars(signatures, onsets):
    tok = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    gs = _part(signatures, onsets)
    ids = encode(tok, gs)
    from_tokens, lengths, tpq = bar_notes(tok, ids, gs.tuning, gs.capo)
    want = [bar_controls(b, tpq, n) for b, n in zip(from_tokens, lengths)]
    played = decode_guitar(tok, ids, gs.tuning, gs.capo)  # the notes as the tokens hold them
    # the signatures as the source wrote them (mid-bar too), not as miditok moved them to a bar line on decoding
    got = controls_per_bar(notes_of(played), tpq, [(t * tpq // TPQ, num, den) for t, num, den in signatures])
    assert len(from_tokens) >= 4 and got == want
