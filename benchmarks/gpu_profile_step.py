"""Where a batch-1 token's time goes when sampling on a GPU: decoder-base dims (12 layers, C=768), a 512-token
prompt, tokens/s plain, with the constraint on the GPU and with it on the host (fp32 and bf16 weights), then
cProfile (host Python) and torch.profiler (host ops, kernel launches, GPU kernels) of `generate`.

    python benchmarks/gpu_profile_step.py --out DIR          # on a GPU machine (docs/results/BENCH_GPU.md, speed section)
    python benchmarks/gpu_profile_step.py --device cpu --new 8 --out /tmp   # a CPU run checks the script itself

Writes DIR/cprof_{plain,host}.txt and DIR/tprof_{plain,host}.txt; prints the tokens/s."""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sample import remi_prompt  # noqa: E402

from guitarformer.config import DataConfig, ModelConfig  # noqa: E402
from guitarformer.vocab.tokenization import build_tokenizer  # noqa: E402
from guitarformer.generation.constraint.guitar import GuitarConstraint  # noqa: E402
from guitarformer.generation.decode.engine import generate  # noqa: E402
from guitarformer.generation.decode.sampling import SamplingParams  # noqa: E402
from guitarformer.models import build_model  # noqa: E402


def base_models(tok, dev: torch.device, n_layer: int = 12, n_embd: int = 768) -> dict:
    """A decoder of decoder-base dims (12 heads, context 1024) for `tok`, random weights, in eval mode on `dev`:
    {"fp32": it, "bf16": a copy with bf16 weights}."""
    mc = ModelConfig(vocab_size=len(tok), block_size=1024, n_layer=n_layer, n_head=12, n_embd=n_embd, dropout=0.0)
    fp32 = build_model(mc).eval().to(dev)
    return {"fp32": fp32, "bf16": copy.deepcopy(fp32).to(torch.bfloat16)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--new", type=int, default=256, help="tokens per timed run")
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    tok = build_tokenizer(DataConfig())
    models = base_models(tok, dev)
    fp32 = models["fp32"]
    idx = torch.tensor([remi_prompt(tok, 512)], device=dev)
    gen = torch.Generator().manual_seed(0)
    constraints = {"plain": lambda: None, "gpu": lambda: GuitarConstraint(tok, device=dev),
                   "host": lambda: GuitarConstraint(tok, device="cpu")}

    def run(model, which: str, n: int) -> None:
        generate(model, idx, SamplingParams(n), generator=gen, constraint=constraints[which]())
        sync()

    for which in constraints:
        for dt, model in models.items():
            run(model, which, 32)  # warm-up: capture, allocator
            t = time.perf_counter()
            run(model, which, args.new)
            print(f"{which} {dt}: {args.new / (time.perf_counter() - t):.0f} tokens/s", flush=True)
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev.type == "cuda"
                                                          else [])
    args.out.mkdir(parents=True, exist_ok=True)
    for which in ("plain", "host"):
        pr = cProfile.Profile()
        pr.enable()
        run(fp32, which, args.new)
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(35)
        (args.out / f"cprof_{which}.txt").write_text(s.getvalue())
        with torch.profiler.profile(activities=activities) as p:
            run(fp32, which, args.new // 2)
        table = p.key_averages().table
        (args.out / f"tprof_{which}.txt").write_text(
            table(sort_by="self_cpu_time_total", row_limit=45, max_name_column_width=60) + "\n\n"
            + (table(sort_by="self_cuda_time_total", row_limit=25, max_name_column_width=60) if dev.type == "cuda"
               else ""))
        print("profiled", which, flush=True)


if __name__ == "__main__":
    main()
