"""Per-bar control statistics of real guitar parts and the built-in corpus: the density tertiles that set
guitarformer.vocab.controls.DENSITY_THRESHOLDS, and how often each bar value occurs with them.

Usage: python benchmarks/measure_controls.py [--files 300] [--corpus-files 10] [--data ../shared/data/guitar]
Bars are read the way training sees them: through TabREMI's tokens (quantised), one value per bar with notes.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections import Counter
from pathlib import Path

import miditok
import numpy as np

from guitarformer.config import DataConfig
from guitarformer.vocab.controls import BAR, bar_controls, control_names
from guitarformer.data.corpus import build_corpus
from guitarformer.vocab.tab_tokens import TabREMI, bar_notes, control_params
from guitarformer.vocab.tokenization import encode, tokenizer_params
from guitarformer.fingering import fret
from guitarformer.readers import read_guitar

SUFFIXES = (".gp3", ".gp4", ".gp5", ".gpx", ".gp", ".txt", ".mid")


def bars_of(tok: TabREMI, files: list[Path]) -> tuple[list[float], Counter]:
    """Onsets per quarter of every bar with notes, and the counts of each bar control value."""
    density: list[float] = []
    values: Counter = Counter()
    for f in files:
        try:
            parts = read_guitar(f)
        except Exception:  # dirt in the shared data: a broken file is passed over
            continue
        for gs in parts:
            if not gs.track.notes:
                continue
            if gs.frets is None:
                gs.frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
            bars, lengths, tpq = bar_notes(tok, encode(tok, gs), gs.tuning, gs.capo)
            for notes, n in zip(bars, lengths):
                if notes:
                    density.append(len({x.onset for x in notes}) / (n / tpq))
                    values.update(f"{k}={v}" for k, v in bar_controls(notes, tpq, n).items())
    return density, values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "guitar")
    ap.add_argument("--files", type=int, default=300, help="real files drawn at random (seed 0)")
    ap.add_argument("--corpus-files", type=int, default=10, help="built-in corpus source books (0: none)")
    args = ap.parse_args()
    tok = TabREMI(miditok.TokenizerConfig(**tokenizer_params(DataConfig(tokenizer="TabREMI")), **control_params([])))
    real = sorted(p for p in args.data.rglob("*") if p.suffix.lower() in SUFFIXES) if args.data.is_dir() else []
    random.Random(0).shuffle(real)
    groups = {"real": real[: args.files]}
    if args.corpus_files:
        with tempfile.TemporaryDirectory() as tmp:
            out = build_corpus(Path(tmp) / "corpus", limit=args.corpus_files, workers=1, progress=False)
            groups["corpus"] = sorted((out / "midi").glob("*.mid"))
            results = {name: bars_of(tok, files) for name, files in groups.items()}
    else:
        results = {name: bars_of(tok, files) for name, files in groups.items()}
    pooled: list[float] = []
    for name, (density, values) in results.items():
        pooled += density
        q = np.quantile(density, [1 / 3, 2 / 3]) if density else [float("nan")] * 2
        print(f"{name}: {len(groups[name])} files, {len(density)} bars; onsets per quarter tertiles "
              f"{q[0]:.2f} {q[1]:.2f}")
        for c in control_names(BAR):
            counts = {k.split("=")[1]: v for k, v in values.items() if k.startswith(c + "=")}
            total = sum(counts.values()) or 1
            print(f"  {c:<8}" + "  ".join(f"{k} {v / total:.0%}" for k, v in sorted(counts.items())))
    q = np.quantile(pooled, [1 / 3, 2 / 3])
    print(f"pooled: {len(pooled)} bars; onsets per quarter tertiles {q[0]:.2f} {q[1]:.2f}")
    # Densities pile up on a grid (2.0: eighth notes), so a threshold on a tertile can put half the bars in one
    # bin: the share below each candidate shows where a cut falls between grid values.
    x = np.asarray(pooled)
    print("share of bars below:", "  ".join(f"{v:g}: {np.mean(x < v):.0%}" for v in
                                             (0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 4.0)))


if __name__ == "__main__":
    main()
