"""How `guitarformer infill` should choose among its candidate fills: ranking rules compared on the same fills.

For each run and seed, the spans `bench_infill.py` measures (random 1-4 bar spans of the val pieces, bars on both
sides); for each span `--candidates` fills drawn side by side as the command draws them (compose/infill.py
`draw_fills`), each scored by the model as it is drawn; each rule keeps one, and the kept fills' OA against the true
bars (pitch / duration / onset-in-bar, the kernel-density OA of issue #26) is averaged over the spans, beside
copying the bars before the gap. Every rule sees the same candidates, so their differences are the rules'.

    python benchmarks/bench_fill_rank.py RUN [RUN ...] [--seeds 0 1] [--num 200] [--candidates 8] [--doc docs/results/INFILL.md]

About 4 minutes per run and seed for 200 spans of 8 candidates on one thread of a 2-core CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_infill import bars_before, fill_spans, span_split  # noqa: E402
from harness import table, write_section  # noqa: E402

from guitarformer.evaluation.features import overlap_area  # noqa: E402
from guitarformer.compose.infill import Gap, bar_notes, check_infill_run, draw_fills, rank_fills  # noqa: E402
from guitarformer.compose.riffs import Draws  # noqa: E402
from guitarformer.generation.decode.sampling import SamplingParams  # noqa: E402
from guitarformer.music.guitar import STANDARD_TUNING  # noqa: E402
from guitarformer.runs import load_run  # noqa: E402
from guitarformer.runtime import resolve_device  # noqa: E402


def _first(tok, rows, scores, around) -> int:
    return 0


def _likeliest(tok, rows, scores, around) -> int:
    return int(np.argmax(scores))


RULES = {  # (tokenizer, rows, scores, bars around the gap) -> the index of the fill kept
    "one fill (`--candidates 1`)": _first,
    "the likeliest": _likeliest,
    "fit by kernel-density OA": partial(rank_fills, measure=overlap_area, weight=0.0),
    "the same + 0.3 x mean log-prob": partial(rank_fills, measure=overlap_area, weight=0.3, standardize=False),
    "fit by shares alone": partial(rank_fills, weight=0.0),
    "**fit by shares + 0.01 x z(log-prob): `infill`'s**": rank_fills,
}
FEATURES = ("pitch", "duration", "onset")


def oa(made, real) -> list[float]:
    return [overlap_area(m, r) for m, r in zip(made, real)]


def bench(run: Path, seed: int, num: int, candidates: int, device) -> dict[str, np.ndarray]:
    """Rule name (and "copying the bars before") -> mean OA (pitch, duration, onset) over the spans."""
    loaded = load_run(run, None, str(device))
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    fill = check_infill_run(tok, cfg)
    split, _ = span_split(Path(cfg.data.dataset))
    params = SamplingParams.from_config(cfg.sample)
    kept: dict[str, list] = {name: [] for name in RULES}
    left = []
    for k, head, bars, first, layout in fill_spans(cfg, split, fill, num, seed):
        rows, scores = draw_fills(model, tok, cfg, Gap(fill, head, layout, STANDARD_TUNING), params,
                                  Draws(candidates, seed + k), device)
        real = bar_notes(tok, [t for b in layout.span for t in b])
        around = [*layout.before, *layout.after]
        for name, rule in RULES.items():
            row, ended = rows[rule(tok, rows, scores, around)]
            kept[name].append(oa(bar_notes(tok, row[:-1] if ended else row), real))
        left.append(oa(bar_notes(tok, bars_before(bars, first, len(layout.span))), real))
    out = {"copying the bars before": np.nanmean(np.array(left), 0)}
    out.update({name: np.nanmean(np.array(v), 0) for name, v in kept.items()})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories trained with data.infill > 0")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="span seeds (bench_infill's --seed)")
    ap.add_argument("--num", type=int, default=200, help="spans per run and seed")
    ap.add_argument("--candidates", type=int, default=8, help="fills drawn per span, the rules choosing among them")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--doc", type=Path, default=None, help="write the table into this file's fill-rank section")
    a = ap.parse_args(argv)
    device = resolve_device(a.device)
    columns, t0 = [], time.time()
    for run in a.runs:
        for seed in a.seeds:
            kind = load_run(run, None, "cpu").cfg.model.kind
            columns.append((f"{run.name} ({kind}), seed {seed}", bench(run, seed, a.num, a.candidates, device)))
            print(f"{columns[-1][0]}: {time.time() - t0:.0f} s", flush=True)
    names = list(columns[0][1])
    rows = [[name, *(" / ".join(f"{x:.3f}" for x in col[name]) for _, col in columns)] for name in names]
    lines = [table(["rule", *(c for c, _ in columns)], rows, align="l" * (len(columns) + 1))]
    cmd = "python benchmarks/bench_fill_rank.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = (f"`{cmd}` ({time.strftime('%Y-%m-%d')}): {a.num} val spans per seed, {a.candidates} fills drawn per "
            f"span, OA {' / '.join(FEATURES)} of the kept fill against the true bars\n\n" + "\n".join(lines))
    print(text)
    if a.doc:
        write_section(a.doc, "fill-rank", text, by="python benchmarks/bench_fill_rank.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
