"""Transposition augmentation on tab layout 3 (data/transpose.py): a moved window is what `encode` writes for the
moved notes (each on its string, its fret moved by the shift, a String exactly where a note leaves its lowest-fret
string), cut to the length training needs; layout 2 keeps every token in place."""

from __future__ import annotations

from pathlib import Path

import miditok
import numpy as np
import pytest
import symusic
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.config import DataConfig
from guitarformer.vocab.controls import PlayedNote, bar_controls
from guitarformer.data.dataset import DecoderWindows, PairLayout, Seq2SeqPairs, TokenSplit
from guitarformer.vocab.infill import FillIds, unfold
from guitarformer.vocab.tab_tokens import (
    TabREMI,
    closes_note,
    control_params,
    decode_tab,
    insert_controls,
    lowest_fret_string,
    strip_controls,
)
from guitarformer.vocab.tokenization import encode, tokenizer_params
from guitarformer.data.transpose import PitchShifter
from guitarformer.fingering import fret
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS, pitch_of
from guitarformer.music.score import GuitarScore
from guitarformer.readers import read_guitar
from helpers.tiny_runs import token_dataset

FIX = Path(__file__).parents[1] / "fixtures"
PIECES = ("tabs/riff.txt", "tabs/drop_d.txt", "tabs/seven_string.txt", "io/drop_d_capo.gp5")


def tab_tokenizer(layout: int = 3, controls: bool = True, velocities: bool = False) -> TabREMI:
    params = tokenizer_params(DataConfig(tokenizer="TabREMI", tab_layout=layout), dynamics=velocities)
    return TabREMI(miditok.TokenizerConfig(**params, **(control_params(["metal"]) if controls else {})))


@pytest.fixture(scope="module")
def tok() -> TabREMI:
    return tab_tokenizer()


def fretted(name: str) -> GuitarScore:
    gs = read_guitar(FIX / name)[0]
    if gs.frets is None:
        gs.frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
    return gs


def moved(gs: GuitarScore, s: int) -> GuitarScore:
    """The part a guitarist plays `s` semitones higher: every note on its string, its fret moved by s."""
    score = gs.score.copy()
    for n in score.tracks[0].notes:
        n.pitch += s
    return GuitarScore(score=score, tuning=gs.tuning, capo=gs.capo, frets=[(st, f + s) for st, f in gs.frets],
                       techniques=gs.techniques)


def long_piece() -> GuitarScore:
    """Eight bars in drop D with capo 2, frets 3-9 on every string: notes on their lowest-fret string and off it,
    so shifts both ways give Strings to some notes and take them from others."""
    tuning, capo = TUNINGS["drop-d"], 2
    score = symusic.Score(480)
    score.tempos.append(symusic.Tempo(0, 100))
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    track = symusic.Track(program=25)
    cycle = [(6, 3), (5, 5), (4, 4), (5, 6), (6, 5), (4, 7), (3, 5), (2, 6), (5, 3), (4, 5), (3, 4), (2, 3), (1, 5),
             (6, 7), (5, 8), (4, 9)]
    frets = cycle * 2
    for k, (st, f) in enumerate(frets):
        track.notes.append(symusic.Note(k * 480, 480, pitch_of(st, f, tuning, capo), 90))
    score.tracks.append(track)
    return GuitarScore(score=score, tuning=tuning, capo=capo, frets=frets)


def on_the_neck(gs: GuitarScore) -> bool:
    return all(0 <= f <= 24 for _, f in gs.frets)


def tokens(tok, gs: GuitarScore, controls: bool = True) -> list[int]:
    ids = encode(tok, gs)
    return insert_controls(tok, ids, gs, "metal") if controls else ids


def written_strings(tok, ids: list[int]) -> list[bool]:
    """Whether each note (each closing Duration) has a String token."""
    toks = [tok[int(i)] for i in ids] + [""]
    return [toks[j + 1].startswith("String_") for j in range(len(ids)) if closes_note(toks, j, False)]


