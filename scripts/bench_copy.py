"""Does a model copy? NLL of the val stream's tokens in bars that repeat an earlier bar of their window, vs the rest.

Fiddle tunes play their parts twice: 38% of the val stream's tokens sit in a bar whose tokens repeat an earlier bar
of the same 1,024-token window (docs/results/TAB_TOKENS.md, "The quickstart's recipe"). A model that copies predicts those
almost free once the bar's first notes match; one that does not reads them as it reads new music. The script cuts
the val split into consecutive windows of the run's context, scores every token, and splits the scores by whether
the token's bar (its tokens after the Bar token) occurred earlier in the window.

    python scripts/bench_copy.py RUN [RUN ...] [--windows 40] [--data DATASET]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from guitarformer.data.dataset import TokenSplit
from guitarformer.runs import load_run


@torch.no_grad()
def copy_scores(run: Path, windows: int, data: Path | None = None) -> dict[str, float]:
    """{"repeated": nats/token in repeated bars, "new": in the others, and their token counts}."""
    loaded = load_run(run, None, "cpu")
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    split = TokenSplit(data or Path(cfg.data.dataset), "val")
    bars = set(int(i) for i in tok.token_ids_of_type("Bar"))
    T = cfg.model.block_size
    stream = np.asarray(split.tokens, dtype=np.int64)
    total = {True: [0, 0.0], False: [0, 0.0]}
    for w in range(windows):
        x = stream[w * T: w * T + T + 1]
        if len(x) < T + 1:
            break
        logp = torch.log_softmax(model(torch.from_numpy(x[None, :-1]))[0][0].float(), -1)
        nll = -logp[torch.arange(T), torch.from_numpy(x[1:])].numpy()  # nll[j - 1]: token j
        starts = [j for j in range(T + 1) if x[j] in bars]
        seen: set[tuple[int, ...]] = set()
        for a, b in zip(starts, starts[1:] + [T + 1]):
            key = tuple(int(t) for t in x[a + 1:b])
            repeated = bool(key) and key in seen
            seen.add(key)
            for j in range(max(a, 1), b):
                total[repeated][0] += 1
                total[repeated][1] += float(nll[j - 1])
    return {"repeated": total[True][1] / max(1, total[True][0]), "new": total[False][1] / max(1, total[False][0]),
            "repeated_tokens": total[True][0], "new_tokens": total[False][0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--windows", type=int, default=40, help="consecutive val windows to score")
    ap.add_argument("--data", type=Path, default=None, help="dataset folder (default: the run's)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print("| run | tokens in repeated bars | nats/token there | other tokens | nats/token there |")
    print("|---|---:|---:|---:|---:|")
    for run in a.runs:
        s = copy_scores(run, a.windows, a.data)
        print(f"| {run.name} | {s['repeated_tokens']:,} | {s['repeated']:.3f} | {s['new_tokens']:,} | {s['new']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
