"""Evaluation: Kneser-Ney baseline, overlapping areas, music/playability metrics on hand-made pieces, eval CLI."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from guitarformer.evaluation.features import compare, density, groove_consistency, inter_onset_interval, overlap_area, Piece, pitch_class_entropy, pitch_range, polyphony, scale_consistency, used_pitch_classes
from guitarformer.evaluation.playability import fingering_agreement, playability
from guitarformer.evaluation.ngram import KneserNey
from guitarformer.pretrained import pretrained_dir
from guitarformer.runs import checkpoint_of

# ---------------------------------------------------------------- n-gram


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_kneser_ney_is_a_distribution(order):
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 30, 300).tolist(), [1, 2, 3, 4] * 40]
    lm = KneserNey(40, order).fit(seqs)  # ids 30..39 never seen: they still get mass
    for ctx in ([], [1, 2, 3], [4, 1, 2, 3], [39, 38, 37, 36], [5]):
        d = lm.distribution(ctx)
        assert d.shape == (40,) and (d > 0).all()
        assert d.sum() == pytest.approx(1.0, abs=1e-12)
        assert lm.prob(ctx, 3) == pytest.approx(d[3], rel=1e-12)


def test_kneser_ney_beats_unigram_on_repetitive_data():
    riff = [5, 9, 12, 9, 5, 7, 3, 7]
    train, test = riff * 50, riff * 10
    uni = KneserNey(20, 1).fit([train]).score(test)
    kn = KneserNey(20, 4).fit([train]).score(test)
    assert kn["nll"] < 0.2 * uni["nll"]
    assert kn["ppl"] < 1.3 < uni["ppl"]
    assert KneserNey(20, 4).fit([train]).score(test, accuracy=True)["accuracy"] > 0.95


def test_kneser_ney_golden_bigram():
    # Hand-computed: sequence a b a b a c (ids 0 1 0 1 0 2), vocabulary 4, order 2, start-padded.
    lm = KneserNey(4, 2).fit([[0, 1, 0, 1, 0, 2]])
    # bigrams S0:1 01:2 10:2 02:1 -> n1 = 2, n2 = 2 -> D2 = 2 / (2 + 4) = 1/3; after 0: {1: 2, 2: 1}, total 3
    # unigram continuation counts: 0 <- {S, 1} = 2, 1 <- {0} = 1, 2 <- {0} = 1; n1 = 2, n2 = 1 -> D1 = 2 / 4
    p_uni = {w: max(c - 0.5, 0) / 4 + 0.5 * 3 / 4 * 0.25 for w, c in {0: 2, 1: 1, 2: 1, 3: 0}.items()}
    expect = (2 - 1 / 3) / 3 + (1 / 3) * 2 / 3 * p_uni[1]
    assert lm.discount == pytest.approx([0.5, 1 / 3])
    assert lm.prob([0], 1) == pytest.approx(expect, rel=1e-12)


# ---------------------------------------------------------------- overlap and features


def test_overlap_area_identical_and_disjoint():
    rng = np.random.default_rng(1)
    a = rng.normal(0, 1, 200)
    assert overlap_area(a, a) == pytest.approx(1.0, abs=1e-9)
    assert overlap_area(a, a + 100) < 1e-3
    assert 0.3 < overlap_area(a, a + 1) < 0.8  # two unit normals one sigma apart: OA = 0.617
    assert overlap_area([3.0, 3.0], [3.0, 3.0]) == 1.0
    assert math.isnan(overlap_area([1.0], [1.0, 2.0]))


def _piece(pitches, onsets=None, durations=None, bar=4.0) -> Piece:
    n = len(pitches)
    on = np.arange(n, dtype=float) if onsets is None else np.asarray(onsets, float)
    du = np.ones(n) if durations is None else np.asarray(durations, float)
    return Piece(on, du, np.asarray(pitches), bar=bar)


def test_features_on_hand_made_pieces():
    c_major = _piece([60, 62, 64, 65, 67, 69, 71, 72])  # eight quarter notes, one octave
    assert scale_consistency(c_major) == 1.0
    assert used_pitch_classes(c_major) == 7
    assert pitch_range(c_major) == 12
    assert inter_onset_interval(c_major) == 1.0
    assert density(c_major) == 1.0
    assert polyphony(c_major) == 1.0
    counts = np.array([2, 1, 1, 1, 1, 1, 1]) / 8
    assert pitch_class_entropy(c_major) == pytest.approx(float(-(counts * np.log2(counts)).sum()))
    chromatic = _piece(list(range(60, 72)))
    assert pitch_class_entropy(chromatic) == pytest.approx(math.log2(12))
    assert scale_consistency(chromatic) == pytest.approx(7 / 12)
    chords = _piece([40, 47, 52, 45, 52, 57], onsets=[0, 0, 0, 2, 2, 2], durations=[2] * 6)
    assert polyphony(chords) == 3.0 and density(chords) == pytest.approx(2 / 4)  # two strums over 4 quarters
    held = _piece([40, 64, 67], onsets=[0, 1, 2], durations=[4, 1, 1])  # a bass note ringing under a melody
    assert polyphony(held) == 1.0  # notes per onset, not notes sounding: the Poly control's measure
    same_bars = _piece([60] * 8, onsets=[0, 1, 2, 3, 4, 5, 6, 7])
    assert groove_consistency(same_bars) == 1.0
    # Bar 2 drops one of 4 onsets: 1 of 48 grid cells differ.
    diff = _piece([60] * 7, onsets=[0, 1, 2, 3, 4, 5, 6], durations=[1] * 6 + [2])
    assert groove_consistency(diff) == pytest.approx(1 - 1 / 48)


def test_compare_reports_ceiling_and_oa():
    rng = np.random.default_rng(2)
    ref = [_piece(list(rng.choice([60, 62, 64, 65, 67, 69, 71], 16))) for _ in range(40)]
    res = compare(ref, ref)
    assert res["scale_consistency"]["oa"] == pytest.approx(1.0)
    assert 0.0 <= res["pitch_range"]["oa_ceiling"] <= 1.0
    chromatic = [_piece(list(rng.integers(60, 84, 16))) for _ in range(40)]
    assert compare(chromatic, ref)["scale_consistency"]["oa"] < 0.2



def test_length_matched_segments_are_whole():
    """A reference piece's last, partial segment is left out: scored as a whole segment it would be a sparser piece
    (fewer notes per second, a narrower range) than the music is."""
    from guitarformer.evaluation.features import length_matched, notes_per_second, segments

    def eighths(quarters):  # one note every eighth for `quarters` quarter notes, in 4/4
        n = int(quarters * 2)
        return Piece(np.arange(n) * 0.5, np.full(n, 0.5), np.full(n, 60))

    tune = eighths(24)  # 6 bars: one whole 16-quarter segment and a half-filled one
    assert len(segments(tune, 16.0)) == 2 and len(segments(tune, 16.0, whole=True)) == 1
    sample = eighths(16)
    ref, seg = length_matched([sample], [tune, eighths(40)])
    assert seg == 16.0 and len(ref) == 3
    assert {notes_per_second(p) for p in ref} == {notes_per_second(sample)}
    assert len(segments(eighths(15.5), 16.0, whole=True)) == 1  # it ends inside its last bar: that bar is whole
    # no piece as long as a segment: the partial segments are all there is
    ref, seg = length_matched([eighths(32)], [tune])
    assert seg == 32.0 and len(ref) == 1 and ref[0].length == 32.0

def test_playability_and_fingering():
    # Open E-minor chord (0 2 2 0 0 0): all fretable, one chord within the stretch.
    em = _piece([40, 47, 52, 55, 59, 64], onsets=[0] * 6, durations=[1] * 6)
    p = playability([em])
    assert p["fretable"] == 1.0 and p["chord_stretch_ok"] == 1.0 and p["chords"] == 1
    low = _piece([20, 40])  # a pitch below the low E string cannot be fretted
    assert playability([low])["fretable"] == 0.5
    # D6 three times at once: only the high E string reaches it (fret 22), so one of three is placed.
    assert playability([_piece([86] * 3, onsets=[0] * 3)])["fretable"] == pytest.approx(1 / 3)
    wide = _piece([41, 73], onsets=[0, 0])  # F only on the low E (fret 1); C#5 at fret 9 or higher: a stretch
    assert playability([wide])["chord_stretch_ok"] == 0.0
    # Human frets that match the fretter's choice agree fully; moving one note to another string does not.
    from guitarformer.fingering import fret

    run = _piece([40, 42, 44, 45, 47])
    ours = fret([(int(o * 480), 480, int(x)) for o, x in zip(run.onset, run.pitch)], run.tuning)
    run.frets = list(ours)
    assert fingering_agreement([run])["agreement"] == 1.0
    run.frets[3] = (5, 0) if ours[3] != (5, 0) else (6, 5)
    assert fingering_agreement([run])["agreement"] == pytest.approx(0.8)


# ---------------------------------------------------------------- end to end


def _write_riffs(folder: Path, want: dict[str, int]) -> Path:
    """Small MIDI riffs (a motif over a held bass note), chosen so the content-hash split fills every split."""
    import symusic

    from guitarformer.data.prepare import piece_split

    folder.mkdir(parents=True, exist_ok=True)
    have = dict.fromkeys(want, 0)
    rng = np.random.default_rng(0)
    scale = np.array([0, 2, 4, 5, 7, 9, 11, 12])
    k = 0
    while any(have[s] < want[s] for s in want):
        k += 1
        root = 40 + int(rng.integers(0, 12))
        s = symusic.Score(480)
        t = symusic.Track(program=25)
        s.tracks.append(t)
        s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
        s.tempos.append(symusic.Tempo(0, 120.0))
        motif = rng.integers(0, 8, 8)
        for bar in range(8):
            t.notes.append(symusic.Note(bar * 1920, 960, root, 80))
            for i, d in enumerate(motif):
                t.notes.append(symusic.Note(bar * 1920 + i * 240, 240, int(root + 12 + scale[d]), 90))
        p = folder / f"riff{k:03d}.mid"
        s.dump_midi(p)
        sp = piece_split(p)
        if have[sp] >= want[sp]:
            p.unlink()
        else:
            have[sp] += 1
    return folder


@pytest.fixture(scope="module")
def riff_runs(tmp_path_factory, cache_root):
    from guitarformer.config import load_config
    from guitarformer.data.prepare import PrepareOptions, prepare
    from guitarformer.training.loop import train

    root = tmp_path_factory.mktemp("eval")
    riffs = _write_riffs(root / "riffs", {"train": 12, "val": 2, "test": 2})
    prepare([riffs], root / "ds", options=PrepareOptions(workers=1, progress=False))
    runs = {}
    for kind in ("decoder", "encoder_decoder"):
        cfg = copy.deepcopy(load_config("tiny", [f"model.kind={kind}"]))
        cfg.data.dataset = str(root / "ds")
        runs[kind] = root / kind
        train(cfg, run_dir=runs[kind], progress=False)
    return root, runs


def test_continuation_scores_the_same_tokens_for_both_kinds(riff_runs):
    from guitarformer.evaluation.report import EvalOptions, evaluate_run

    root, runs = riff_runs
    dec = evaluate_run(runs["decoder"], options=EvalOptions(split="val", device="cpu", samples=False,
                                                          cont_src=24, cont_tgt=40))
    ed = evaluate_run(runs["encoder_decoder"], options=EvalOptions(split="val", device="cpu", samples=False,
                                                                cont_src=24, cont_tgt=40))
    assert dec["continuation"]["model"]["tokens"] == ed["continuation"]["model"]["tokens"] > 0
    assert dec["continuation"]["ngram"] == ed["continuation"]["ngram"]
    assert dec["likelihood"]["scope"] == "stream" and ed["likelihood"]["scope"] == "continuation"
    for r in (dec, ed):
        assert math.isfinite(r["likelihood"]["nll"]) and r["likelihood"]["ppl"] == pytest.approx(
            math.exp(r["likelihood"]["nll"]))
    # On these repetitive riffs the 5-gram is strong: far below a uniform guess over the vocabulary.
    assert dec["ngram"]["ppl"] < 0.1 * dec["ngram"]["tokens"] + 30
    assert dec["ngram"]["nll"] < math.log(360)


def test_eval_names_the_step_of_the_checkpoint_it_scores(riff_runs, tmp_path):
    """A run's best.pt is often an earlier step than its last (summary.json's): eval reports the step of the weights
    it scored, in its header and as TensorBoard's step."""
    import json
    import shutil

    import torch

    from guitarformer.evaluation.report import EvalOptions, evaluate_run, format_table

    run = shutil.copytree(riff_runs[1]["decoder"], tmp_path / "run")
    ck = run / "ckpt" / "best.pt"
    step = torch.load(ck, weights_only=True)["step"]
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "step": step + 1000}))  # the run went on past its best
    res = evaluate_run(run, options=EvalOptions(split="val", device="cpu", samples=False))
    assert res["step"] == step and f"(decoder, step {step})" in format_table(res)