def shift_of(tok, before, after) -> int:
    """The shift between the first Pitch of two token lists."""
    first = [next(int(tok[int(i)][6:]) for i in x if tok[int(i)].startswith("Pitch_")) for x in (before, after)]
    return first[1] - first[0]


def window_of(tok, source: list[int], target: list[int], i: int, length: int) -> list[int]:
    """The window of `target` (source moved, canonical) that the window of `source` from index i stands for: every
    token but a String maps to one, so it starts after the target's copy of the last one before i (and after that
    token's String, where the source's String before i is still there)."""
    is_string = [tok[int(t)].startswith("String_") for t in target]
    r = sum(not tok[int(t)].startswith("String_") for t in source[:i])
    k = [j for j, s in enumerate(is_string) if not s][r - 1] + 1 if r else 0
    if i and tok[int(source[i - 1])].startswith("String_") and k < len(target) and is_string[k]:
        k += 1
    return target[k: k + length]


def bar_positions(tok, ids: list[int], guitar) -> list[tuple[str, str]]:
    """(the CtrlPos written after each Bar, the one bar_controls gives for the notes that bar holds whole)."""
    toks = [tok[int(i)] for i in ids]
    score, strings, _ = decode_tab(tok, [i for i, t in zip(ids, toks) if not t.startswith("Ctrl")], guitar)
    notes = list(score.tracks[0].notes) if score.tracks else []
    closing = [j for j in range(len(toks)) if closes_note(toks, j, tok.config.use_velocities)]
    bars = [j for j, t in enumerate(toks) if t == "Bar_None"]
    out = []
    for k, b in enumerate(bars):
        end = bars[k + 1] if k + 1 < len(bars) else len(toks)
        asked = next((t for t in toks[b + 1: min(end, b + 8)] if t.startswith("CtrlPos_")), None)
        held = [PlayedNote(n.time, n.duration, n.pitch, s, n.pitch - pitch_of(s, 0, guitar[0], guitar[1]))
                for n, s, j in zip(notes, strings, closing) if b < j < end]
        if asked and held:
            out.append((asked, f"CtrlPos_{bar_controls(held, score.ticks_per_quarter, 1920)['Pos']}"))
    return out


def test_lowest_fret_tables_are_lowest_fret_string(tok):
    sh = PitchShifter(tok, 1)
    for t, tuning in enumerate(sh.tunings):
        for capo in range(13):
            low = sh._guitar(t, capo)[1]
            assert low[20:110].tolist() == [lowest_fret_string(tuning, capo, p) for p in range(20, 110)]
    assert {tuple(x) for x in sh.tunings} >= set(TUNINGS.values())


@pytest.mark.parametrize("layout", [3, 2])
def test_a_moved_piece_is_what_encode_writes_for_the_moved_notes(layout):
    """Whole pieces in four guitars (drop D with capo 2, seven strings): each shift gives exactly the tokens of the
    moved part, controls included (CtrlPos from the moved frets, the key moved), and decodes to the same strings.
    Layout 3 gives some notes a String and takes it from others; layout 2 keeps every String and the length."""
    tok = tab_tokenizer(layout)
    sh = PitchShifter(tok, 7)
    changes, shifts = set(), set()
    for gs in [fretted(name) for name in PIECES] + [long_piece()]:
        ids = tokens(tok, gs)
        for seed in range(12):
            out = sh(np.array(ids), torch.Generator().manual_seed(seed)).tolist()
            s = shift_of(tok, ids, out)
            shifts.add(s)
            assert on_the_neck(moved(gs, s))  # no fret leaves the neck
            assert out == tokens(tok, moved(gs, s)), s
            score, strings, _ = decode_tab(tok, strip_controls(tok, out)[1:-1], (gs.tuning, gs.capo))
            assert strings == [st for st, _ in gs.frets]
            assert [n.pitch for n in score.tracks[0].notes] == [n.pitch + s for n in gs.track.notes]
            changes.update(zip(written_strings(tok, ids), written_strings(tok, out)))
            assert layout == 3 or len(out) == len(ids)
    assert len(shifts) > 5
    assert changes == ({(False, False), (False, True), (True, False), (True, True)} if layout == 3 else {(True, True)})


