"""The learned string model's inputs (string_model.py): per note, relative to the tuning and capo, the fret it would
have on each string, which strings can play it, and its place among its neighbours. numpy only, so fret() imports
torch (string_model.py) only where it runs the model, and reading a file that keeps its own fingering never does."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from guitarformer.fingering.notes import group_onsets

N_SLOTS = 7  # tab strings 1..7 (1 = highest)
N_FRET_EMB = 25
N_INPUT = 2 * N_SLOTS + 12


def note_features(notes_t: Sequence[tuple[int, int, int]], tuning: Sequence[int], capo: int = 0,
                  max_fret: int = 24) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, x, frets, playable): `order` the note indices in model order (by onset, highest pitch first),
    x (notes, N_INPUT) float32 inputs, frets (notes, N_SLOTS) int fret on each tab string (clipped to 0..24),
    playable (notes, N_SLOTS) bool; all rows in `order`."""
    n = len(tuning)
    groups = group_onsets(notes_t)
    order = np.array([i for g in groups for i in g], dtype=np.int64)
    m = len(order)
    x = np.zeros((m, N_INPUT), dtype=np.float32)
    frets = np.zeros((m, N_SLOTS), dtype=np.int64)
    playable = np.zeros((m, N_SLOTS), dtype=bool)
    if m == 0:
        return order, x, frets, playable
    pitch = np.array([notes_t[i][2] for i in order], dtype=np.float64)
    dur = np.array([notes_t[i][1] for i in order], dtype=np.float64)
    opens = np.full(N_SLOTS, np.nan)
    k = min(n, N_SLOTS)
    opens[:k] = [tuning[n - 1 - s] + capo for s in range(k)]  # slot s = tab string s + 1
    f = pitch[:, None] - opens[None, :]
    ok = (f >= 0) & (f <= max_fret - capo)
    playable[:] = ok
    frets[:] = np.clip(np.nan_to_num(f, nan=0.0), 0, N_FRET_EMB - 1).astype(np.int64)
    x[:, :N_SLOTS] = ok
    x[:, N_SLOTS:2 * N_SLOTS] = np.where(ok, np.nan_to_num(f) / 12.0, 0.0)
    c = 2 * N_SLOTS
    x[:, c] = (pitch - 64) / 12.0
    x[:, c + 1] = (pitch - (min(tuning) + capo)) / 12.0
    x[:, c + 2] = ok.sum(1) / 6.0
    x[:, c + 3] = n == 7
    # Time, in units of the part's median gap between onsets (the tick resolution differs between sources).
    starts = np.array([notes_t[g[0]][0] for g in groups], dtype=np.float64)
    gaps = np.diff(starts)
    unit = float(np.median(gaps)) if len(gaps) else 1.0
    unit = unit if unit > 0 else 1.0
    onset_idx = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    prev_gap = np.concatenate([[4 * unit], gaps])[onset_idx]
    next_gap = np.concatenate([gaps, [4 * unit]])[onset_idx]
    x[:, c + 4] = np.log1p(prev_gap / unit)
    x[:, c + 5] = np.log1p(next_gap / unit)
    x[:, c + 6] = np.log1p(np.maximum(dur, 0) / unit)
    size = np.repeat([len(g) for g in groups], [len(g) for g in groups])
    within = np.concatenate([np.arange(len(g)) for g in groups])
    x[:, c + 7] = size / 6.0
    x[:, c + 8] = within / 6.0
    x[:, c + 9] = size == 1
    top = np.array([notes_t[g[0]][2] for g in groups], dtype=np.float64)
    prev_top = np.concatenate([[top[0]], top[:-1]])[onset_idx]
    next_top = np.concatenate([top[1:], [top[-1]]])[onset_idx]
    x[:, c + 10] = np.clip(pitch - prev_top, -24, 24) / 12.0
    x[:, c + 11] = np.clip(next_top - pitch, -24, 24) / 12.0
    return order, x, frets, playable
