"""Recipes for the quickstart's 15 minutes on a 2-core CPU: which model, batch and schedule reach the lowest NLL per
note on the plain val stream (no control tokens, no infilling examples) in the time `guitarformer train` has.

    python benchmarks/bench_quickstart.py time --dataset DS --out times.json [--rounds 6] [--threads 2]
    python benchmarks/bench_quickstart.py train --dataset DS --times times.json --work DIR [--only NAME ...]
    python benchmarks/bench_quickstart.py doc --times times.json --work DIR [DIR ...] --doc docs/results/TAB_TOKENS.md

Loss against steps does not depend on the machine, step time does, and the CPU this was measured on is shared: so
`time` measures each recipe's training step on this CPU in one interleaved run (a few steps of each recipe in
turn, `--rounds` times, the median per recipe), with the real data pipeline (controls, infilling) and compiled
models as `guitarformer train` runs them; `train` then trains each recipe for the steps its step time fits into
the budget left after the run's fixed costs (start-up, compilation, evaluations, samples: `--overhead-s`), on
whatever device is at hand (a GPU trains the same steps faster; the numbers are per step), and scores the plain
val stream; `doc` writes the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
from guitarformer.vocab.tokenization import load_tokenizer  # noqa: E402
from guitarformer.models import build_model  # noqa: E402
from guitarformer.models.kinds import kind_of  # noqa: E402
from guitarformer.runtime import autocast_ctx, resolve_dtype  # noqa: E402
from guitarformer.training.data import Data  # noqa: E402
from guitarformer.training.loop import train  # noqa: E402

# name -> the model, context, batch and learning rate of each recipe (over the default preset's other values)


def _recipe(layers: int, width: int, context: int, batch: int, lr: float) -> list[str]:
    return [f"model.n_layer={layers}", f"model.n_embd={width}", f"model.n_head={width // 32}",
            f"model.block_size={context}", f"train.batch_size={batch}", f"train.lr={lr}"]


RECIPES: dict[str, list[str]] = {
    "6x192 T512 B16 lr2e-3": _recipe(6, 192, 512, 16, 2e-3),  # the preset before this measurement
    "6x192 T512 B8 lr2e-3": _recipe(6, 192, 512, 8, 2e-3),
    "4x192 T512 B16 lr2e-3": _recipe(4, 192, 512, 16, 2e-3),
    "6x128 T512 B16 lr3e-3": _recipe(6, 128, 512, 16, 3e-3),
    "4x128 T512 B16 lr3e-3": _recipe(4, 128, 512, 16, 3e-3),
    "4x128 T1024 B8 lr3e-3": _recipe(4, 128, 1024, 8, 3e-3),  # the preset now
}
PLAIN = ["data.controls=false", "data.infill=0"]  # the same recipe without controls or infilling in the mix


def recipe_config(name: str, dataset: Path | None, extra: list[str] = ()):
    cfg = load_config("decoder-small", [*RECIPES[name.removesuffix(" plain")], *extra])
    if dataset is not None:
        cfg.data.dataset = str(dataset)
    return cfg


def time_recipes(args) -> None:
    """Median seconds per training step of each recipe on this CPU, interleaved (module docstring)."""
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    jobs = {}
    for name in RECIPES:
        cfg = recipe_config(name, args.dataset)
        data = Data(cfg, args.dataset)
        cfg.model.vocab_size = len(data.tokenizer)
        raw = build_model(cfg.model)
        model = torch.compile(raw)
        opt = torch.optim.AdamW(raw.parameters(), lr=1e-4)
        jobs[name] = (cfg, data, raw, model, opt, torch.Generator().manual_seed(0), [])
        print(f"built {name}: {sum(p.numel() for p in raw.parameters()) / 1e6:.2f}M params", flush=True)
    dtype = resolve_dtype("auto", device)

    def step(job) -> float:
        cfg, data, raw, model, opt, gen, _ = job
        t0 = time.perf_counter()
        inputs = kind_of(cfg.model.kind).inputs(data.train.batch(cfg.train.batch_size, gen))
        with autocast_ctx(device, dtype):
            _, loss = inputs(model)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(raw.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    for name, job in jobs.items():  # compile and warm up
        t0 = time.perf_counter()
        for _ in range(3):
            step(job)
        print(f"warm {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    for r in range(args.rounds):
        for name, job in jobs.items():
            job[-1].extend(step(job) for _ in range(args.steps))
        print(f"round {r + 1}: " + ", ".join(f"{n} {statistics.median(j[-1]):.3f}" for n, j in jobs.items()),
              flush=True)
    out = {"threads": args.threads, "rounds": args.rounds, "steps_per_round": args.steps,
           "load_before": open("/proc/loadavg").read().split()[:3],
           "s_per_step": {n: statistics.median(j[-1]) for n, j in jobs.items()}}
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


def idle_seconds(times: dict, base_idle_s: float) -> dict[str, float]:
    """Idle-machine seconds per step of each recipe: the interleaved run's ratios to the first recipe (the load
    of a shared machine slows every recipe alike), times the first recipe's step on an idle machine."""
    s = times["s_per_step"]
    first = s[next(iter(RECIPES))]
    return {n: v / first * base_idle_s for n, v in s.items()}


