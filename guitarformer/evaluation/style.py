"""A style judge: which tune type (reel, jig, hornpipe, air, ...) a piece's notes sound like.

The Style control is measured from notes, as every control is: a small classifier fitted on real tunes whose type
their ABC header names (the built-in corpus, data/tune_labels.py) reads a piece's notes and names a style. Its
accuracy on held-out real tunes is the ceiling a model's riffs are read against: a riff asked for a jig that the
judge calls a jig as often as it calls real jigs jigs adheres fully.

Features come from the notes and the meter only (no tempo, no title, no tokens): the time signature, the rhythm
(inter-onset intervals, where onsets fall in the beat and in the bar, long-short and short-long pairs, density),
the melody (range, intervals, contour, pitch-class entropy, scale consistency) and the form (bars repeated). The
classifier is multinomial logistic regression with balanced class weights and an L2 penalty, fitted by full-batch
gradient descent from zero weights: convex, so the same tunes give the same judge on every machine.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import symusic

from guitarformer.data.corpus import corpus_labels
from guitarformer.errors import GuitarformerError
from guitarformer.evaluation.features import Piece, piece_of, pitch_class_entropy, scale_consistency, segments
from guitarformer.evaluation.form import repeat_share

STYLE_BARS = 8  # the window a piece is judged on: riffs are judged on their first 8 bars, tunes on 8-bar windows
MIN_PIECES = 20  # train tunes a style needs to be judged at all (fewer: the judge could not learn it)
METERS = ((2, 4), (3, 4), (4, 4), (2, 2), (6, 8), (9, 8), (12, 8), (3, 8), (3, 2))
IOI_BINS = np.array([0.25, 1 / 3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0])  # quarters: 16th .. dotted half
PHASES = np.array([0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.75])  # where in the quarter note an onset falls
BAR_CELLS = 24  # onset positions in the bar: 24 cells resolve eighths (4/4), triplet eighths and 6/8's eighths


def _nearest(values: np.ndarray, bins: np.ndarray, circular: bool = False) -> np.ndarray:
    d = np.abs(values[:, None] - bins[None, :])
    if circular:
        d = np.minimum(d, 1.0 - d)
    return d.argmin(1)


def _shares(index: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(index, minlength=n)[:n] / len(index) if len(index) else np.zeros(n)


def _rhythm(p: Piece) -> list[float]:
    """Inter-onset intervals (histogram, dotted pairs), onset phases in the beat and the bar, density, texture."""
    onsets = np.unique(np.round(p.onset, 4))
    ioi = np.diff(onsets)
    ioi_hist = _shares(_nearest(np.log(np.maximum(ioi, 1e-3)), np.log(IOI_BINS)), len(IOI_BINS))
    phase_hist = _shares(_nearest(onsets % 1.0, PHASES, circular=True), len(PHASES))
    cells = np.floor((onsets % p.bar) / p.bar * BAR_CELLS + 1e-6).astype(np.int64) % BAR_CELLS
    bar_hist = _shares(cells, BAR_CELLS)
    pairs = np.stack([ioi[:-1], ioi[1:]], 1) if len(ioi) >= 2 else np.zeros((0, 2))
    long_short = float(np.mean(pairs[:, 0] > 1.5 * pairs[:, 1])) if len(pairs) else 0.0  # hornpipe's dotted pairs
    short_long = float(np.mean(pairs[:, 1] > 1.5 * pairs[:, 0])) if len(pairs) else 0.0  # strathspey's snaps
    span = max(p.span, 1e-6)
    density = len(onsets) / span
    per_onset = len(p.onset) / max(len(onsets), 1)
    # How much of the gap to the next onset a note holds: detached airs vs running reels.
    nxt = np.searchsorted(onsets, np.round(p.onset, 4), side="right")
    inner = nxt < len(onsets)
    gap = onsets[nxt[inner]] - p.onset[inner]
    held = float(np.mean(np.minimum(p.duration[inner] / np.maximum(gap, 1e-6), 2.0))) if inner.any() else 1.0
    return [*ioi_hist, *phase_hist, *bar_hist, long_short, short_long, density, math.log(max(density, 1e-3)),
            per_onset, held, float(np.median(ioi)) if len(ioi) else 0.0]


def _melody(p: Piece) -> list[float]:
    """Register, intervals between successive onsets' top notes, contour and key-ness."""
    if len(p.pitch) < 2:
        return [0.0] * 11
    order = np.lexsort((-p.pitch, p.onset))
    onset, pitch = p.onset[order], p.pitch[order]
    top = pitch[np.r_[True, np.diff(onset) > 1e-6]].astype(np.float64)  # the highest note of each onset
    step = np.diff(top)
    moving = step[step != 0]
    turns = np.sum(np.sign(moving[1:]) != np.sign(moving[:-1])) / max(len(moving) - 1, 1) if len(moving) else 0.0
    a = np.abs(step) if len(step) else np.zeros(1)
    return [float(p.pitch.max() - p.pitch.min()) / 12, float(p.pitch.std()) / 12, (float(p.pitch.mean()) - 55) / 12,
            float(a.mean()), float(np.mean(a == 0)), float(np.mean((a >= 1) & (a <= 2))),
            float(np.mean((a >= 3) & (a <= 4))), float(np.mean(a >= 5)), float(turns),
            pitch_class_entropy(p), scale_consistency(p)]


