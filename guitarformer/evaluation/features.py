"""Musical features of pieces (pitch-class entropy, density, groove, ...) and their overlap with real music.

Density and polyphony are music/texture.py's, the same definitions the Density and Poly controls bin."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from guitarformer.music import texture


@dataclass
class Piece:
    """Notes of one piece (or segment) in quarter notes, with its bar length and the (string, fret) a human
    gave them where the source knows it."""

    onset: np.ndarray  # (N,) quarters
    duration: np.ndarray  # (N,) quarters
    pitch: np.ndarray  # (N,) MIDI
    bar: float = 4.0  # quarters per bar
    meter: tuple[int, int] = (4, 4)  # the first time signature (6/8 and 3/4 share a bar length, not a meter)
    qpm: float = 120.0  # the first tempo, quarter notes per minute
    length: float = 0.0  # quarters; 0 = end of the last note
    frets: list[tuple[int, int]] | None = None
    tuning: tuple[int, ...] = (40, 45, 50, 55, 59, 64)
    capo: int = 0
    program: int | None = None  # General MIDI program of the (first) track: picks tab.fret's costs

    @property
    def span(self) -> float:
        end = float((self.onset + self.duration).max()) if len(self.onset) else 0.0
        return max(self.length or end, 1.0)


def piece_of(score, tuning=None, capo: int = 0, frets=None) -> Piece:
    """A Piece from a symusic Score (all tracks' notes) in quarter notes."""
    tpq = score.ticks_per_quarter
    on, du, pi = [], [], []
    for tr in score.tracks:
        a = tr.notes.numpy()
        on.append(a["time"]), du.append(a["duration"]), pi.append(a["pitch"])
    on = np.concatenate(on).astype(np.float64) / tpq if on else np.zeros(0)
    du = np.concatenate(du).astype(np.float64) / tpq if du else np.zeros(0)
    pi = np.concatenate(pi).astype(np.int64) if pi else np.zeros(0, np.int64)
    bar, meter = 4.0, (4, 4)
    if len(score.time_signatures):
        ts = score.time_signatures[0]
        bar, meter = ts.numerator * 4.0 / ts.denominator, (int(ts.numerator), int(ts.denominator))
    qpm = float(score.tempos[0].qpm) if len(score.tempos) else 120.0
    p = Piece(on, du, pi, bar=bar, meter=meter, qpm=qpm, frets=frets, capo=capo,
              program=score.tracks[0].program if len(score.tracks) else None)
    if tuning:
        p.tuning = tuple(tuning)
    return p


def segments(p: Piece, length: float, max_segments: int = 4, whole: bool = False) -> list[Piece]:
    """Consecutive `length`-quarter segments of a piece (at most max_segments, each with >= 2 notes). `whole`: only
    segments that end by the piece's end, taken as the bar line after its last note (a piece's last, partial segment
    would be scored as `length` quarters with the notes of fewer: a sparser piece than the music is)."""
    end = math.ceil(p.span / p.bar - 1e-9) * p.bar if whole else math.inf
    out = []
    k = 0
    while k < max_segments and k * length < p.span and (k + 1) * length <= end + 1e-9:
        a, b = k * length, (k + 1) * length
        m = (p.onset >= a) & (p.onset < b)
        if m.sum() >= 2:
            out.append(replace(p, onset=p.onset[m] - a, duration=p.duration[m], pitch=p.pitch[m], length=length,
                               frets=None))
        k += 1
    return out


MAJOR = np.array([0, 2, 4, 5, 7, 9, 11])
HARMONIC_MINOR = np.array([0, 2, 3, 5, 7, 8, 11])  # natural minor is a rotation of major: add harmonic minor


def pitch_class_entropy(p: Piece) -> float:
    """Shannon entropy (bits) of the pitch-class histogram: 0 = one pitch class, log2(12) = 3.58 = all equal."""
    h = np.bincount(p.pitch % 12, minlength=12).astype(np.float64)
    q = h[h > 0] / h.sum()
    return float(-(q * np.log2(q)).sum()) if h.sum() else math.nan


def pitch_range(p: Piece) -> float:
    return float(p.pitch.max() - p.pitch.min()) if len(p.pitch) else math.nan


def used_pitch_classes(p: Piece) -> float:
    return float(len(np.unique(p.pitch % 12))) if len(p.pitch) else math.nan


def scale_consistency(p: Piece) -> float:
    """Largest share of notes inside one major or harmonic-minor scale (any of the 24 keys)."""
    if not len(p.pitch):
        return math.nan
    pc = p.pitch % 12
    best = 0.0
    for scale in (MAJOR, HARMONIC_MINOR):
        for root in range(12):
            best = max(best, float(np.isin(pc, (scale + root) % 12).mean()))
    return best


def density(p: Piece) -> float:
    """Distinct onsets per quarter note: music.texture.density, as the Density control measures a bar."""
    return texture.density(p.onset.tolist(), p.span)


def notes_per_second(p: Piece) -> float:
    """Notes (every note of a chord) per second at the piece's first tempo."""
    return len(p.pitch) / (p.span * 60.0 / p.qpm)


def inter_onset_interval(p: Piece) -> float:
    """Mean time between consecutive distinct onsets, in quarter notes."""
    t = np.unique(np.round(p.onset, 4))
    return float(np.diff(t).mean()) if len(t) >= 2 else math.nan


def polyphony(p: Piece) -> float:
    """Mean notes per onset (1 = single notes): music.texture.polyphony, what the Poly control bins per bar."""
    return texture.polyphony(p.onset.tolist())


def groove_consistency(p: Piece, grid: int = 12) -> float:
    """1 - mean Hamming distance between consecutive bars' onset patterns (1/12-quarter grid), per grid cell."""
    res = max(1, int(round(p.bar * grid)))
    n_bars = int(math.ceil(p.span / p.bar - 1e-9))
    if n_bars < 2:
        return math.nan
    pat = np.zeros((n_bars, res), dtype=bool)
    cell = np.round(p.onset * grid).astype(np.int64)
    b, c = cell // res, cell % res
    ok = b < n_bars
    pat[b[ok], c[ok]] = True
    return float(1.0 - (pat[1:] != pat[:-1]).sum(1).mean() / res)


FEATURES: dict[str, Callable[[Piece], float]] = {
    "pitch_class_entropy": pitch_class_entropy,
    "pitch_range": pitch_range,
    "used_pitch_classes": used_pitch_classes,
    "scale_consistency": scale_consistency,
    "density": density,
    "notes_per_second": notes_per_second,
    "inter_onset_interval": inter_onset_interval,
    "polyphony": polyphony,
    "groove_consistency": groove_consistency,
}


def features(pieces: Sequence[Piece]) -> dict[str, np.ndarray]:
    """Per-piece values of every feature (NaN where a piece is too short for it)."""
    return {k: np.array([f(p) for p in pieces], dtype=np.float64) for k, f in FEATURES.items()}


def length_matched(samples: Sequence[Piece], reference: Sequence[Piece]) -> tuple[list[Piece], float]:
    """The reference cut into segments as long as the median sample, rounded up to whole 4/4 bars (features such as
    pitch range grow with length), and that length in quarters (16 with no samples). Only whole segments: a piece's
    partial last segment (and a piece shorter than one segment) is left out, unless no piece has a whole segment."""
    seg = 4.0 * max(1, math.ceil(float(np.median([p.span for p in samples])) / 4.0)) if len(samples) else 16.0
    cut = [q for p in reference for q in segments(p, seg, whole=True)]
    return cut or [q for p in reference for q in segments(p, seg)], seg


def overlap_area(a: Sequence[float], b: Sequence[float], points: int = 4096) -> float:
    """Overlapping area of two 1-D distributions (Gaussian KDEs of the values, Scott's bandwidth): 1 = the
    same distribution, 0 = disjoint. NaNs are dropped; fewer than 2 values on either side gives NaN."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 2 or len(b) < 2:
        return math.nan
    both = np.concatenate([a, b])
    lo, hi = both.min(), both.max()
    if hi - lo < 1e-12:
        return 1.0
    floor = (hi - lo) / 500  # a constant set is a narrow bump, not a spike the grid cannot see

    def bw(x):
        return max(1.06 * x.std(ddof=1) * len(x) ** -0.2, floor)

    ha, hb = bw(a), bw(b)
    grid = np.linspace(lo - 4 * max(ha, hb), hi + 4 * max(ha, hb), points)

    def kde(x, h):
        d = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / h) ** 2).sum(1)
        return d / np.trapezoid(d, grid)

    return float(min(1.0, np.trapezoid(np.minimum(kde(a, ha), kde(b, hb)), grid)))


def compare(samples: Sequence[Piece], reference: Sequence[Piece], seed: int = 0) -> dict[str, dict[str, float]]:
    """Per feature: mean/std on both sets, OA(samples, reference) and the ceiling OA(reference half, other half)."""
    fs, fr = features(samples), features(reference)
    order = np.random.default_rng(seed).permutation(len(reference))
    h1, h2 = order[: len(order) // 2], order[len(order) // 2:]
    out = {}
    for k in FEATURES:
        s, r = fs[k], fr[k]
        out[k] = {"samples_mean": float(np.nanmean(s)) if np.isfinite(s).any() else math.nan,
                  "samples_std": float(np.nanstd(s)) if np.isfinite(s).any() else math.nan,
                  "reference_mean": float(np.nanmean(r)) if np.isfinite(r).any() else math.nan,
                  "reference_std": float(np.nanstd(r)) if np.isfinite(r).any() else math.nan,
                  "oa": overlap_area(s, r), "oa_ceiling": overlap_area(r[h1], r[h2])}
    return out


# ---------------------------------------------------------------- playability
