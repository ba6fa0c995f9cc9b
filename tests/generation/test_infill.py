"""Bar infilling: layouts, training examples, and filling bars of a file with a tiny run of each model kind."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import miditok
import numpy as np
import pytest
import symusic
import torch
from click.testing import CliRunner

from guitarformer import IGNORE_INDEX
from guitarformer.cli import main
from guitarformer.config import DataConfig, apply_overrides
from guitarformer.data.dataset import DecoderWindows, PairLayout, Seq2SeqPairs, TokenSplit
from guitarformer.vocab.infill import (
    FILL_TOKENS,
    FillIds,
    decoder_layout,
    seq2seq_layout,
    split_bars,
    unfold,
)
from guitarformer.vocab.tab_tokens import TabREMI
from guitarformer.vocab.tokenization import bar_ids, build_tokenizer, encode, load_tokenizer, tokenizer_params
from guitarformer.errors import GuitarformerError
from guitarformer.fingering import fret
from guitarformer.app.infill import fill_bars
from guitarformer.compose.infill import song_bars
from guitarformer.compose.riffs import Draws
from guitarformer.readers import read_guitar
from guitarformer.runs import load_run

FIX = Path(__file__).parents[1] / "fixtures"
SONG = FIX / "tabs" / "lyrics_multistaff.txt"  # 4 bars of a human tab: bars 2-3 have a bar on each side


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(DataConfig())


def _song(tok):
    gs = read_guitar(SONG)[0]
    ids = encode(tok, gs)
    f = FillIds.of(tok)
    head, bars = split_bars(ids[1:-1], f.bars)
    return gs, ids, f, head, bars


def test_fill_tokens_come_after_the_tab_tokens_and_survive_save_and_load(tok, tmp_path):
    params = tokenizer_params(DataConfig())
    params.pop("guitar_infill")
    plain = TabREMI(miditok.TokenizerConfig(**params))  # a dataset prepared before infilling
    assert not any(t in plain.vocab for t in FILL_TOKENS)
    assert {t: i for t, i in tok.vocab.items() if t not in FILL_TOKENS} == plain.vocab  # no id moved
    assert [tok.vocab[t] for t in FILL_TOKENS] == list(range(len(plain), len(plain) + 3))
    tok.save(tmp_path / "tokenizer.json")
    back = load_tokenizer(tmp_path / "tokenizer.json")
    assert back.vocab == tok.vocab and back.tokens_types_graph == tok.tokens_types_graph
    assert {"FillBar", "FillStart", "FillEnd"} <= set(back.tokens_types_graph)
    with pytest.raises(GuitarformerError, match="no infilling tokens"):
        FillIds.of(plain)


def test_layouts_round_trip_and_follow_the_grammar(tok):
    _, ids, f, head, bars = _song(tok)
    assert len(bars) == 4 and f.spm  # a tokenizer prepared now: suffix-first layout
    for a, b in ((1, 3), (0, 1), (3, 4), (0, 4)):
        for spm in (True, False):
            g = dataclasses.replace(f, spm=spm)
            layout, at = decoder_layout(g, head, bars[:a], bars[a:b], bars[b:])
            assert layout[-1] == f.end and layout.count(f.bar) == b - a
            assert layout[at - 1] == (f.bar if spm else f.start)
            assert layout[at:-1] == [t for bar in bars[a:b] for t in bar]  # the fill is the span's bars
            if spm:  # the bars before the gap lead straight into the placeholders and the fill
                assert layout[layout.index(f.start) + 1: at - (b - a)] == [t for bar in bars[:a] for t in bar]
            assert unfold(g, layout) == ids[:-1]  # the bars come back in order
            assert tok.tokens_errors(miditok.TokSequence(ids=layout[1:])) == 0
        src, tgt = seq2seq_layout(f, head, bars[:a], bars[a:b], bars[b:])
        assert src.count(f.bar) == b - a and tgt[0] == f.bos and tgt[-1] == f.eos
        assert unfold(f, src + [f.start] + tgt[1:-1]) == ids[:-1]
        assert tok.tokens_errors(miditok.TokSequence(ids=src[1:])) == 0
        assert tok.tokens_errors(miditok.TokSequence(ids=tgt[1:])) == 0


def _stream(split):
    return np.asarray(split.tokens, dtype=np.int64)


def _contains(stream: np.ndarray, part: list[int]) -> bool:
    n = len(part)
    starts = np.nonzero(stream[: len(stream) - n + 1] == part[0])[0]
    return any(stream[s: s + n].tolist() == part for s in starts)


def test_decoder_windows_mix_in_valid_infilling_examples(tiny_dataset):
    split = TokenSplit(tiny_dataset, "train")
    f = FillIds.of(load_tokenizer(tiny_dataset / "tokenizer.json"))
    stream = _stream(split)
    T = 160
    x, y = DecoderWindows(split, T, infill=0.5).batch(32, torch.Generator().manual_seed(3))
    filled = 0
    for r in range(32):
        row = x[r].tolist() + [int(y[r, -1])]
        if f.start not in row:
            assert torch.equal(x[r, 1:], y[r, :-1]) and (y[r] != IGNORE_INDEX).all()  # a plain window
            continue
        filled += 1
        seq = row[: row.index(f.end) + 1]
        assert seq[0] == f.bos and seq.count(f.start) == 1 and 1 <= seq.count(f.bar) <= 4
        assert f.spm and seq.index(f.bar) > seq.index(f.start)  # suffix first: placeholders after FillStart
        span = seq[len(seq) - seq[::-1].index(f.bar): -1]
        assert sum(t in f.bars for t in span) == seq.count(f.bar) and span[0] in f.bars  # whole bars, as many
        assert _contains(stream, unfold(f, seq)[1:])  # the piece's own tokens, in order, around the fill
        skip = (y[r] == IGNORE_INDEX).tolist()
        targets = row[1:]
        assert all(skip[j] == (targets[j] in (f.bar, f.start) or j >= len(seq) - 1) for j in range(T))
    assert filled >= 8


def test_seq2seq_pairs_mix_in_valid_infilling_examples(tiny_dataset):
    split = TokenSplit(tiny_dataset, "train")
    tok = load_tokenizer(tiny_dataset / "tokenizer.json")
    f = FillIds.of(tok)
    stream = _stream(split)
    pairs = Seq2SeqPairs(split, PairLayout(96, 128, bar_ids(tok), f.bos, f.pad), infill=0.5)
    src, mask, tin, y = pairs.batch(32, torch.Generator().manual_seed(4))
    filled = 0
    for r in range(32):
        s = src[r][mask[r]].tolist()
        if f.bar not in s:
            continue
        filled += 1
        t = y[r][y[r] != IGNORE_INDEX].tolist()
        k = s.count(f.bar)
        assert s[0] == f.bos and 1 <= k <= 4 and t[0] in f.bars
        if t[-1] == f.eos:
            assert sum(i in f.bars for i in t) == k
            assert _contains(stream, unfold(f, s + [f.start] + t[:-1])[1:])
    assert filled >= 8
    assert all(f.bar not in s[m].tolist() for s, m, _, _ in pairs.eval_batches(8))  # validation never infills


def test_infill_zero_leaves_windows_and_pairs_as_they_were(tiny_dataset):
    split = TokenSplit(tiny_dataset, "train")
    tok = load_tokenizer(tiny_dataset / "tokenizer.json")
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    for a, b in zip(DecoderWindows(split, 64).batch(8, g1), DecoderWindows(split, 64, infill=0.0).batch(8, g2)):
        assert torch.equal(a, b)
    args = (PairLayout.of(tok, 32, 64),)
    for a, b in zip(Seq2SeqPairs(split, *args).batch(8, g1), Seq2SeqPairs(split, *args, infill=0.0).batch(8, g2)):
        assert torch.equal(a, b)
    assert torch.equal(g1.get_state(), g2.get_state())


@pytest.fixture(scope="module", params=["decoder", "encoder_decoder"])
def infill_run(request, tiny_cfg, tiny_dataset, tmp_path_factory):
    from guitarformer.training.loop import train

    cfg = apply_overrides(copy.deepcopy(tiny_cfg), [
        "data.infill=0.5", f"model.kind={request.param}", "model.block_size=256", "model.src_block_size=128"])
    cfg.data.dataset = str(tiny_dataset)
    run = tmp_path_factory.mktemp("runs") / f"infill-{request.param}"
    train(cfg, run_dir=run, progress=False)
    return run


def _nudged(lo: int, hi: int, nudge: int):
    """The song with one note of the chord on each of the gap's edges (bar lines lo and hi) moved `nudge` ticks
    earlier: off the grid, but on the bar line in the quantised time the model sees."""
    gs = read_guitar(SONG)[0]
    notes = list(gs.track.notes)
    for edge in (lo, hi):
        k = next(i for i, n in enumerate(notes) if n.time == edge)
        notes[k] = symusic.Note(edge - nudge, notes[k].duration + nudge, notes[k].pitch, notes[k].velocity)
    gs.track.notes.clear()
    gs.track.notes.extend(notes)
    return gs


def test_a_tiny_run_fills_bars_and_keeps_every_other_note(infill_run):
    """The notes the model sees in the gap (quantised onsets) are the ones replaced: a note a few ticks before the
    gap's first bar line goes (it is written again), one a few ticks before its last bar line stays (it opens the
    bar after); every other note keeps its time, string, fret and technique."""
    loaded = load_run(infill_run)
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    song = song_bars(tok, read_guitar(SONG)[0], FillIds.of(tok))
    lo, hi = song.starts[1], song.starts[3]
    nudge = max(1, song.gs.score.ticks_per_quarter // tok.time_division // 4)  # well under half a grid step

    def outside(t: int) -> bool:  # not in bars 2-3 as the model's grid puts them
        return not lo - nudge <= t < hi - nudge

    def rows(g, keep):
        return [(n.time, n.duration, n.pitch, n.velocity, fr, te)
                for n, fr, te in zip(g.track.notes, g.frets, g.techniques) if keep(n.time)]

    for seed in range(3):
        gs = _nudged(lo, hi, nudge)
        gs.frets = fret(list(gs.track.notes), gs.tuning, gs.capo)
        filled = fill_bars(model, tok, cfg, _nudged(lo, hi, nudge), (2, 3), draws=Draws(seed=seed))
        assert filled.ended and sum(t in bar_ids(tok) for t in filled.fill_ids) == 2  # exactly the two bars
        assert tok.tokens_errors(miditok.TokSequence(ids=filled.fill_ids)) == 0
        out = filled.score
        assert rows(out, outside) == rows(gs, outside)
        times = [n.time for n in out.track.notes]
        assert lo - nudge not in times  # written again by the fill, not kept beside it
        assert times.count(hi - nudge) == 1  # the bar after the gap keeps its first chord whole
        new = [n for n in out.track.notes if not outside(n.time)]
        assert len(new) == filled.new_notes and all(lo <= n.time for n in new)
        assert all(n.time + n.duration <= hi for n in new)  # nothing rings into the bars after
        assert [(t.time, t.numerator, t.denominator) for t in out.score.time_signatures] == \
            [(t.time, t.numerator, t.denominator) for t in gs.score.time_signatures]


@pytest.mark.slow
def test_infill_command_writes_every_format(infill_run, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["infill", str(SONG), "--bars", "2-3", "--run", str(infill_run),
                               "--out", str(tmp_path / "new.gp5"), "--tab", str(tmp_path / "new.txt")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "new.txt").read_text().count("generated") == 1
    back = read_guitar(tmp_path / "new.gp5")[0]
    before = read_guitar(SONG)[0]
    first_bar = before.score.ticks_per_quarter * 4  # 4/4: bar 1 is kept as written
    assert sorted((n.time, n.pitch) for n in back.track.notes if n.time < first_bar) == \
        sorted((n.time * back.score.ticks_per_quarter // before.score.ticks_per_quarter, n.pitch)
               for n in before.track.notes if n.time < first_bar)
    res = runner.invoke(main, ["infill", str(SONG), "--bars", "2-3", "--run", str(infill_run),
                               "--out", str(tmp_path / "new.mid")])
    assert res.exit_code == 0 and (tmp_path / "new.mid").stat().st_size > 0


@pytest.mark.slow
def test_clear_errors(infill_run, tiny_run, tmp_path):
    runner = CliRunner()

    def err(*args):
        res = runner.invoke(main, ["infill", str(SONG), "--out", str(tmp_path / "x.mid"), *args])
        assert res.exit_code == 2, res.output
        return res.output

    assert "has 4 bars" in err("--bars", "3-9", "--run", str(infill_run))
    one = tmp_path / "one.txt"  # a one-bar tab: the only fill there is, said as such
    one.write_text("e|-0-2-3-|\nB|--------|\nG|--------|\nD|--------|\nA|--------|\nE|--------|\n")
    res = runner.invoke(main, ["infill", str(one), "--bars", "2-3", "--run", str(infill_run),
                               "--out", str(tmp_path / "x.mid")])
    assert res.exit_code == 2 and "has 1 bar\n" in res.output and "pass --bars 1-1" in res.output, res.output
    assert "--set data.infill=0.3" in err("--bars", "2-3", "--run", str(tiny_run))
    assert "bar range" in err("--bars", "x", "--run", str(infill_run))
    res = runner.invoke(main, ["infill", str(SONG), "--bars", "2", "--run", str(infill_run),
                               "--out", str(tmp_path / "x.wav")])
    assert res.exit_code == 2 and ".gp5" in res.output
    with pytest.raises(GuitarformerError, match="data.infill needs"):
        apply_overrides(copy.deepcopy(load_run(tiny_run).cfg), ["data.infill=0.3", "data.tokenizer=REMI"])
    gs = read_guitar(SONG)[0]
    gs.frets = fret(list(gs.track.notes), gs.tuning, gs.capo)
    assert len(song_bars(load_run(infill_run).tokenizer, gs, FillIds.of(load_run(infill_run).tokenizer)).bars) == 4


def test_candidates_keep_the_fill_that_ranks_first(infill_run, monkeypatch):
    """`candidates` samples fills side by side and keeps the one `rank_fills` puts first: the scores are the
    model's own mean log-probabilities per token (checked against a teacher-forced pass), and the kept fill is the
    row with the highest fit to the bars around the gap plus LIKELIHOOD_WEIGHT x its score, computed here by hand."""
    import guitarformer.compose.infill as gi

    loaded = load_run(infill_run)

    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    gs = read_guitar(SONG)[0]
    seen: dict[str, list] = {}
    real_draw, real_rank, real_generate = gi.draw_fills, gi.rank_fills, gi.generate

    def spy_generate(model_, prompt, *args, **kwargs):
        seen.update(context=(prompt.ids if cfg.model.kind == "decoder" else prompt.src)[0].tolist())
        return real_generate(model_, prompt, *args, **kwargs)

    def spy_draw(*args, **kwargs):
        rows, scores = real_draw(*args, **kwargs)
        seen.update(rows=rows, scores=scores)
        return rows, scores

    def spy_rank(tokenizer, rows, scores, around):
        seen.update(around=around)
        return real_rank(tokenizer, rows, scores, around)

    monkeypatch.setattr(gi, "generate", spy_generate)
    monkeypatch.setattr(gi, "draw_fills", spy_draw)
    monkeypatch.setattr(gi, "rank_fills", spy_rank)
    filled = fill_bars(model, tok, cfg, gs, (2, 3), draws=Draws(4, 5))
    rows, scores = seen["rows"], seen["scores"]
    assert len(rows) == 4 and len({tuple(r) for r, _ in rows}) > 1  # different fills were drawn
    assert len(seen["around"]) == 2  # bar 1 before the gap, bar 4 after it

    def body(r):
        row, ended = rows[r]
        return row[:-1] if ended else row

    near = gi.bar_notes(tok, [i for b in seen["around"] for i in b])
    s = np.array(scores)
    z = (s - s.mean()) / s.std() if s.std() > 0 else 0 * s
    by_hand = []
    for r in range(4):
        made = gi.bar_notes(tok, body(r))
        fits = []
        for m, n in zip(made, near):  # the share of each value in both sets, the smaller one summed
            if len(m) and len(n):
                fits.append(sum(min(list(m).count(v) / len(m), list(n).count(v) / len(n)) for v in set(m)))
        by_hand.append((rows[r][1], (sum(fits) / len(fits) if fits else 0.0) + gi.LIKELIHOOD_WEIGHT * z[r]))
    assert filled.fill_ids == body(max(range(4), key=lambda r: by_hand[r]))  # closed fills first, then the fit
    # Each candidate's score by hand: the mean log-probability of its tokens after the context, a whole
    # teacher-forced pass each (the sampler sums them as it draws, up to each row's end: the same numbers).
    assert len({len(r) for r, _ in rows}) > 1
    for r, (row, _) in enumerate(rows):
        with torch.no_grad():
            if cfg.model.kind == "decoder":
                logits = model(torch.tensor([[*seen["context"], *row[:-1]]]))[0][0, len(seen["context"]) - 1:]
            else:
                src = torch.tensor([seen["context"]])
                logits = model(src, torch.tensor([[tok.vocab["BOS_None"], *row[:-1]]]),
                               src_key_mask=torch.ones_like(src, dtype=torch.bool))[0][0]
        want = torch.log_softmax(logits.float(), -1)[torch.arange(len(row)), torch.tensor(row)].mean()
        assert scores[r] == pytest.approx(float(want), abs=1e-5)
    # One candidate is the fill `candidates=1` writes (same seed): candidate 0.
    one = fill_bars(model, tok, cfg, read_guitar(SONG)[0], (2, 3), draws=Draws(seed=5))
    assert one.fill_ids == body(0)


def test_rank_fills_prefers_the_fill_that_sounds_like_its_surroundings(tok):
    """A fill that repeats the bars around the gap outranks a wild one the model scores higher, unless only the wild
    one was closed before the token budget ran out; an empty fill (score -inf) never wins; with no notes around to
    fit, the likelihood decides."""
    from guitarformer.compose.infill import rank_fills, share_overlap

    _, _, f, _, bars = _song(tok)
    around = [bars[0], bars[3]]
    alike = [*bars[0]]  # the bar before the gap, again
    pitch = [i for t, i in tok.vocab.items() if t.startswith("Pitch_")]
    high = max(pitch, key=lambda i: int(tok[i].split("_")[1]))
    wild = [t for i in bars[1] for t in ([high] if tok[int(i)].startswith("Pitch_") else [i])]  # every note on top
    rows = [(wild, False), (alike, False), ([], False)]
    assert rank_fills(tok, rows, [-0.5, -0.6, -math.inf], around) == 1
    assert rank_fills(tok, [(wild, True), (alike, False)], [-0.5, -0.6], around) == 0  # closed beats cut short
    assert rank_fills(tok, rows[:2], [-0.5, -0.5], around) == 1  # equally likely: the fit decides
    assert rank_fills(tok, [([], False), (alike, False)], [-math.inf, -9.0], around) == 1
    assert rank_fills(tok, rows[:2], [-0.2, -0.3], []) == 0
    assert rank_fills(tok, rows[:2], [-0.3, -0.2], []) == 1
    assert share_overlap([60, 60, 62, 64], [60, 62, 62, 67]) == pytest.approx(0.25 + 0.25)
    assert share_overlap([0.5, 0.5], [0.5]) == 1.0 and math.isnan(share_overlap([], [1.0]))


def test_candidates_out_of_range_are_refused(infill_run, tmp_path):
    from guitarformer.app import InfillRequest, infill

    with pytest.raises(GuitarformerError, match="between 1 and 16"):
        infill(InfillRequest(song=SONG, bars=(2, 3), run=infill_run, candidates=17))
    res = CliRunner().invoke(main, ["infill", str(SONG), "--bars", "2-3", "--run", str(infill_run), "--candidates",
                                    "0", "--out", str(tmp_path / "x.mid")])
    assert res.exit_code == 2 and "--candidates" in res.output
    res = CliRunner().invoke(main, ["infill", str(SONG), "--bars", "2-3", "--run", str(infill_run), "--candidates",
                                    "3", "--out", str(tmp_path / "x.mid")])
    assert res.exit_code == 0, res.output


@pytest.mark.slow
def test_the_rank_bench_keeps_the_fills_infill_keeps(infill_run, tmp_path):
    """benchmarks/bench_fill_rank.py: its `infill` row is what bench_infill.py measures of the command's fills on the
    same spans (same candidates, same choice), and it writes its table into the doc's marked section."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_fill_rank
    import bench_infill

    cols = bench_fill_rank.bench(infill_run, seed=3, num=3, candidates=8, device="cpu")
    ours = next(v for k, v in cols.items() if "`infill`'s" in k)
    theirs = bench_infill.bench_run(infill_run, 3, 3, "cpu", candidates=8)
    assert list(ours) == pytest.approx([theirs["oa"][f] for f in ("pitch", "duration", "onset")], nan_ok=True)
    assert list(cols["copying the bars before"]) == pytest.approx(
        [theirs["oa_left"][f] for f in ("pitch", "duration", "onset")], nan_ok=True)
    doc = tmp_path / "INFILL.md"
    doc.write_text("before\n<!-- fill-rank:begin (written by a benchmark) -->\nold\n<!-- fill-rank:end -->\nafter\n")
    bench_fill_rank.main([str(infill_run), "--num", "2", "--seeds", "0", "--doc", str(doc)])
    text = doc.read_text()
    assert "old" not in text and text.startswith("before") and text.rstrip().endswith("after")
    assert text.count("fill-rank:begin") == 1 and all(name in text for name in bench_fill_rank.RULES)


def test_the_infill_bench_scores_music_tokens_not_controls():
    """bench_infill.py's NLL leaves a span's control tokens out (the sampler writes them; a run trained with
    data.control_targets false never guesses them): the sum over the other targets, none of the skipped ones."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_infill

    logits = torch.randn(5, 9, generator=torch.Generator().manual_seed(0))
    targets = [1, 7, 2, 7, 3]
    each = -torch.log_softmax(logits, -1)[torch.arange(5), torch.tensor(targets)]
    assert bench_infill.token_nll(logits, targets) == pytest.approx(float(each.sum()), rel=1e-5)
    assert bench_infill.token_nll(logits, targets, frozenset({7})) == pytest.approx(
        float(each[[0, 2, 4]].sum()), rel=1e-5)
