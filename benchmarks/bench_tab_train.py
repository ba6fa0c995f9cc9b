"""Paired trainings: NLL per note of tab tokens (TabREMI, the default) against pitch-only REMI on the same files,
the same val tunes, the same steps and seeds (nats/note is the unit that compares tokenizations).

    python benchmarks/bench_tab_train.py --midi CORPUS_MIDI_DIR --work /tmp/tabpair --steps 300 --seeds 1337 2 \\
        --set model.n_layer=4 --set model.n_embd=128 --doc docs/results/TAB_TOKENS.md

Prepares the folder twice (REMI, TabREMI: the split follows each file's content hash, so both hold the same val
tunes), trains one run per tokenizer and seed with the given config (default decoder-small, compile off, fp32, no
in-training samples) for `--steps` steps, and scores every run on its val split with consecutive windows
(evaluation.likelihood.stream_nll); notes are the val split's Pitch tokens, the same count for both.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # harness

from harness import write_section  # noqa: E402

from guitarformer.config import load_config  # noqa: E402
from guitarformer.data.dataset import TokenSplit  # noqa: E402
from guitarformer.data.prepare import PrepareOptions, prepare  # noqa: E402
from guitarformer.evaluation.likelihood import stream_nll  # noqa: E402
from guitarformer.runs import load_run  # noqa: E402
from guitarformer.training.loop import train  # noqa: E402

TOKENIZERS = ("REMI", "TabREMI")


def score(run: Path) -> tuple[int, int, float]:
    """(val tokens, val notes, nats per token) of a run on its own dataset's val split."""
    loaded = load_run(run, None, "cpu")
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    part = TokenSplit(Path(cfg.data.dataset), "val")
    pitch = sorted(i for t, i in tok.vocab.items() if t.startswith("Pitch_"))
    notes = int(np.isin(np.asarray(part.tokens), pitch).sum())
    r = stream_nll(model, part, cfg.model.block_size, torch.device("cpu"))
    return int(r["tokens"]), notes, float(r["nll"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--midi", type=Path, required=True, help="a folder of MIDI files (e.g. the built-in corpus)")
    ap.add_argument("--work", type=Path, required=True, help="datasets and runs go here")
    ap.add_argument("--config", default="decoder-small")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1337, 2])
    ap.add_argument("--set", action="append", default=[], help="config override, as `guitarformer train --set`")
    ap.add_argument("--doc", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(2)
    overrides = [f"train.max_steps={args.steps}", "train.time_budget_min=0", "train.compile=false",
                 "train.dtype=float32", "train.sample_interval=0", f"train.eval_interval={args.steps}",
                 "train.eval_iters=4", *args.set]
    rows, per_seed = [], {}
    for name in TOKENIZERS:
        ds = args.work / f"ds-{name.lower()}"
        if not (ds / "meta.json").is_file():
            cfg = load_config(args.config, [f"data.tokenizer={name}"])
            prepare([args.midi], ds, cfg.data, options=PrepareOptions(workers=1, progress=False))
        for seed in args.seeds:
            run = args.work / f"run-{name.lower()}-{seed}"
            if not (run / "ckpt" / "best.pt").is_file() and not (run / "ckpt" / "last.pt").is_file():
                cfg = copy.deepcopy(load_config(args.config, [f"data.tokenizer={name}", f"train.seed={seed}",
                                                              *overrides]))
                cfg.data.dataset = str(ds)
                train(cfg, run_dir=run, progress=False)
            tokens, notes, nll = score(run)
            per_seed.setdefault(seed, {})[name] = nll * tokens / notes
            rows.append((name, seed, tokens, notes, tokens / notes, nll, nll * tokens / notes))
            print(rows[-1], flush=True)
    meta = json.loads((args.work / "ds-remi" / "meta.json").read_text())
    lines = [f"`python benchmarks/bench_tab_train.py {' '.join(sys.argv[1:])}` ({time.strftime('%Y-%m-%d')}, "
             f"2-core CPU shared with other jobs; {args.steps} steps each, config {args.config} with "
             f"{', '.join(overrides)}; {meta.get('status', {}).get('ok', '?')} files of the corpus)", "",
             "| tokenizer | seed | val tokens | val notes | tokens/note | nats/token | **nats/note** |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, seed, tokens, notes, tpn, nll, npn in rows:
        lines.append(f"| {name} | {seed} | {tokens:,} | {notes:,} | {tpn:.3f} | {nll:.4f} | **{npn:.4f}** |")
    ratios = [v["TabREMI"] / v["REMI"] for v in per_seed.values() if len(v) == 2]
    mean = {n: float(np.mean([v[n] for v in per_seed.values()])) for n in TOKENIZERS}
    lines += ["", f"TabREMI / REMI per seed: {', '.join(f'{r:.3f}' for r in ratios)}; mean nats/note "
              f"{mean['TabREMI']:.4f} vs {mean['REMI']:.4f}: **{mean['TabREMI'] / mean['REMI']:.3f}x**"]
    text = "\n".join(lines)
    print(text)
    if args.doc:
        write_section(args.doc, "tab-nll", text, by="python benchmarks/bench_tab_train.py")


if __name__ == "__main__":
    main()