@pytest.mark.slow
def test_windows_are_the_moved_pieces_windows():
    """Windows from anywhere in a piece (inside a note too), read with the shifter's lead and slack and cut to a
    length: each is the same window of the moved part's tokens, exactly `length` long where the part goes on, its
    CtrlPos true of the bars it holds. Where a window has dropped its tuning and capo, `heads` (the piece's opening
    controls) gives them; without controls the guitar is standard. With a Velocity on every note too."""
    plain = tab_tokenizer(controls=False)
    for tok, parts in ((plain, PIECES[:2]), (tab_tokenizer(), PIECES + ("long",)),
                       (tab_tokenizer(velocities=True), ("long",))):
        sh = PitchShifter(tok, 9)
        controls = tok is not plain
        for name in parts:
            gs = long_piece() if name == "long" else fretted(name)
            ids = tokens(tok, gs, controls)
            heads = [np.array(ids[1:5])] if controls else None  # the four piece controls after BOS
            rng = np.random.default_rng(0)
            checked = 0
            for seed in range(120):
                length = int(rng.integers(4, 60))
                i = int(rng.integers(5 if controls else 1, len(ids) - 2))  # past the piece controls: none in the window
                lead = sh.lead(np.array(ids), i)
                w = np.concatenate([lead, ids[i: i + length + sh.slack(length)]])
                out = sh(w, torch.Generator().manual_seed(seed), length, slice(0, len(lead)), heads).tolist()
                if not any(tok[t].startswith("Pitch_") for t in ids[i: i + length]):
                    assert out == ids[i: i + length]  # nothing to move
                if not any(tok[t].startswith("Pitch_") for t in out):
                    continue  # (or the Strings the shift added before it pushed the window's last Pitch out)
                s = shift_of(tok, ids[i:], out)
                if not on_the_neck(moved(gs, s)):  # fine for this window's notes, not for the whole part's
                    continue
                target = tokens(tok, moved(gs, s), controls)
                want = window_of(tok, ids, target, i, length)
                no_pos = [t for t in want if not tok[t].startswith("CtrlPos_")]
                assert [t for t in out if not tok[t].startswith("CtrlPos_")] == no_pos, (name, i, length, s)
                assert len(out) == len(want)
                # The window's last note may have its String just past it: read it for that note's bar.
                k = len(target) - len(window_of(tok, ids, target, i, len(target)))
                held = out + [t for t in target[k + len(out): k + len(out) + 1] if tok[t].startswith("String_")]
                for asked, true in bar_positions(tok, held, (gs.tuning, gs.capo)) if s else ():  # 0: as it was
                    assert asked == true, (name, i, length, s)
                checked += 1
            assert checked > 40


def test_the_draw_reads_the_notes_returned_not_the_slack():
    """A line at fret 3 of the A string with a note at fret 22 after it: a window cut before that note moves up
    to 9 semitones, one that returns it however many Strings the shift adds before it (at most one a note) only 2."""
    tok = tab_tokenizer(controls=False)
    score = symusic.Score(480)
    track = symusic.Track(program=25)
    frets = [(5, 3)] * 6 + [(1, 22)]
    for k, (s, f) in enumerate(frets):
        track.notes.append(symusic.Note(k * 480, 480, pitch_of(s, f, STANDARD_TUNING), 90))
    score.tracks.append(track)
    ids = np.array(encode(tok, GuitarScore(score, frets=frets)))
    high = int(np.nonzero(ids == tok["Pitch_86"])[0][0])
    sh = PitchShifter(tok, 9)
    for length, top in ((high, 9), (high + 1 + 6, 2)):
        shifts = {shift_of(tok, ids, sh(ids, torch.Generator().manual_seed(seed), length)) for seed in range(80)}
        assert max(shifts) == top and min(shifts) == -3


