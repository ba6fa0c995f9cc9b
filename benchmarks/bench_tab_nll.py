"""NLL per note of runs trained on different tokenizations of the same files (nats/note is the unit that compares
tokenizations: a tab token stream has more tokens per note, so nats/token alone would flatter it).

    python benchmarks/bench_tab_nll.py RUN_DIR [RUN_DIR ...] [--split val] [--device auto] [--by-type]

Each run is scored on its own dataset's split (the split comes from each source file's content hash, so runs on
two tokenizations of one corpus score the same tunes), on the plain stream: a dataset with control tokens is read
without them (the tokens a run without controls scores; training validates the same way), and no infilling
examples. Notes are the split's note tokens (data.dataset.note_ids: Pitch, or NoteOn).
`--by-type` also splits each run's nats/note by the type of the token predicted (where the extra nats go).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from guitarformer import IGNORE_INDEX  # noqa: E402
from guitarformer.data.dataset import PLAIN, DecoderWindows, TokenSplit, note_ids  # noqa: E402
from guitarformer.vocab.tokenization import load_tokenizer  # noqa: E402
from guitarformer.models.kinds import kind_of  # noqa: E402
from guitarformer.models.loss import nll  # noqa: E402
from guitarformer.runs import load_run  # noqa: E402
from guitarformer.runtime import resolve_device  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--split", default="val", choices=["val", "test"])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--by-type", action="store_true")
    ap.add_argument("--data", type=Path, default=None, help="score every run on this dataset instead of its own (the "
                    "shipped model names none): its tokenizer must be the run's")
    args = ap.parse_args()
    dev = resolve_device(args.device)
    print("| run | tokenizer | val tokens | notes | tokens/note | nats/token | **nats/note** |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for run in args.runs:
        loaded = load_run(run, None, str(dev))
        model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
        dataset = args.data or cfg.data.dataset
        if dataset is None:
            sys.exit(f"{run} names no dataset (the shipped model): pass --data DATASET prepared with its tokenizer")
        if args.data is not None and load_tokenizer(args.data / "tokenizer.json").vocab != tok.vocab:
            sys.exit(f"{args.data} was tokenized with another vocabulary than {run}'s")
        part = TokenSplit(Path(dataset), args.split)
        if len(part) < 2:
            print(f"| {run.name} | {type(tok).__name__} | no {args.split} tokens | | | | |")
            continue
        notes = int(np.isin(np.asarray(part.tokens), note_ids(tok)).sum())
        r = plain_nll(model, part, cfg.model.block_size, dev)
        total = r["nll"] * r["tokens"]
        print(f"| {run.name} | {type(tok).__name__} | {r['tokens']:,} | {notes:,} | {r['tokens'] / notes:.3f} | "
              f"{r['nll']:.4f} | **{total / notes:.4f}** |", flush=True)
        if args.by_type:
            by = by_type(model, tok, part, cfg.model.block_size, dev)
            print("  " + ", ".join(f"{k} {v / notes:.3f}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])
                                   if v / notes >= 0.001) + " nats/note", flush=True)


def plain_nll(model, part: TokenSplit, block_size: int, dev) -> dict[str, float]:
    """NLL per token of the split's plain stream in consecutive windows (as training validates)."""
    kind = kind_of(model)
    windows = DecoderWindows(part, block_size, control_dropout=PLAIN)
    return nll(model, (kind.inputs(b) for b in windows.eval_batches(16)), dev)


def by_type(model, tok, part: TokenSplit, block_size: int, dev) -> dict[str, float]:
    """Total nats of the split's plain tokens (consecutive windows, as plain_nll), by the type of the token
    predicted."""
    types = [tok[i].split("_")[0] for i in range(len(tok))]
    out: dict[str, float] = {}
    model.eval()
    with torch.no_grad():
        for x, y in DecoderWindows(part, block_size, control_dropout=PLAIN).eval_batches(16):
            logits, _ = model(x.to(dev))
            nll = F.cross_entropy(logits.flatten(0, 1).float(), y.to(dev).flatten(), ignore_index=IGNORE_INDEX,
                                  reduction="none")
            for t, v in zip(y.flatten().tolist(), nll.tolist()):
                if t != IGNORE_INDEX:
                    out[types[t]] = out.get(types[t], 0.0) + v
    return out


if __name__ == "__main__":
    main()
