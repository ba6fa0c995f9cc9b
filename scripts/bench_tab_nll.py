"""NLL per note of runs trained on different tokenizations of the same files (nats/note is the unit that compares
tokenizations: a tab token stream has more tokens per note, so nats/token alone would flatter it).

    python scripts/bench_tab_nll.py RUN_DIR [RUN_DIR ...] [--split val] [--device auto]

Each run is scored on its own dataset's split (the split comes from each source file's content hash, so runs on
two tokenizations of one corpus score the same tunes). Notes are counted as the split's Pitch tokens.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from guitarformer.data.dataset import TokenSplit  # noqa: E402
from guitarformer.evaluation.likelihood import stream_nll  # noqa: E402
from guitarformer.runs import load_run  # noqa: E402
from guitarformer.runtime import resolve_device  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--split", default="val", choices=["val", "test"])
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    dev = resolve_device(args.device)
    print("| run | tokenizer | val tokens | notes | tokens/note | nats/token | **nats/note** |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for run in args.runs:
        model, tok, cfg = load_run(run, None, str(dev))
        part = TokenSplit(Path(cfg.data.dataset), args.split)
        pitch = {i for t, i in tok.vocab.items() if t.startswith("Pitch_")}
        if len(part) < 2:
            print(f"| {run.name} | {type(tok).__name__} | no {args.split} tokens | | | | |")
            continue
        notes = int(np.isin(np.asarray(part.tokens), sorted(pitch)).sum())
        r = stream_nll(model, part, cfg.model.block_size, dev)
        total = r["nll"] * r["tokens"]
        print(f"| {run.name} | {type(tok).__name__} | {r['tokens']:,} | {notes:,} | {r['tokens'] / notes:.3f} | "
              f"{r['nll']:.4f} | **{total / notes:.4f}** |", flush=True)


if __name__ == "__main__":
    main()
