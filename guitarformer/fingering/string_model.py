"""A small learned string model for `fret()`: a bidirectional GRU over a part's notes that predicts the tab
string of each note from its context; `fret()` adds `FretCosts.nn_weight * -log p(string | context)` per
note to the Viterbi's costs.

Inputs are relative to the tuning and capo (the fret each note would have on each string, and which strings
can play it), so any tuning of up to `N_SLOTS` strings works. Trained on the fit half of the fretting data
(`benchmarks/bench_fretting.py --train-nn`); the weights ship as `string_model.pt` beside this file. Without that
file `string_costs` returns None and `fret()` uses the hand-made costs alone. Its inputs are string_features.py's;
fret() imports this module (and torch) only when it runs the model.
"""

from __future__ import annotations

import functools
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from guitarformer.fingering.string_features import N_FRET_EMB, N_INPUT, N_SLOTS, note_features

WEIGHTS = Path(__file__).with_name("string_model.pt")


class FretNet(nn.Module):
    def __init__(self, hidden: int = 64, layers: int = 2):
        super().__init__()
        self.inp = nn.Sequential(nn.Linear(N_INPUT, hidden), nn.ReLU())
        self.gru = nn.GRU(hidden, hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.slot = nn.Linear(2 * hidden, N_SLOTS)
        self.proj = nn.Linear(2 * hidden, 32)
        self.fret_emb = nn.Embedding(N_FRET_EMB * N_SLOTS, 32)

    def forward(self, x, frets, playable):
        """x (B, T, inputs), frets/playable (B, T, N_SLOTS) -> log-probabilities (B, T, N_SLOTS)."""
        h, _ = self.gru(self.inp(x))
        slots = torch.arange(N_SLOTS, device=x.device) * N_FRET_EMB
        e = self.fret_emb(frets + slots)  # (B, T, S, 32): embedding of (string, fret)
        logits = self.slot(h) + (e * self.proj(h).unsqueeze(2)).sum(-1)
        logits = logits.masked_fill(~playable, -1e4)
        return torch.log_softmax(logits, -1)




@functools.lru_cache(maxsize=2)
def load(path: str | None = None):
    """The trained model (eval mode), or None when the weights file is missing."""
    p = Path(path) if path else WEIGHTS
    if not p.exists():
        return None
    blob = torch.load(p, map_location="cpu", weights_only=True)
    with torch.random.fork_rng(devices=[]):  # the random init is overwritten: it must not move the caller's RNG
        model = FretNet(**blob["config"])
    model.load_state_dict(blob["state"])
    model.eval()
    return model


def string_costs(notes_t: Sequence[tuple[int, int, int]], tuning: Sequence[int], capo: int = 0,
                 max_fret: int = 24, model=None) -> np.ndarray | None:
    """-log p(string) per note (input order) and string index (0 = lowest, as `tab._decode` indexes them), with a
    last column 0 for 'unplayable'; None without a model or for tunings of more than N_SLOTS strings."""
    model = model if model is not None else load()
    n = len(tuning)
    if model is None or n > N_SLOTS or not len(notes_t):
        return None
    order, x, frets, playable = note_features(notes_t, tuning, capo, max_fret)
    with torch.inference_mode():
        lp = model(torch.from_numpy(x)[None], torch.from_numpy(frets)[None], torch.from_numpy(playable)[None])[0]
    lp = lp.numpy().astype(np.float64)
    cost = np.zeros((len(notes_t), n + 1))
    # slot s = tab string s + 1 = string index n - 1 - s; rounded so tiny float differences cannot flip a tie
    cost[order[:, None], (n - 1 - np.arange(n))[None, :]] = np.round(-np.maximum(lp[:, :n], -30.0), 4)
    return cost


def _log(msg: str) -> None:  # pragma: no cover
    print(msg, flush=True)


Example = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # features, frets, playable, human slot per note


def _examples(parts) -> list[Example]:
    """One example per part: its note features and the human string's slot (-100 where not learnable)."""
    data = []
    for _, tuning, capo, notes, human in parts:
        if len(tuning) > N_SLOTS:
            continue
        order, x, frets, playable = note_features(notes, tuning, capo, 24)
        y = np.array([human[i][0] - 1 for i in order], dtype=np.int64)  # slot = tab string - 1
        good = (y >= 0) & (y < N_SLOTS)
        good[good] &= playable[np.flatnonzero(good), y[good]]
        y[~good] = -100
        data.append((x, frets, playable, y))
    return data


def _accuracy(model: FretNet, data: list[Example]) -> float:
    """String accuracy over the learnable notes of `data`; the model is left in training mode."""
    model.eval()
    hit = tot = 0
    with torch.inference_mode():
        for x, frets, playable, y in data:
            lp = model(torch.from_numpy(x)[None], torch.from_numpy(frets)[None], torch.from_numpy(playable)[None])[0]
            pred = lp.argmax(-1).numpy()
            hit += int(((pred == y) & (y >= 0)).sum())
            tot += int((y >= 0).sum())
    model.train()
    return hit / max(tot, 1)


def _epoch_windows(data: list[Example], window: int, rng: random.Random) -> list[tuple[int, int]]:
    """(example, start) of every window of an epoch, shuffled; each part's windows start at a random offset."""
    wins = []
    for k, d in enumerate(data):
        m = len(d[3])
        off = rng.randrange(window) if m > window else 0
        starts = [0] + list(range(off, m, window)) if off else list(range(0, m, window))
        wins += [(k, s) for s in starts if s < m]
    rng.shuffle(wins)
    return wins


def _batch(data: list[Example], wins: list[tuple[int, int]], window: int) -> tuple[torch.Tensor, ...]:
    """Windows padded to one length: features (B, T, F), frets and playable (B, T, slots), targets (B, T)."""
    sl = [(data[k], s, min(len(data[k][3]), s + window)) for k, s in wins]
    T = max(e - s for _, s, e in sl)
    B = len(sl)
    x = torch.zeros(B, T, data[0][0].shape[1])
    fr = torch.zeros(B, T, N_SLOTS, dtype=torch.long)
    pl = torch.ones(B, T, N_SLOTS, dtype=torch.bool)
    y = torch.full((B, T), -100, dtype=torch.long)
    for j, (d, s, e) in enumerate(sl):
        x[j, :e - s] = torch.from_numpy(d[0][s:e])
        fr[j, :e - s] = torch.from_numpy(d[1][s:e])
        pl[j, :e - s] = torch.from_numpy(d[2][s:e])
        y[j, :e - s] = torch.from_numpy(d[3][s:e])
    return x, fr, pl, y


@dataclass(frozen=True)
class NetSize:
    """The string model's size (`FretNet`'s arguments, saved with its weights)."""

    hidden: int = 64
    layers: int = 2


@dataclass(frozen=True)
class FitSchedule:
    """How `fit` trains: `epochs` passes over windows of `window` notes, `batch` windows a step, peak learning
    rate `lr` (one cycle), `seed` for the initial weights and the windows' order."""

    epochs: int = 12
    window: int = 256
    batch: int = 32
    lr: float = 3e-3
    seed: int = 0


def fit(parts, val_parts=None, schedule: FitSchedule = FitSchedule(), size: NetSize = NetSize(),
        out: Path | None = None):
    """Fit on `parts` ((name, tuning, capo, notes, human (string, fret)) as in benchmarks/bench_fretting.py):
    cross-entropy of the human tab string, windows of `schedule.window` notes. Returns the model (best epoch on
    `val_parts` by string accuracy when given) and saves it to `out`."""
    epochs, window, batch, lr = schedule.epochs, schedule.window, schedule.batch, schedule.lr
    torch.manual_seed(schedule.seed)
    rng = random.Random(schedule.seed)
    tr, va = _examples(parts), _examples(val_parts or [])
    model = FretNet(size.hidden, size.layers)
    n_par = sum(p.numel() for p in model.parameters())
    _log(f"model: {n_par} parameters; {sum(len(d[3]) for d in tr)} training notes")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    total_steps = epochs * max(1, sum(math.ceil(len(d[3]) / window) for d in tr) // batch + 1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total_steps, pct_start=0.1)
    loss_fn = torch.nn.NLLLoss(ignore_index=-100)

    best, best_state = -1.0, None
    step = 0
    for epoch in range(epochs):
        t0 = time.perf_counter()
        wins = _epoch_windows(tr, window, rng)
        tot_loss = 0.0
        for b in range(0, len(wins), batch):
            x, fr, pl, y = _batch(tr, wins[b:b + batch], window)
            lp = model(x, fr, pl)
            loss = loss_fn(lp.reshape(-1, N_SLOTS), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if step < total_steps - 1:
                sched.step()
            step += 1
            tot_loss += float(loss.detach()) * len(x)
        acc = _accuracy(model, va) if va else float("nan")
        _log(f"nn epoch {epoch}: loss {tot_loss / len(wins):.4f}  val string acc {acc:.4f}  "
             f"({time.perf_counter() - t0:.0f}s)")
        if not va or acc > best:
            best = acc
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    model.eval()
    if out is not None:
        torch.save({"config": asdict(size), "state": best_state}, out)
    return model