def test_layout_2_windows_keep_every_token_in_place():
    tok = tab_tokenizer(2)
    sh = PitchShifter(tok, 9)
    assert sh.slack(100) == 0 and len(sh.lead(np.arange(50), 20)) == 0
    ids = np.array([i for name in PIECES for i in tokens(tok, fretted(name))] + tokens(tok, long_piece()))
    for seed in range(40):
        i = seed * 7 % (len(ids) - 60)
        out = sh(ids[i: i + 60], torch.Generator().manual_seed(seed))
        s = shift_of(tok, ids[i:], out)
        table = sh.tables[s][ids[i: i + 60]]
        assert len(out) == 60
        assert np.array_equal(out[~sh.is_pos[table]], table[~sh.is_pos[table]])  # only CtrlPos is written again


@pytest.mark.parametrize("layout", [2, 3])
def test_a_tuning_the_controls_call_other_is_not_moved(layout):
    """A piece in a tuning none of TUNINGS names is written `CtrlTuning_other`: its open strings are not in the
    tokens, so its frets (and in layout 3 its lowest-fret strings) cannot be moved truly, and it stays where it is;
    the same notes in a named tuning do move."""
    tok = tab_tokenizer(layout)
    sh = PitchShifter(tok, 7)
    gs = long_piece()
    odd = GuitarScore(score=gs.score, tuning=(38, 43, 50, 55, 57, 64), capo=0, frets=None)  # D G D G A E
    odd.frets = fret(odd.track.notes, odd.tuning, odd.capo, program=odd.track.program)
    ids = tokens(tok, odd)
    assert tok.vocab["CtrlTuning_other"] in ids
    assert all(sh(np.array(ids), torch.Generator().manual_seed(seed)).tolist() == ids for seed in range(20))
    named = tokens(tok, gs)
    assert {shift_of(tok, named, sh(np.array(named), torch.Generator().manual_seed(seed))) for seed in range(20)} \
        != {0}


def _dataset(tmp_path: Path, tok, seqs: list[list[int]]) -> TokenSplit:
    return TokenSplit(token_dataset(tmp_path / "ds", tok, seqs), "train")


