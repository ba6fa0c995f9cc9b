"""Batch-1 and batch-32 decoding on a GPU, two ways side by side (decoder-base dims, a 512-token prompt, 256 new).

    python benchmarks/gpu_decode_ab.py overlap --before OLD_ENGINE.py   # generate() now vs an older engine.py, alternating
    python benchmarks/gpu_decode_ab.py tuning                           # the compiled step with and without CUDA_OPTIONS
    python benchmarks/gpu_decode_ab.py tuning --extra '{"realize_opcount_threshold": 5}' --dtypes fp32   # and one more
    python benchmarks/gpu_decode_ab.py tuning --device cpu --layers 2 --width 192 --new 8   # a CPU run checks the script

`overlap`: both engines compiled (`SamplingParams(compile=True)`), the constraint where `sample` keeps it
(`constraint_device`), fp32 and bf16 weights, three alternating rounds (best shown), and whether both wrote the same
tokens. OLD_ENGINE.py: `git show REV:guitarformer/generation/decode/engine.py > OLD_ENGINE.py`.
`tuning`: generation/compiled.CUDA_OPTIONS (inductor's options for the step a GPU captures) as they are, empty, and
with `--extra` options added, each compiled afresh; tokens/s plain and with the constraint on the host, GPU time a
token (torch.profiler, kernels' self time over 128 tokens and their prefill) and the first call's seconds (the
compiling)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sample import remi_prompt  # noqa: E402
from gpu_profile_step import base_models  # noqa: E402

from guitarformer.config import DataConfig  # noqa: E402
from guitarformer.vocab.tokenization import build_tokenizer  # noqa: E402
from guitarformer.generation.decode import compiled, engine  # noqa: E402
from guitarformer.generation.constraint.guitar import GuitarConstraint, constraint_device  # noqa: E402
from guitarformer.generation.decode.sampling import SamplingParams  # noqa: E402


class Bench:
    def __init__(self, args) -> None:
        self.dev = torch.device(args.device)
        self.tok = build_tokenizer(DataConfig())
        self.models = base_models(self.tok, self.dev, args.layers, args.width)
        self.prompt = remi_prompt(self.tok, 512)
        self.new = args.new

    def sync(self) -> None:
        if self.dev.type == "cuda":
            torch.cuda.synchronize()

    def run(self, eng, dt: str, rows: int, constrained: bool, new: int | None = None):
        """(tokens/s, the ids written) of one generate call; the prompt's building is outside the clock."""
        new = new or self.new
        idx = torch.tensor([self.prompt] * rows, device=self.dev)
        cons = GuitarConstraint(self.tok, device=constraint_device(self.dev, rows)) if constrained else None
        gen = torch.Generator().manual_seed(0)
        self.sync()
        t = time.perf_counter()
        out = eng.generate(self.models[dt], idx, SamplingParams(new, compile=True), generator=gen, constraint=cons)
        self.sync()
        return rows * new / (time.perf_counter() - t), out.cpu()

    def gpu_us(self, dt: str) -> float:
        if self.dev.type != "cuda":
            return float("nan")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            self.run(engine, dt, 1, False, 128)
        return sum(e.self_device_time_total for e in p.key_averages()) / 128


def overlap(b: Bench, before: Path) -> None:
    spec = importlib.util.spec_from_file_location("engine_before", before)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    engines = {"before": old, "now": engine}
    cases = [(e, dt, rows, c) for rows in (1, 32) for dt in ("fp32", "bf16") for c in (True, False)
             for e in engines if c or e == "now"]
    for case in cases:  # compiling, capturing
        b.run(engines[case[0]], *case[1:])
    best, outs = {}, {}
    for _ in range(3):
        for case in cases:
            tps, out = b.run(engines[case[0]], *case[1:])
            best[case] = max(best.get(case, 0.0), tps)
            outs.setdefault(case, out)
    print("| engine | weights | rows | constraint | tokens/s (best of 3) | now / before | same tokens |")
    print("|---|---|---:|---|---:|---:|---|")
    for (e, dt, rows, c), tps in best.items():
        twin = ("before", dt, rows, c)
        ratio = f"{tps / best[twin]:.2f}x" if e == "now" and twin in best else ""
        same = str(torch.equal(outs[(e, dt, rows, c)], outs[twin])) if e == "now" and twin in outs else ""
        print(f"| {e} | {dt} | {rows} | {'host' if c and rows <= 64 else ('on' if c else 'off')} | {tps:.0f} | "
              f"{ratio} | {same} |")


def tuning(b: Bench, extras: list[dict], dtypes: list[str], untuned: bool = True) -> None:
    tuned = dict(compiled.CUDA_OPTIONS)
    variants = [tuned] + ([{}] if untuned else []) + [{**tuned, **extra} for extra in extras]
    print("| weights | inductor options | plain tokens/s | + constraint (host) | GPU µs a token | first call s |")
    print("|---|---|---:|---:|---:|---:|")
    for dt, opts in ((dt, opts) for dt in dtypes for opts in variants):
        compiled.CUDA_OPTIONS.clear()
        compiled.CUDA_OPTIONS.update(opts)
        torch._dynamo.reset()
        t = time.perf_counter()
        b.run(engine, dt, 1, False, 16)
        first = time.perf_counter() - t
        plain = max(b.run(engine, dt, 1, False)[0] for _ in range(3))
        host = max(b.run(engine, dt, 1, True)[0] for _ in range(3))
        print(f"| {dt} | {opts or 'none'} | {plain:.0f} | {host:.0f} | {b.gpu_us(dt):.0f} | {first:.1f} |", flush=True)
    compiled.CUDA_OPTIONS.clear()
    compiled.CUDA_OPTIONS.update(tuned)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["overlap", "tuning"])
    ap.add_argument("--before", type=Path, help="overlap: the older engine.py")
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--new", type=int, default=256, help="tokens per timed call")
    ap.add_argument("--extra", type=json.loads, action="append", default=[],
                    help="tuning: also CUDA_OPTIONS with these inductor options (JSON), e.g. "
                         "'{\"realize_opcount_threshold\": 5}'; repeat it for more variants")
    ap.add_argument("--no-untuned", action="store_true", help="tuning: leave out the variant without any options")
    ap.add_argument("--dtypes", default="fp32,bf16", help="tuning: the weights' dtypes, comma-separated")
    args = ap.parse_args()
    b = Bench(args)
    dev = torch.cuda.get_device_name() if b.dev.type == "cuda" else "CPU"
    print(f"{dev}, {args.layers} layers, C={args.width}, prompt 512 tokens, {args.new} new, "
          f"torch {torch.__version__}\n")
    if args.what == "overlap":
        if args.before is None:
            ap.error("overlap needs --before OLD_ENGINE.py")
        overlap(b, args.before)
    else:
        tuning(b, args.extra, args.dtypes.split(","), untuned=not args.no_untuned)


if __name__ == "__main__":
    main()