def _form(p: Piece) -> list[float]:
    """The share of the piece's bars that repeat an earlier bar exactly (evaluation/form.py's measure, on the
    piece's first meter)."""
    grid = 12  # a 1/12-quarter grid: decoded notes sit on it
    bar = max(1, int(round(p.bar * grid)))
    per_bar: dict[int, list[tuple[int, int, int]]] = {}
    for on, du, pi in zip(np.round(p.onset * grid).astype(int), np.round(p.duration * grid).astype(int), p.pitch):
        per_bar.setdefault(int(on) // bar, []).append((int(on) % bar, int(du), int(pi)))
    bars = [tuple(sorted(per_bar.get(b, []))) for b in range(max(per_bar, default=-1) + 1)]
    return [repeat_share(bars) or 0.0]


def style_features(p: Piece) -> np.ndarray:
    """The judge's view of a piece: a fixed-length vector (see the module docstring), finite for any piece."""
    meter = [float(p.meter == m) for m in METERS]
    meter.append(float(p.meter not in METERS))
    if len(p.onset) < 2:
        return np.zeros(len(FEATURE_NAMES))
    x = np.array([*meter, p.bar / 4, *_rhythm(p), *_melody(p), *_form(p)], dtype=np.float64)
    return np.nan_to_num(x)


FEATURE_NAMES = (
    *[f"meter_{n}/{d}" for n, d in METERS], "meter_other", "bar_quarters",
    *[f"ioi_{b:.2f}" for b in IOI_BINS], *[f"phase_{b:.2f}" for b in PHASES],
    *[f"bar_cell_{k}" for k in range(BAR_CELLS)], "long_short", "short_long", "density", "log_density",
    "notes_per_onset", "held", "median_ioi",
    "range", "pitch_std", "mean_pitch", "mean_interval", "repeated_notes", "steps", "thirds", "leaps", "turns",
    "pitch_class_entropy", "scale_consistency", "repeated_bars",
)


@dataclass(frozen=True)
class StyleScore:
    """How often the judge named each style right: style -> (pieces judged that style, pieces of that style)."""

    per_style: dict[str, tuple[int, int]]

    @property
    def pieces(self) -> int:
        return sum(n for _, n in self.per_style.values())

    @property
    def overall(self) -> float:
        """Share of all pieces judged right (large styles weigh more)."""
        return sum(r for r, _ in self.per_style.values()) / self.pieces if self.pieces else math.nan

    @property
    def balanced(self) -> float:
        """Mean over styles of each style's share judged right (every style weighs the same)."""
        shares = [r / n for r, n in self.per_style.values() if n]
        return float(np.mean(shares)) if shares else math.nan


@dataclass(frozen=True)
class StyleJudge:
    """A fitted judge: standardisation and softmax weights over `styles` (see the module docstring)."""

    styles: tuple[str, ...]
    mean: np.ndarray  # (F,)
    scale: np.ndarray  # (F,)
    weights: np.ndarray  # (F, K)
    bias: np.ndarray  # (K,)

    @classmethod
    def fit(cls, pieces: Sequence[Piece], labels: Sequence[str], l2: float = 1e-3, steps: int = 1500,
            lr: float = 0.05, min_pieces: int = MIN_PIECES, styles: Sequence[str] | None = None) -> StyleJudge:
        """Fit on pieces and their styles. The judge learns `styles` (default: those with at least `min_pieces`
        pieces); pieces of other styles are left out and the judge never names them. Raises GuitarformerError when
        fewer than two styles are left."""
        if len(pieces) != len(labels):
            raise GuitarformerError(f"{len(pieces)} pieces but {len(labels)} labels", "give one style per piece")
        counts = Counter(labels)
        styles = tuple(sorted(s for s in (styles or counts) if counts[s] >= (1 if styles else min_pieces)))
        if len(styles) < 2:
            raise GuitarformerError(f"a style judge needs two styles with at least {min_pieces} pieces each; the "
                                    f"pieces have {dict(sorted(counts.items()))}",
                                    "fit on more labelled tunes, or lower min_pieces")
        keep = [i for i, s in enumerate(labels) if s in styles]
        x = np.stack([style_features(pieces[i]) for i in keep])
        y = np.array([styles.index(labels[i]) for i in keep])
        mean, scale = x.mean(0), x.std(0)
        scale[scale < 1e-9] = 1.0
        z = (x - mean) / scale
        w, b = _softmax_regression(z, y, len(styles), l2, steps, lr)
        return cls(styles, mean, scale, w, b)

    def probabilities(self, pieces: Sequence[Piece]) -> np.ndarray:
        """(N, K) probability of each style for each piece."""
        if not len(pieces):
            return np.zeros((0, len(self.styles)))
        z = (np.stack([style_features(p) for p in pieces]) - self.mean) / self.scale
        return _softmax(z @ self.weights + self.bias)

    def predict_many(self, pieces: Sequence[Piece]) -> list[str]:
        return [self.styles[k] for k in self.probabilities(pieces).argmax(1)]

    def predict(self, piece: Piece) -> str:
        """The style the piece's notes sound most like."""
        return self.predict_many([piece])[0]

    def accuracy(self, pieces: Sequence[Piece], labels: Sequence[str]) -> StyleScore:
        """How often the judge names each piece's style, per style (pieces of styles it does not know are left
        out: it could never name them)."""
        known = [(p, s) for p, s in zip(pieces, labels) if s in self.styles]
        said = self.predict_many([p for p, _ in known])
        per: dict[str, tuple[int, int]] = {}
        for (_, s), got in zip(known, said):
            r, n = per.get(s, (0, 0))
            per[s] = (r + (got == s), n + 1)
        return StyleScore(dict(sorted(per.items())))


def _softmax(a: np.ndarray) -> np.ndarray:
    a = a - a.max(1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(1, keepdims=True)


def _softmax_regression(z: np.ndarray, y: np.ndarray, k: int, l2: float, steps: int, lr: float
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Weights and bias minimising the class-balanced cross-entropy plus l2 * |W|^2, by full-batch Adam from zero:
    balanced, so a judge of many reels does not call everything a reel."""
    n, f = z.shape
    counts = np.bincount(y, minlength=k).astype(np.float64)
    weight = (n / (k * counts))[y] / n  # (N,) each class weighs the same in total
    onehot = np.eye(k)[y]
    params = [np.zeros((f, k)), np.zeros(k)]
    m = [np.zeros_like(q) for q in params]
    v = [np.zeros_like(q) for q in params]
    for t in range(1, steps + 1):
        g = (_softmax(z @ params[0] + params[1]) - onehot) * weight[:, None]  # (N, K) d loss / d logits
        grads = [z.T @ g + 2 * l2 * params[0], g.sum(0)]
        for i, gr in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * gr
            v[i] = 0.999 * v[i] + 0.001 * gr * gr
            params[i] -= lr * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
    return params[0], params[1]


def windows(piece: Piece, bars: int = STYLE_BARS, most: int = 4) -> list[Piece]:
    """Up to `most` consecutive `bars`-bar windows of a piece, as a riff of `bars` bars is judged."""
    return segments(piece, bars * piece.bar, most)


def labelled_windows(dataset: Path, split: str, most: int) -> tuple[list[Piece], list[str], Counter]:
    """Up to `most` 8-bar windows of each labelled tune of the split (`labelled_tunes`), their styles, and the
    number of tunes per style."""
    files, styles = labelled_tunes(dataset, split)
    pieces, labels = [], []
    for f, s in zip(files, styles):
        for w in windows(piece_of(symusic.Score(str(f))), most=most):
            pieces.append(w)
            labels.append(s)
    return pieces, labels, Counter(styles)


@dataclass(frozen=True)
class CorpusJudge:
    """A judge fitted on a corpus dataset's train tunes, with its ceiling on the val tunes and what it was fitted on."""

    judge: StyleJudge
    ceiling: StyleScore  # the judge on the first 8 bars of each val tune of a style it knows
    windows: int  # train windows fitted
    tunes: Counter  # train tunes per style (every style, judged or not)


def corpus_judge(dataset: Path, min_tunes: int = MIN_PIECES, most: int = 4) -> CorpusJudge:
    """The style judge of a prepared built-in-corpus dataset: fitted on up to `most` 8-bar windows of every train
    tune of each style with at least `min_tunes` train tunes, scored on the first 8 bars of the val tunes."""
    train, labels, tunes = labelled_windows(dataset, "train", most)
    judge = StyleJudge.fit(train, labels, styles=sorted(s for s, n in tunes.items() if n >= min_tunes))
    val, val_labels, _ = labelled_windows(dataset, "val", 1)
    return CorpusJudge(judge, judge.accuracy(val, val_labels), len(train), tunes)


def labelled_tunes(dataset: Path, split: str) -> tuple[list[Path], list[str]]:
    """The MIDI files of a prepared built-in-corpus dataset's `split` that carry a style (their tune type), with it.

    The split is the dataset's own (manifest.jsonl), the styles the corpus's labels.json beside the files."""
    manifest = Path(dataset) / "manifest.jsonl"
    if not manifest.is_file():
        raise GuitarformerError(f"{dataset} has no manifest.jsonl: it is not a prepared dataset",
                                "pass the built-in corpus's dataset folder (guitarformer prepare, no folder)")
    files: list[Path] = []
    styles: list[str] = []
    given: dict[str, dict[str, str]] = {}
    for line in manifest.read_text().splitlines():
        row = json.loads(line)
        if row.get("status") != "ok" or row.get("split") != split:
            continue
        path = Path(row["path"])
        corpus = next((d for d in path.parents if (d / "labels.json").is_file()), path.parent.parent)
        if str(corpus) not in given:
            given[str(corpus)] = corpus_labels(corpus) if (corpus / "labels.json").is_file() else {}
        style = given[str(corpus)].get(str(path.resolve()), {}).get("Style")
        if style:
            files.append(path)
            styles.append(style)
    if not files:
        raise GuitarformerError(f"no {split} file of {dataset} has a style: only the built-in corpus labels its "
                                "tunes with their types", "pass the built-in corpus's dataset (guitarformer prepare, "
                                "no folder; GUITARFORMER_CACHE picks the cache it lives in)")
    return files, styles
