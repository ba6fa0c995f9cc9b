"""Techniques a tab-token model writes, against the tabs it learned from: the rate of each technique per 100 notes
in sampled riffs beside the same rate in the run's training tokens (target of issue #17: within a factor of 2 for
every technique that occurs at least once per 100 notes in training).

    python benchmarks/bench_techniques.py RUN_DIR [--data DATASET] [--num-samples 64] [--max-new-tokens 512]

Counting is in token space: a note is a Pitch token (one per note in every tab layout; layout 3 writes a String
only where a note leaves its lowest-fret string), a technique is a Bend_* or Tech_* token after it (so a bend and
its release count as two: `bend` and `Release`). Riffs are sampled as `guitarformer sample` samples them
(grammar and guitar constraint on, the run's temperature and top-p, one seed per riff).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from guitarformer.data.dataset import TokenSplit  # noqa: E402
from guitarformer.vocab.tab_tokens import is_tab_tokenizer  # noqa: E402
from guitarformer.compose.riffs import Draws, generate_riffs  # noqa: E402
from guitarformer.generation.decode.sampling import SamplingParams  # noqa: E402
from guitarformer.runs import load_run  # noqa: E402
from guitarformer.runtime import resolve_device  # noqa: E402


def technique_counts(tok, ids) -> tuple[int, Counter]:
    """(notes, technique -> count) of a token id sequence."""
    names = [tok[int(i)] for i in ids]
    notes = sum(n.startswith("Pitch_") for n in names)
    techs = Counter("bend" if n.startswith("Bend_") else n.split("_", 1)[1] for n in names
                    if n.startswith(("Bend_", "Tech_")))
    return notes, techs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--data", type=Path, default=None, help="the run's dataset (default: the one in its config)")
    ap.add_argument("--num-samples", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=None, help="default: the run's sample.top_p (1 = no truncation)")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    dev = resolve_device(args.device)
    loaded = load_run(args.run, None, str(dev))
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    if not is_tab_tokenizer(tok):
        sys.exit(f"{args.run} was not trained on tab tokens (TabREMI): it writes no techniques")
    data = args.data or Path(cfg.data.dataset)
    train_notes, train_techs = technique_counts(tok, np.asarray(TokenSplit(data, "train").tokens))
    torch.manual_seed(args.seed)
    sample_notes, sample_techs = 0, Counter()
    for first in range(0, args.num_samples, args.batch_size):
        n = min(args.batch_size, args.num_samples - first)
        params = SamplingParams(args.max_new_tokens, cfg.sample.temperature,
                                top_p=(cfg.sample.top_p if args.top_p is None else args.top_p) or None)
        riffs = generate_riffs(model, tok, cfg, params, Draws(n, args.seed, first), device=dev)
        for r in riffs:
            k, c = technique_counts(tok, r.ids)
            sample_notes += k
            sample_techs += c
    top_p = cfg.sample.top_p if args.top_p is None else args.top_p
    print(f"run {args.run}; training tokens of {data}: {train_notes:,} notes; "
          f"{args.num_samples} sampled riffs (top-p {top_p}): {sample_notes:,} notes\n")
    print("| technique | training, per 100 notes | samples, per 100 notes | samples / training | within 2x |")
    print("|---|---:|---:|---:|---|")
    for name in sorted(set(train_techs) | set(sample_techs), key=lambda k: -train_techs[k]):
        a = 100 * train_techs[name] / max(1, train_notes)
        b = 100 * sample_techs[name] / max(1, sample_notes)
        ratio = b / a if a else float("inf")
        verdict = ("yes" if 0.5 <= ratio <= 2 else "**no**") if a >= 1 else "(rarer than 1/100: no target)"
        print(f"| {name} | {a:.2f} | {b:.2f} | {ratio:.2f} | {verdict} |")


if __name__ == "__main__":
    main()