def test_decoder_continuation_matches_plain_forward(riff_runs):
    """The decoder's continuation NLL equals scoring [source + target] by hand with the model."""
    import torch
    import torch.nn.functional as F

    from guitarformer.data.dataset import PairLayout, Seq2SeqPairs, TokenSplit
    from guitarformer.evaluation.likelihood import continuation_nll
    from guitarformer.runs import load_run

    root, runs = riff_runs
    loaded = load_run(runs["decoder"])
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    pairs = Seq2SeqPairs(TokenSplit(root / "ds", "val"), PairLayout.of(tok, 16, 20))
    got = continuation_nll(model, pairs, "cpu", batch_size=3)
    nll, n = 0.0, 0
    with torch.no_grad():
        for src, mask, _, y in pairs.eval_batches(1):
            s, t = src[0][mask[0]], y[0][y[0] != -100]
            logits, _ = model(torch.cat([s, t])[:-1].unsqueeze(0))
            nll += F.cross_entropy(logits[0, len(s) - 1:], t, reduction="sum").item()
            n += len(t)
    assert got["tokens"] == n
    assert got["nll"] == pytest.approx(nll / n, rel=1e-5)


def test_eval_cli_writes_json_and_tensorboard(riff_runs):
    from click.testing import CliRunner
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from guitarformer.cli import main

    root, runs = riff_runs
    out = root / "eval.json"
    r = CliRunner().invoke(main, ["eval", "--run", str(runs["decoder"]), "--split", "test", "--num-samples", "4",
                                  "--max-new-tokens", "48", "--reference", str(root / "riffs"), "--json", str(out),
                                  "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "5-gram KN" in r.output and "playability" in r.output
    res = json.loads(out.read_text())
    assert set(res) >= {"likelihood", "continuation", "ngram", "music", "playability"}
    assert res["music"]["num_reference"] >= 16
    assert 0.0 <= res["playability"]["reference"]["fretable"] <= 1.0
    # Every reference riff plays one bar 8 times: 7 of its 8 bars repeat an earlier one.
    form = res["form"]
    assert form["bars"] == 16 and form["reference"]["repeat_share"] == pytest.approx(7 / 8)
    assert form["reference"]["bars"] == 8 * form["reference"]["pieces"] and form["samples"]["pieces"] >= 1
    assert form["ratio"] == pytest.approx(form["samples"]["repeat_share"] / (7 / 8))
    assert "bars repeating exactly" in r.output and "0.875" in r.output
    acc = EventAccumulator(str(runs["decoder"] / "tb"))
    acc.Reload()
    # One table under Text, no one-point cards in front of the run's curves.
    assert not any(t.startswith("eval/") for t in acc.Tags()["scalars"])
    text = acc.Tensors("eval/test/text_summary")[-1].tensor_proto.string_val[0].decode()
    assert "| likelihood/nll |" in text and "| ngram/ppl |" in text and "| playability/reference/fretable |" in text
    nll = float(text.split("| likelihood/nll |")[1].split("|")[0])
    assert nll == pytest.approx(res["likelihood"]["nll"], rel=1e-3)


def test_the_shipped_model_is_not_logged_into_the_package(tmp_path):
    from guitarformer.evaluation.report import log_tensorboard
    from guitarformer.pretrained import pretrained_dir

    res = {"split": "test", "step": 1, "likelihood": {"nll": 0.5}}
    assert not log_tensorboard(pretrained_dir(), res) and not (pretrained_dir() / "tb").exists()
    assert log_tensorboard(tmp_path, res) and (tmp_path / "tb").is_dir()


def test_form_comparison_reads_samples_against_the_reference():
    import symusic

    from guitarformer.evaluation.report import form_comparison

    def score(bars):
        s = symusic.Score(480)
        t = symusic.Track(program=25)
        for k, pitch in enumerate(bars):
            t.notes.append(symusic.Note(k * 1920, 1920, pitch, 80))
        s.tracks.append(t)
        return s

    got = form_comparison([score([40, 41, 42, 40])], [score([40, 40]), score([50] * 20), symusic.Score(480)])
    assert got["samples"] == {"repeat_share": 0.25, "pieces": 1, "bars": 4}
    # Only the first 16 bars count: 15 of 16 repeat; the empty score is no piece.
    assert got["reference"]["pieces"] == 2 and got["reference"]["repeat_share"] == pytest.approx((0.5 + 15 / 16) / 2)
    assert got["ratio"] == pytest.approx(0.25 / ((0.5 + 15 / 16) / 2))
    assert math.isnan(form_comparison([score([40])], [score([40, 41])])["ratio"])


def test_eval_cli_clear_error_on_empty_split(tmp_path):
    from click.testing import CliRunner

    from guitarformer.cli import main

    r = CliRunner().invoke(main, ["eval", "--run", str(tmp_path / "nope"), "--no-samples"])
    assert r.exit_code == 2 and "error:" in r.output


def test_fingering_agreement_fingers_by_the_track_program():
    """Pieces keep their track's program, and the fingering is chosen by it (as `guitarformer tab` does): a
    distortion-guitar riff tabbed as power chords agrees fully with the rock costs, not with the default ones."""
    import symusic

    from guitarformer.evaluation.features import piece_of
    from guitarformer.evaluation.playability import fingering_agreement
    from guitarformer.fingering import DISTORTED_COSTS, fret

    def piece(program):
        score = symusic.Score(480)
        track = symusic.Track("g", program, False)
        for k, (root, fifth) in enumerate([(52, 59), (50, 57), (48, 55), (50, 57)] * 2):
            track.notes.extend([symusic.Note(k * 480, 480, root, 100), symusic.Note(k * 480, 480, fifth, 100)])
        score.tracks.append(track)
        human = fret([(n.time, n.duration, n.pitch) for n in track.notes], costs=DISTORTED_COSTS)
        return piece_of(score, frets=human)

    rock, plain = piece(30), piece(25)
    assert rock.program == 30 and plain.program == 25
    assert fingering_agreement([rock])["agreement"] == 1.0
    assert fingering_agreement([plain])["agreement"] < 1.0


def test_eval_of_a_run_on_the_built_in_corpus_reads_that_corpus(tiny_run, tiny_dataset, tmp_path):
    """A run exported as the shipped model is (its config names no dataset: it was the built-in corpus) is
    evaluated on the built-in corpus prepared with its settings, as `train` found it, not refused with a traceback;
    its test split holds the tiny corpus's guitar pieces, so the report names that folder."""
    from click.testing import CliRunner

    from guitarformer.cli import main
    from guitarformer.runs.export import export_run

    export_run(tiny_run, "a test export", out=tmp_path / "run")
    r = CliRunner().invoke(main, ["eval", "--run", str(tmp_path / "run"), "--no-samples", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert f"on {tiny_dataset} [test]" in r.output, r.output


def test_eval_of_the_shipped_model_writes_nothing_where_it_is_run(tmp_path, monkeypatch):
    """`eval --run pretrained` reads the shipped model's own folder: its step from the checkpoint (no summary.json
    there), and no TensorBoard is written, neither into the installed package nor into a ./pretrained folder."""
    from click.testing import CliRunner

    from guitarformer.cli import main

    riffs = _write_riffs(tmp_path / "riffs", {"train": 6, "val": 1, "test": 1})
    r = CliRunner().invoke(main, ["prepare", str(riffs), "--out", str(tmp_path / "ds"), "--like", "pretrained"])
    assert r.exit_code == 0, r.output
    monkeypatch.chdir(tmp_path)
    step = torch.load(checkpoint_of("pretrained"), weights_only=True)["step"]
    r = CliRunner().invoke(main, ["eval", "--run", "pretrained", "--data", str(tmp_path / "ds"), "--no-samples",
                                  "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert f"(decoder, step {step})" in r.output and step > 0
    assert not (tmp_path / "pretrained").exists() and not (pretrained_dir() / "tb").exists()


def test_eval_on_an_empty_split_says_why_and_what_to_do(riff_runs):
    """A dataset too small for a val split: the message says the files are too few and names a split that has them."""
    import json
    import shutil

    from guitarformer.errors import GuitarformerError
    from guitarformer.evaluation.report import EvalOptions, evaluate_run

    root, runs = riff_runs
    dataset = root / "ds"
    small = root / "ds-noval"
    if not small.exists():
        shutil.copytree(dataset, small)
        meta = json.loads((small / "meta.json").read_text())
        meta["tokens"]["val"] = 0
        (small / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(GuitarformerError) as e:
        evaluate_run(runs["decoder"], small, EvalOptions(split="val", device="cpu", samples=False))
    msg = str(e.value)
    assert "too few" in msg and "--split test" in msg and "evaluate on --split val" not in msg
