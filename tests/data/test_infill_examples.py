"""Infilling training examples (vocab/infill.py): the bars after the gap are always whole bars."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.data.dataset import DecoderWindows, PairLayout, Seq2SeqPairs, TokenSplit
from guitarformer.vocab.infill import FillIds, bar_ends, decoder_example, seq2seq_example
from guitarformer.vocab.tokenization import bar_ids, load_tokenizer

BAR = 1
F = FillIds(bar=100, start=101, end=102, bos=103, eos=104, pad=0, bars=(BAR,))


def _piece(lengths: list[int], lead: int = 0) -> np.ndarray:
    """A Bar then `n - 1` note tokens per bar (distinct ids, so a slice is found in one place), after `lead`
    tokens of a bar that began before the stretch."""
    out, k = [10 + i for i in range(lead)], 1000
    for n in lengths:
        out.append(BAR)
        out.extend(range(k, k + n - 1))
        k += n
    return np.asarray(out, dtype=np.int64)


def _assert_whole_after(stretch: np.ndarray, after_at: int, after: list[int], whole_end: bool) -> None:
    """`after` sits at stretch[after_at:], opens with a bar line, and ends at a bar line (or the piece's end)."""
    stop = after_at + len(after)
    assert after and after[0] == BAR and stretch[after_at:stop].tolist() == after
    assert (stop < len(stretch) and stretch[stop] == BAR) or (whole_end and stop == len(stretch))


def _parts(f: FillIds, seq: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(before, span, after) of a decoder example (no padding) in either layout; before includes the head."""
    first, k, start = seq.index(f.bar), seq.count(f.bar), seq.index(f.start)
    if f.spm:  # BOS head after FillStart before FillBar.. span FillEnd; after opens at the first bar line
        h = next((j for j in range(1, start) if seq[j] in f.bars), start)
        return seq[1:h] + seq[start + 1: first], seq[first + k: -1], seq[h:start]
    return seq[1:first], seq[start + 1: -1], seq[first + k: start]


@pytest.mark.parametrize("spm", [True, False])
@pytest.mark.parametrize("whole_end", [False, True])
def test_decoder_examples_end_the_right_side_on_a_bar_line(whole_end, spm):
    content = _piece([9, 14, 6, 11, 8, 13, 7, 10], lead=3)
    f = dataclasses.replace(F, spm=spm)
    ended_at_piece_end = 0
    for seed in range(200):
        length = 24 + seed % 70  # windows that cut the stretch inside every bar, and some that hold it all
        ex = decoder_example(f, content, length, torch.Generator().manual_seed(seed), whole_end=whole_end)
        if ex is None:
            continue
        w, skip = ex
        seq = w[: w.tolist().index(F.end) + 1].tolist()
        assert len(seq) <= length and seq[0] == F.bos
        k = seq.count(F.bar)
        before, span, after = _parts(f, seq)
        if spm:  # the fill follows the bars before the gap and their placeholders
            assert seq[seq.index(F.bar) - len(before) + 3: seq.index(F.bar)] == before[3:]
        e = len(before) + len(span)
        assert content[: len(before)].tolist() == before and content[len(before): e].tolist() == span
        assert sum(t == BAR for t in span) == k and span[0] == BAR
        _assert_whole_after(content, e, after, whole_end)
        ended_at_piece_end += e + len(after) == len(content)
        assert skip[: len(seq) - 1].tolist() == [t in (F.bar, F.start) for t in seq[1:]]
    # The last bar of a stretch serves as the right side only when the stretch ends the piece.
    assert (ended_at_piece_end > 0) == whole_end


def test_a_decoder_window_without_a_whole_bar_after_any_span_gives_no_example():
    content = _piece([6, 40])  # the second bar (the only one after a span) does not fit in 30 tokens
    for seed in range(20):
        assert decoder_example(F, content, 30, torch.Generator().manual_seed(seed), whole_end=True) is None


@pytest.mark.parametrize("whole_end", [False, True])
def test_seq2seq_sources_end_the_right_side_on_a_bar_line(whole_end):
    rest = _piece([9, 14, 6, 11, 8, 13, 7, 10, 12])
    before = np.arange(5000, 5000 + 90, dtype=np.int64)
    head = np.asarray([7, 8], dtype=np.int64)
    seen = 0
    for seed in range(200):
        src_len = 20 + seed % 70
        b = before[: seed % 91]
        pair = seq2seq_example(F, b, rest, src_len, torch.Generator().manual_seed(seed), head, whole_end=whole_end)
        if pair is None:
            continue
        src, tgt = pair[0].tolist(), pair[1].tolist()
        assert len(src) <= src_len and src[:3] == [F.bos, 7, 8] and tgt[-1] == F.eos
        k = src.count(F.bar)
        first = src.index(F.bar)
        assert src[3:first] == b[len(b) - (first - 3):].tolist()  # the end of the before side
        e = len(tgt) - 1
        assert rest[:e].tolist() == tgt[:-1] and sum(t == BAR for t in tgt[:-1]) == k
        _assert_whole_after(rest, e, src[first + k:], whole_end)
        seen += 1
    assert seen > 100


def test_seq2seq_gives_the_right_side_half_the_room_and_the_left_side_the_rest():
    rest = _piece([5] * 20)
    before = np.arange(5000, 5200, dtype=np.int64)
    src, _ = seq2seq_example(F, before, rest, 61, torch.Generator().manual_seed(0))
    k = src.tolist().count(F.bar)
    after = len(src) - src.tolist().index(F.bar) - k
    room = 61 - 1 - k
    assert after % 5 == 0 and room // 2 - 5 < after <= room // 2  # whole 5-token bars, up to half the room
    assert len(src) == 1 + k + after + (room - after)  # the before side fills what the bars leave
    short, _ = seq2seq_example(F, before[:4], rest, 61, torch.Generator().manual_seed(0))
    assert len(short) - short.tolist().index(F.bar) - short.tolist().count(F.bar) > room // 2  # after takes more


def test_bar_ends_count_the_last_bar_only_at_the_piece_end():
    bar_at = np.asarray([2, 5, 9])
    assert bar_ends(bar_at, 12, whole_end=False).tolist() == [5, 9]
    assert bar_ends(bar_at, 12, whole_end=True).tolist() == [5, 9, 12]


def _next_in_stream(stream: np.ndarray, part: list[int], strings: frozenset[int] = frozenset()) -> list[int]:
    """The token after each place `part` occurs in the stream. An occurrence followed by one of `strings` (String
    ids) is not one: with tab layout 3 the same tokens then end on another note (the same pitch on another string)."""
    n = len(part)
    nxt = [int(stream[s + n]) for s in np.nonzero(stream[: len(stream) - n] == part[0])[0]
           if stream[s: s + n].tolist() == part]
    return [t for t in nxt if t not in strings]


def test_training_windows_and_pairs_of_the_corpus_have_whole_bars_after_the_gap(tiny_dataset):
    split = TokenSplit(tiny_dataset, "train")
    tok = load_tokenizer(tiny_dataset / "tokenizer.json")
    f = FillIds.of(tok)
    strings = frozenset(i for t, i in tok.vocab.items() if t.startswith("String_"))
    stream = np.asarray(split.tokens, dtype=np.int64)
    x, y = DecoderWindows(split, 160, infill=0.5).batch(32, torch.Generator().manual_seed(3))
    checked = 0
    for r in range(32):
        row = x[r].tolist() + [int(y[r, -1])]
        if f.start in row:
            after = _parts(f, row[: row.index(f.end) + 1])[2]
            assert after and after[0] in f.bars
            nxt = _next_in_stream(stream, after, strings)
            assert nxt and all(t in f.bars or t == f.eos for t in nxt)  # it stops at a bar line or the piece's end
            checked += 1
    pairs = Seq2SeqPairs(split, PairLayout(96, 128, bar_ids(tok), f.bos, f.pad), infill=0.5)
    src, mask, _, y = pairs.batch(32, torch.Generator().manual_seed(4))
    for r in range(32):
        s = src[r][mask[r]].tolist()
        if f.bar in s and (y[r] != IGNORE_INDEX).any():
            after = s[s.index(f.bar) + s.count(f.bar):]
            nxt = _next_in_stream(stream, after, strings)
            assert after and after[0] in f.bars and nxt and all(t in f.bars or t == f.eos for t in nxt)
            checked += 1
    assert checked >= 16
