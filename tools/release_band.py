"""Release a band run as the shipped band model (guitarformer/pretrained/band/, docs/band.md): its best weights as
int8 beside the shipped model within the package's budget, its config, tokenizer, what it learned, a card from its
benchmark (benchmarks/bench_band.py's BAND.json) and the credits of the data it learned from.

    python tools/release_band.py --from-run RUN --bench docs/results/BAND.json --recipe "how RUN was trained"
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from guitarformer.pretrained import MAX_BYTES, band_dir, pretrained_dir
from guitarformer.runs.checkpoint import load_checkpoint
from guitarformer.runs.export import export_run
from guitarformer.runs.rundir import RunDir
from guitarformer.runs.run import read_run

CREDITS = ("CREDITS.md", "freedoom-COPYING.adoc", "freedoom-CREDITS-MUSIC")  # the data's licences, as the shipped model's


def card(run: Path, bench: dict, recipe: str) -> str:
    state = load_checkpoint(RunDir(run).best_checkpoint())
    cfg = read_run(run).cfg
    params = sum(t.numel() for t in state["model"].values())
    nats = bench["nats"]
    acc = bench["accompaniment"]
    rows = "\n".join(f"| {k.replace('_', ' ')} | {a:.3f} | {b:.3f} |" for k, (a, b) in acc.items())
    return f"""# The shipped band model

A decoder ({params / 1e6:.1f}M parameters: {cfg.model.n_layer} layers, width {cfg.model.n_embd}) that writes a guitar
part, a bass line and a drum part together, bar by bar (docs/band.md), and the guitar alone. Fine-tuned from the
shipped model (guitarformer/pretrained/, whose card tells its own data) on Freedoom's band arrangements (guitar,
bass and drums; BSD-3-Clause, credits in CREDITS.md and freedoom-CREDITS-MUSIC) and the Mutopia Project's
public-domain and CC-BY classical guitar pieces (one part each). Stored as int8 with a scale per row.

Recipe: {recipe}
Step {state.get('step')}; vocabulary {cfg.model.vocab_size} (the shipped model's and the band's part and drum tokens).

Held-out band files ({bench['held_out_files']}), nats per note: guitar {nats['guitar']:.3f}, bass {nats['bass']:.3f},
drums {nats['drums']:.3f}. Bass and drums written for a held-out guitar part ({bench['bars']} bars), against the real
ones (docs/results/BAND.md):

| measure | real | written |
|---|---|---|
{rows}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from-run", type=Path, required=True)
    ap.add_argument("--bench", type=Path, required=True, help="BAND.json of this run (benchmarks/bench_band.py)")
    ap.add_argument("--recipe", required=True, help="the commands that trained the run, for its card")
    ap.add_argument("--out", type=Path, default=band_dir())
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    exported = export_run(args.from_run, card(args.from_run, json.loads(args.bench.read_text()), args.recipe),
                          args.out, int8=True)
    for name in CREDITS:
        shutil.copyfile(pretrained_dir() / name, args.out / name)
    total = sum(p.stat().st_size for p in pretrained_dir().rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    print(f"exported {exported.folder}: {exported.parameters:,} parameters as {exported.dtype}, "
          f"{exported.bytes / 2**20:.2f} MiB; the package's models and their files {total / 2**20:.2f} MiB "
          f"(budget {MAX_BYTES / 2**20:.0f} MiB)")
    if total > MAX_BYTES:
        print("over the budget: release a smaller model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