def fitted_steps(s_per_step: float, budget_min: float, overhead_s: float) -> int:
    return int((budget_min * 60 - overhead_s) / s_per_step)


def train_recipes(args) -> None:
    times = idle_seconds(json.loads(args.times.read_text()), args.base_idle_s)
    names = args.only or list(RECIPES)
    for name in names:
        base = name.removesuffix(" plain")
        steps = round(args.scale * fitted_steps(times[base], args.budget_min, args.overhead_s))
        plain = name.endswith(" plain")
        warmup = round(args.scale * recipe_config(name, None).train.warmup_steps)
        extra = [f"train.max_steps={steps}", f"train.warmup_steps={warmup}", "train.time_budget_min=0",
                 "train.sample_interval=0", f"train.eval_interval={steps}", f"train.device={args.device}",
                 f"train.seed={args.seed}", f"train.num_threads={args.threads}", "train.compile=false",
                 *(PLAIN if plain else [])]
        cfg = recipe_config(name, args.plain_dataset if plain else args.dataset, extra)
        run = args.work / name.replace(" ", "_")
        t0 = time.time()
        s = train(cfg, run_dir=run, progress=False, force=True)
        row = {"name": name, "steps": steps, "scale": args.scale, "s_per_step_cpu": times[base],
               "seconds_here": time.time() - t0,
               "nats_per_note": s.get("val_nats_per_note"), "val_loss": s.get("val_loss"),
               "params": sum(p.numel() for p in build_model(cfg.model).parameters())}
        (run / "recipe.json").write_text(json.dumps(row, indent=2))
        print(json.dumps(row), flush=True)


def repeated_share(dataset: Path, context: int) -> float:
    """Share of the val stream's tokens that sit in a bar repeating, token for token, an earlier bar of the same
    window of `context` tokens (consecutive windows, as validation reads them): what a model that copies gets
    almost free, and how much of it a context of this length can see."""
    tok = load_tokenizer(dataset / "tokenizer.json")
    bar = tok.vocab["Bar_None"]
    a = np.asarray(TokenSplit(dataset, "val").tokens, dtype=np.int64)
    repeated = total = 0
    for start in range(0, len(a) - 1, context):
        seen, cur = set(), []
        for t in a[start: start + context + 1].tolist():
            if t != bar:
                cur.append(t)
                continue
            if len(cur) > 3:  # a bar with notes, not an empty or a rest-only one
                total += len(cur)
                repeated += len(cur) if tuple(cur) in seen else 0
                seen.add(tuple(cur))
            cur = []
    return repeated / max(total, 1)


