"""evaluation/style.py: the style judge learns styles that differ in their notes and nothing from shuffled labels."""

from __future__ import annotations

import numpy as np
import pytest

from guitarformer.errors import GuitarformerError
from guitarformer.evaluation.features import Piece
from guitarformer.evaluation.style import FEATURE_NAMES, StyleJudge, style_features, windows


def _tune(rng: np.random.Generator, dotted: bool, bars: int = 8) -> Piece:
    """An 8-bar 4/4 tune of random scale notes: even eighths, or dotted-eighth + sixteenth pairs (a hornpipe's
    swing); a few notes held over, so neither rhythm is exact."""
    pair = (0.75, 0.25) if dotted else (0.5, 0.5)
    onsets, t = [], 0.0
    while t < bars * 4 - 1e-9:
        for d in pair:
            onsets.append(t)
            t += d
    onsets = np.array(onsets)
    keep = rng.random(len(onsets)) > 0.15  # some notes tied into the one before
    onsets = onsets[keep]
    durations = np.diff(np.r_[onsets, bars * 4.0])
    pitches = 50 + rng.choice([0, 2, 4, 5, 7, 9, 11, 12], len(onsets))
    return Piece(onsets, durations, pitches, bar=4.0, meter=(4, 4), length=bars * 4.0)


def _set(seed: int, n: int) -> tuple[list[Piece], list[str]]:
    rng = np.random.default_rng(seed)
    labels = ["hornpipe" if k % 2 else "reel" for k in range(n)]
    return [_tune(rng, s == "hornpipe") for s in labels], labels


def test_the_judge_tells_styles_apart_by_their_notes():
    train, labels = _set(0, 80)
    judge = StyleJudge.fit(train, labels, min_pieces=10)
    test, truth = _set(1, 60)
    score = judge.accuracy(test, truth)
    assert judge.styles == ("hornpipe", "reel")
    assert score.overall > 0.9 and score.balanced > 0.9 and score.pieces == 60
    assert judge.predict(test[1]) == "hornpipe" and judge.predict(test[0]) == "reel"


def test_a_judge_fitted_on_shuffled_labels_stays_near_chance():
    train, labels = _set(0, 80)
    shuffled = list(np.random.default_rng(5).permutation(labels))
    judge = StyleJudge.fit(train, shuffled, min_pieces=10)
    test, truth = _set(1, 200)
    assert abs(judge.accuracy(test, truth).overall - 0.5) < 0.15


def test_fitting_is_deterministic_and_rare_styles_are_left_out():
    train, labels = _set(0, 60)
    train.append(train[0])
    labels.append("waltz")  # one waltz: too few to learn
    a = StyleJudge.fit(train, labels, min_pieces=10)
    b = StyleJudge.fit(train, labels, min_pieces=10)
    assert "waltz" not in a.styles and np.array_equal(a.weights, b.weights)
    assert a.accuracy(train, labels).pieces == 60  # the waltz is not counted: the judge cannot name it


def test_one_style_is_refused_with_the_counts():
    train, _ = _set(0, 30)
    with pytest.raises(GuitarformerError, match="two styles"):
        StyleJudge.fit(train, ["reel"] * 30)


def test_features_are_finite_for_any_piece_and_windows_cut_whole_bars():
    empty = Piece(np.zeros(0), np.zeros(0), np.zeros(0, np.int64))
    one = Piece(np.zeros(1), np.ones(1), np.array([50]))
    for p in (empty, one, _tune(np.random.default_rng(0), True)):
        x = style_features(p)
        assert x.shape == (len(FEATURE_NAMES),) and np.isfinite(x).all()
    # Bars 1 and 3 are the same: one bar of three repeats an earlier one.
    three = Piece(np.array([0, 1, 4, 5, 8, 9.0]), np.ones(6), np.array([40, 42, 41, 42, 40, 42]))
    assert style_features(three)[FEATURE_NAMES.index("repeated_bars")] == pytest.approx(1 / 3)
    long = _tune(np.random.default_rng(0), False, bars=20)
    cut = windows(long, bars=8)
    assert [w.length for w in cut] == [32.0, 32.0, 32.0] and cut[1].onset.min() >= 0


def _corpus_dataset(root, per_split: dict[str, int]):
    """A prepared-dataset folder over a corpus folder: MIDI tunes (reels even, hornpipes dotted), manifest.jsonl
    with their splits, labels.json with their styles, as the built-in corpus lays them out."""
    import json

    import symusic

    midi = root / "corpus" / "midi"
    midi.mkdir(parents=True)
    rng = np.random.default_rng(0)
    manifest, labels = [], {}
    for split, n in per_split.items():
        for k in range(n):
            style = "hornpipe" if k % 2 else "reel"
            p = _tune(rng, style == "hornpipe", bars=10)
            score = symusic.Score(480)
            score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
            track = symusic.Track("g", 25)
            for on, du, pi in zip(p.onset, p.duration, p.pitch):
                track.notes.append(symusic.Note(int(on * 480), int(du * 480), int(pi), 80))
            score.tracks.append(track)
            name = f"{split}-{k:03d}.mid"
            score.dump_midi(str(midi / name))
            manifest.append({"path": str(midi / name), "status": "ok", "split": split})
            labels[name] = {"Key": "D:major", "Style": style}
    manifest.append({"path": str(midi / "broken.mid"), "status": "skipped", "split": "train"})
    (root / "corpus" / "labels.json").write_text(json.dumps(labels))
    (root / "ds").mkdir()
    (root / "ds" / "manifest.jsonl").write_text("\n".join(json.dumps(m) for m in manifest))
    return root / "ds"


def test_the_corpus_judge_fits_on_train_tunes_and_scores_val_tunes(tmp_path):
    from guitarformer.evaluation.style import corpus_judge, labelled_tunes

    dataset = _corpus_dataset(tmp_path, {"train": 30, "val": 10, "test": 4})
    files, styles = labelled_tunes(dataset, "test")
    assert len(files) == 4 and set(styles) == {"reel", "hornpipe"}
    fitted = corpus_judge(dataset, min_tunes=10)
    assert fitted.windows == 30 * 2  # 10-bar tunes: one whole 8-bar window and a 2-bar rest
    assert fitted.tunes == {"reel": 15, "hornpipe": 15}
    assert fitted.ceiling.pieces == 10 and fitted.ceiling.overall > 0.9


def test_a_dataset_without_styles_is_refused_with_the_fix(tmp_path):
    from guitarformer.evaluation.style import labelled_tunes

    with pytest.raises(GuitarformerError, match="not a prepared dataset"):
        labelled_tunes(tmp_path, "train")
    dataset = _corpus_dataset(tmp_path, {"train": 2})
    (tmp_path / "corpus" / "labels.json").unlink()
    with pytest.raises(GuitarformerError, match="only the built-in corpus labels"):
        labelled_tunes(dataset, "train")