def test_decoder_windows_are_moved_windows_of_the_stream(tmp_path, tok):
    """A layout-3 dataset in drop D with capo 2, every control dropped: each row is T + 1 tokens of the moved
    stream (the capo read from the pieces' own controls), x and y one apart."""
    gs = long_piece()
    split = _dataset(tmp_path, tok, [tokens(tok, gs)] * 3)
    T, B = 48, 24
    windows = DecoderWindows(split, T, PitchShifter(tok, 6), control_dropout=1.0)
    x, y = windows.batch(B, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (B, T)
    scored = y[:, :-1] != IGNORE_INDEX
    assert torch.equal(x[:, 1:][scored], y[:, :-1][scored])
    stream = np.asarray(split.tokens, dtype=np.int64).tolist()
    plain = strip_controls(tok, stream)
    starts = torch.randint(0, len(stream) - T, (B,), generator=torch.Generator().manual_seed(0)).tolist()
    checked = 0
    for r, i in enumerate(starts):
        i = sum(tok[t][:4] != "Ctrl" for t in stream[:i])  # the start among the tokens without controls
        row = x[r].tolist() + [int(y[r, -1])]
        if len(plain) - i < T + 1 or not any(tok[t].startswith("Pitch_") for t in row):
            continue  # moved back from the split's end / nothing moved
        s = shift_of(tok, plain[i:], row)
        want = window_of(tok, plain, encode(tok, moved(gs, s)) * 3, i, T + 1)
        assert row[: len(want)] == want and not x[r, len(want):].any()  # padded where the moved split ends first
        assert (y[r, len(want) - 1:] == IGNORE_INDEX).all() and (y[r, : len(want) - 1] != IGNORE_INDEX).all()
        checked += 1
    assert checked > B // 2


def test_decoder_windows_pad_where_the_moved_split_ends(tmp_path):
    """Notes at frets 5 and 6 of the A string carry a String (the D string plays them lower); a shift down drops it,
    and a split with no tokens after the window pads the row, its padded targets not scored."""
    tok = tab_tokenizer(controls=False)
    score = symusic.Score(480)
    track = symusic.Track(program=25)
    frets = [(5, 5), (5, 6)] * 4
    for k, (s, f) in enumerate(frets):
        track.notes.append(symusic.Note(k * 480, 480, pitch_of(s, f, STANDARD_TUNING), 90))
    score.tracks.append(track)
    gs = GuitarScore(score, frets=frets)
    ids = encode(tok, gs)
    split = _dataset(tmp_path, tok, [ids])
    T = len(ids) - 2
    x, y = DecoderWindows(split, T, PitchShifter(tok, 5)).batch(32, torch.Generator().manual_seed(0))
    starts = torch.randint(0, 2, (32,), generator=torch.Generator().manual_seed(0)).tolist()
    padded = 0
    for r, i in enumerate(starts):
        row = x[r].tolist() + [int(y[r, -1])]
        want = window_of(tok, ids, encode(tok, moved(gs, shift_of(tok, ids[i:], row))), i, T + 1)
        assert row[: len(want)] == want
        assert (y[r, len(want) - 1:] == IGNORE_INDEX).all() and (y[r, : len(want) - 1] != IGNORE_INDEX).all()
        padded += len(want) < T + 1
    assert 0 < padded < 32


def test_seq2seq_pairs_and_infill_examples_are_moved_tokens(tmp_path, tok):
    """Encoder-decoder pairs: source and target together are a stretch of the moved piece, the target from a bar
    line, each within its length. Infilling examples on layout 3 move their bars before the layout: a decoder window
    unfolds to a stretch of the moved piece, a pair's target is its bars."""
    gs = long_piece()
    split = _dataset(tmp_path, tok, [tokens(tok, gs)] * 2)
    moved_parts = [encode(tok, moved(gs, s)) for s in range(-6, 7)]

    def a_moved_stretch(part: list[int]) -> bool:
        return any(_is_slice(part, target * 2) for target in moved_parts)

    S, T = 40, 48
    pairs = Seq2SeqPairs(split, PairLayout.of(tok, S, T), PitchShifter(tok, 6), control_dropout=1.0)
    src, mask, _, y = pairs.batch(24, torch.Generator().manual_seed(0))
    for s_row, m, t in zip(src.tolist(), mask.tolist(), y.tolist()):
        s_ids = [i for i, keep in zip(s_row, m) if keep]
        t_ids = [i for i in t if i != IGNORE_INDEX]
        assert len(s_ids) <= S and len(t_ids) <= T and tok[t_ids[0]] == "Bar_None"
        assert a_moved_stretch(s_ids + t_ids)
    f = FillIds.of(tok)
    x, y = DecoderWindows(split, 120, PitchShifter(tok, 6), control_dropout=1.0, infill=1.0).batch(
        16, torch.Generator().manual_seed(1))
    filled = 0
    for r in range(16):
        row = x[r].tolist() + [int(y[r, -1])]
        if f.start in row:
            assert a_moved_stretch(unfold(f, row[: row.index(f.end) + 1])[1:])
            filled += 1
    assert filled > 8
    pairs = Seq2SeqPairs(split, PairLayout.of(tok, 80, 120), PitchShifter(tok, 6), control_dropout=1.0, infill=1.0)
    _, _, _, y = pairs.batch(8, torch.Generator().manual_seed(2))
    spans = [[i for i in t if i != IGNORE_INDEX] for t in y.tolist()]
    spans = [span[:-1] for span in spans if span[-1] == f.eos]  # infilling targets: the span's bars, then EOS
    assert spans and all(a_moved_stretch(span) for span in spans)


def _is_slice(part: list[int], whole: list[int]) -> bool:
    n = len(part)
    return any(whole[i: i + n] == part for i in range(len(whole) - n + 1))