def write_doc(args) -> None:
    t = json.loads(args.times.read_text())
    idle = idle_seconds(t, args.base_idle_s)
    rows = []
    for w in args.work or []:
        rows += [json.loads(p.read_text()) for p in sorted(w.glob("*/recipe.json"))]
    lines = [f"`python benchmarks/bench_quickstart.py time ...`: {t['threads']} threads, {t['rounds']} interleaved rounds "
             f"of {t['steps_per_round']} steps per recipe, the real data pipeline (controls, infilling), compiled; "
             f"load average {t.get('load_during', ' '.join(t['load_before']))} while it ran, so only the ratios "
             f"count: idle seconds = ratio x {args.base_idle_s} s (the first recipe's median step in an idle "
             f"quickstart run); steps = ({args.budget_min:g} min - {args.overhead_s:g} s of start-up, compilation, "
             "evaluations and samples) / idle seconds", "",
             "| recipe | params | step vs first | idle s/step | steps in the budget | tokens seen |",
             "|---|---:|---:|---:|---:|---:|"]
    first = t["s_per_step"][next(iter(RECIPES))]
    for name, s in t["s_per_step"].items():
        cfg = recipe_config(name, None)
        cfg.model.vocab_size = 457
        n = fitted_steps(idle[name], args.budget_min, args.overhead_s)
        lines.append(f"| {name} | {sum(p.numel() for p in build_model(cfg.model).parameters()) / 1e6:.2f}M | "
                     f"{s / first:.3f} | {idle[name]:.3f} | {n:,} | "
                     f"{n * cfg.train.batch_size * cfg.model.block_size / 1e6:.1f}M |")
    if args.repeats:
        lines += ["", f"Tokens of the val stream in a bar that repeats an earlier bar of its window "
                  f"(`repeated_share`, {args.repeats.name}):", "", "| context | repeated share |", "|---:|---:|"]
        lines += [f"| {c} | {repeated_share(args.repeats, c):.3f} |" for c in (256, 512, 1024, 2048)]
    if rows:
        lines += ["", "| recipe | data | steps | **nats/note** (plain val stream) |", "|---|---|---:|---:|"]
        for r in sorted(rows, key=lambda r: r["nats_per_note"] or 9e9):
            data = "plain" if r["name"].endswith(" plain") else "controls + infill 0.3"
            lines.append(f"| {r['name'].removesuffix(' plain')} | {data} | {r['steps']} | "
                         f"**{r['nats_per_note']:.4f}** |")
    text = "\n".join(lines)
    print(text)
    if args.doc:
        write_section(args.doc, "quickstart-recipes", text, by="python benchmarks/bench_quickstart.py")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("time")
    a.add_argument("--dataset", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--rounds", type=int, default=6)
    a.add_argument("--steps", type=int, default=3, help="steps of one recipe per round")
    a.add_argument("--threads", type=int, default=2)
    b = sub.add_parser("train")
    b.add_argument("--dataset", type=Path, required=True, help="the built-in corpus with controls and infilling")
    b.add_argument("--plain-dataset", type=Path, help="the built-in corpus without them (for `NAME plain`)")
    b.add_argument("--times", type=Path, required=True)
    b.add_argument("--work", type=Path, required=True)
    b.add_argument("--only", nargs="+")
    b.add_argument("--scale", type=float, default=1.0,
                   help="train this share of the steps (and warmup) fitted to the budget: a short proxy")
    b.add_argument("--base-idle-s", type=float, default=1.225,
                   help="the first recipe's idle-machine step (a quickstart run's median tokens/s: metrics.jsonl)")
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--budget-min", type=float, default=15.0)
    b.add_argument("--overhead-s", type=float, default=150.0)
    b.add_argument("--device", default="auto")
    b.add_argument("--seed", type=int, default=1337)
    c = sub.add_parser("doc")
    c.add_argument("--times", type=Path, required=True)
    c.add_argument("--work", type=Path, nargs="*", help="`train` work folders whose finished recipes to list")
    c.add_argument("--repeats", type=Path, help="a dataset whose val stream's repeated bars to count")
    c.add_argument("--budget-min", type=float, default=15.0)
    c.add_argument("--overhead-s", type=float, default=150.0)
    c.add_argument("--base-idle-s", type=float, default=1.225)
    c.add_argument("--doc", type=Path)
    args = ap.parse_args()
    {"time": time_recipes, "train": train_recipes, "doc": write_doc}[args.cmd](args)


if __name__ == "__main__":
    main()
