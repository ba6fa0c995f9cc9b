"""Benchmark our Decoder against Hugging Face GPT-2 (training tokens/s, MFU on CUDA) and SDPA against plain attention (peak memory).

    python benchmarks/bench_model.py                                   # CPU: speed + memory, a few minutes
    python benchmarks/bench_model.py --device cuda --dtype bfloat16 --preset gpt2-85m   # GPU: speed, MFU, memory
    python benchmarks/bench_model.py --out docs/results/BENCH_MODELS.md.part   # also write the markdown report

Both models get the same width, depth, heads, context, vocabulary, batch, loss (cross-entropy computed
outside the model, so HF's label shift is not timed) and optimizer (torch AdamW, decay on matrices only),
and are timed in interleaved rounds on the same machine so background load hits both alike.
Requires `pip install transformers` (GPT-2 is built from a GPT2Config: no weights are downloaded).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from guitarformer.models import build_model  # noqa: E402
from guitarformer.models.layers import make_adamw  # noqa: E402

H100_BF16_PEAK = 989e12  # dense bf16 tensor-core FLOP/s, H100 SXM

PRESETS = {
    # small enough for a few minutes on 2 shared CPU cores
    "cpu-small": dict(n_layer=4, n_head=4, n_embd=256, block_size=256, vocab_size=512, batch=8),
    # the CPU comparison the project quotes: 4 layers, width 256, context 512, batch 8
    "cpu-512": dict(n_layer=4, n_head=4, n_embd=256, block_size=512, vocab_size=512, batch=8),
    # GPT-2-small body: 85M non-embedding parameters, context 1024
    "gpt2-85m": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=512, batch=16),
}


# --------------------------------------------------------------------------- models


def ours(p: dict) -> torch.nn.Module:
    # GPT-2's choices (biases, learned positions, tanh-GELU, tied head) so both models hold the same weights.
    return build_model(
        dict(kind="decoder", vocab_size=p["vocab_size"], block_size=p["block_size"], n_layer=p["n_layer"],
             n_head=p["n_head"], n_embd=p["n_embd"], dropout=0.0, bias=True, pos="learned", ffn="gelu",
             tie_weights=True)
    )


def hf_gpt2(p: dict, attn: str) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=p["vocab_size"], n_positions=p["block_size"], n_embd=p["n_embd"], n_layer=p["n_layer"],
        n_head=p["n_head"], bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
    )
    return GPT2LMHeadModel._from_config(cfg, attn_implementation=attn)


def logits_of(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    return out[0] if isinstance(out, tuple) else out.logits


# --------------------------------------------------------------------------- speed


def speed(args: argparse.Namespace, p: dict) -> dict:
    dev = torch.device(args.device)
    amp = args.dtype == "bfloat16"
    torch.manual_seed(0)
    B, T, V = p["batch"], p["block_size"], p["vocab_size"]
    x, y = torch.randint(0, V, (B, T), device=dev), torch.randint(0, V, (B, T), device=dev)
    contenders: dict[str, torch.nn.Module] = {"guitarformer Decoder": ours(p)}
    try:
        contenders["HF GPT2 (sdpa)"] = hf_gpt2(p, "sdpa")
        if not args.no_eager:
            contenders["HF GPT2 (eager)"] = hf_gpt2(p, "eager")
    except ImportError:
        print("transformers not installed: timing our model alone", file=sys.stderr)
    params, steps = {}, {}
    for name, m in contenders.items():
        m.to(dev).train()
        params[name] = sum(q.numel() for q in m.parameters())
        opt = make_adamw(m.named_parameters(), 0.1, 3e-4, (0.9, 0.95), dev.type)
        fn = torch.compile(m) if args.compile else m

        def step(m=fn, opt=opt) -> None:
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
                logits = logits_of(m, x)
                loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        steps[name] = step
    for name, step in steps.items():  # warm-up: allocator, kernels, compile
        for _ in range(args.warmup):
            step()
    # Interleaved rounds, order reversed every other round, so slow drifts in background load hit every
    # model alike; each round also yields a paired ratio (ours vs each other model, timed seconds apart).
    # On CPU we also take process CPU time: other users of the cores inflate wall time, not CPU time.
    names = list(steps)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            sync(dev)
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                steps[name]()
            sync(dev)
            wall[name].append((time.perf_counter() - w0) / args.steps)
            cpu[name].append((time.process_time() - c0) / args.steps)
    ref = build_model(dict(kind="decoder", vocab_size=V, block_size=T, n_layer=p["n_layer"], n_head=p["n_head"],
                           n_embd=p["n_embd"], bias=True))
    fpt = ref.flops_per_token()
    ours_name = names[0]
    rows = {}
    for name in names:
        med = statistics.median(wall[name])
        rows[name] = dict(
            params=params[name], step_s=med, tok_s=B * T / med, best_tok_s=B * T / min(wall[name]),
            cpu_tok_s=B * T / statistics.median(cpu[name]),
            ratio_wall=statistics.median(b / a for a, b in zip(wall[ours_name], wall[name])),
            ratio_cpu=statistics.median(b / a for a, b in zip(cpu[ours_name], cpu[name])),
        )
        if dev.type == "cuda":
            rows[name]["mfu"] = B * T / med * fpt / H100_BF16_PEAK
    return dict(rows=rows, flops_per_token=fpt, non_embedding_params=ref.num_params())


# --------------------------------------------------------------------------- the default model vs the CPU's peak


def bf16_matmul_flops(n: int = 2048, repeat: int = 3) -> float:
    """FLOP/s of one large bf16 matmul (n x n x n) on this CPU, best of `repeat`: the peak the default model's
    training is held against (oneDNN's bf16 GEMM, AVX512-BF16 / AMX where the CPU has them)."""
    a, b = torch.randn(n, n, dtype=torch.bfloat16), torch.randn(n, n, dtype=torch.bfloat16)
    torch.mm(a, b)  # warm-up: packing, thread pool
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def default_model_mfu(args: argparse.Namespace) -> dict:
    """The default config's model trained by its own recipe (batch, context, bf16 autocast where the CPU has native
    bf16, torch.compile, fused AdamW, gradient clipping), in rounds interleaved with the bf16 matmul peak, so
    background load hits both alike. FLOPs per token: 6N (N non-embedding parameters, the tied head included)
    plus attention; the report gives attention both as computed under the causal mask (6 * n_layer * C * T:
    SDPA skips the masked half) and as PaLM counts it (12 * n_layer * C * T)."""
    from guitarformer.config import load_config
    from guitarformer.vocab.tokenization import build_tokenizer
    from guitarformer.runtime import cpu_has_fast_bf16

    cfg = load_config(None)
    cfg.model.vocab_size = len(build_tokenizer(cfg.data))
    B, T, V = cfg.train.batch_size, cfg.model.block_size, cfg.model.vocab_size
    amp = cpu_has_fast_bf16()
    torch.manual_seed(0)
    model = build_model(cfg.model).train()
    opt = model.configure_optimizer(cfg.train.weight_decay, cfg.train.lr, (cfg.train.beta1, cfg.train.beta2), "cpu")
    fn = torch.compile(model) if cfg.train.compile else model
    x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            _, loss = fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup + 1):  # the first step compiles
        step()
    peaks, steps = [], []
    for _ in range(args.rounds):
        peaks.append(bf16_matmul_flops())
        t = time.perf_counter()
        for _ in range(args.steps):
            step()
        steps.append((time.perf_counter() - t) / args.steps)
    shares = step_shares(step)
    n = model.num_params(non_embedding=True)
    L, C = cfg.model.n_layer, cfg.model.n_embd
    causal, palm = 6.0 * n + 6.0 * L * C * T, 6.0 * n + 12.0 * L * C * T
    peak, step_s = statistics.median(peaks), statistics.median(steps)
    per_round = [B * T / s * causal / p for s, p in zip(steps, peaks)]
    return dict(name=cfg.name, B=B, T=T, L=L, C=C, V=V, amp=amp, compile=cfg.train.compile, params=n,
                peak=peak, step_s=step_s, tok_s=B * T / step_s, causal=causal, palm=palm,
                mfu=B * T / step_s * causal / peak, mfu_palm=B * T / step_s * palm / peak,
                mfu_rounds=(min(per_round), max(per_round)), shares=shares)


def step_shares(step) -> dict[str, float]:
    """Where one training step's CPU time goes (torch.profiler, self time per op): attention (SDPA's kernels, forward
    and backward), the matrix products, and the rest (inductor's fused elementwise kernels, the optimizer, the loss).
    The attention FLOPs are a third of the model's at context 1,024, so its share says how far the step can get from
    the matmul peak."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    total = attn = mm = 0.0
    for e in prof.key_averages():
        total += e.self_cpu_time_total
        if "scaled_dot_product" in e.key:
            attn += e.self_cpu_time_total
        elif e.key in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"):
            mm += e.self_cpu_time_total
    return dict(attention=attn / total, matmul=mm / total, rest=(total - attn - mm) / total, ms=total / 1e3)


def mfu_report(r: dict) -> list[str]:
    return [
        f"The default model ({r['name']}: {r['L']} layers, width {r['C']}, context {r['T']}, batch {r['B']}, vocabulary "
        f"{r['V']}; {'bf16 autocast' if r['amp'] else 'fp32'}{', torch.compile' if r['compile'] else ''}, fused AdamW, "
        f"gradient clipping) against one large bf16 matmul, interleaved rounds, medians. Non-embedding params "
        f"{r['params'] / 1e6:.2f}M; FLOPs/token {r['causal'] / 1e6:.1f}M (6N + causal attention 6*L*C*T), "
        f"{r['palm'] / 1e6:.1f}M as PaLM counts attention (12*L*C*T).",
        "",
        "| bf16 matmul peak (GFLOP/s) | ms/step | tokens/s | model FLOP/s (G) | of the peak | of the peak (PaLM count) "
        "| per-round range |",
        "|---|---|---|---|---|---|---|",
        f"| {r['peak'] / 1e9:,.0f} | {r['step_s'] * 1e3:,.0f} | {r['tok_s']:,.0f} | {r['tok_s'] * r['causal'] / 1e9:,.0f} "
        f"| {r['mfu'] * 100:.1f}% | {r['mfu_palm'] * 100:.1f}% | {r['mfu_rounds'][0] * 100:.0f}-"
        f"{r['mfu_rounds'][1] * 100:.0f}% |",
        "",
        f"Where one step's CPU time goes (torch.profiler, self time, one step of {r['shares']['ms']:,.0f} ms): "
        f"attention (SDPA forward and backward) {r['shares']['attention'] * 100:.0f}%, matrix products "
        f"{r['shares']['matmul'] * 100:.0f}%, the rest (fused elementwise kernels, loss, optimizer) "
        f"{r['shares']['rest'] * 100:.0f}%. Attention is {6 * r['L'] * r['C'] * r['T'] / r['causal'] * 100:.0f}% of "
        f"the FLOPs counted above.",
        "",
    ]


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


# --------------------------------------------------------------------------- memory


def plain_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """softmax(Q K^T / sqrt(d)) V with the (B, nh, T, L) score matrix written out: the baseline."""
    scores = (q @ k.transpose(-2, -1)) * (scale or 1.0 / math.sqrt(q.shape[-1]))  # (B, nh, T, L)
    if is_causal:
        T, L = scores.shape[-2:]
        attn_mask = torch.ones(T, L, dtype=torch.bool, device=q.device).tril()
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    att = torch.softmax(scores, dim=-1)
    if dropout_p:
        att = F.dropout(att, dropout_p)
    return att @ v


def memory_case(args: argparse.Namespace, p: dict, impl: str, T: int) -> dict:
    """One forward+backward at context T; peak memory above the state before the step."""
    sdpa = F.scaled_dot_product_attention
    if impl == "plain":
        F.scaled_dot_product_attention = plain_attention  # layers.py calls F.scaled_dot_product_attention
    try:
        return _memory_case(args, p, T) | dict(impl=impl)
    finally:
        F.scaled_dot_product_attention = sdpa


def _memory_case(args: argparse.Namespace, p: dict, T: int) -> dict:
    dev = torch.device(args.device)
    q = dict(p, block_size=T)
    model = ours(q).to(dev).train()
    x = torch.randint(0, q["vocab_size"], (args.mem_batch, T), device=dev)
    amp = args.dtype == "bfloat16"
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        reset_peak_rss()
        base = current_rss()
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
        logits = logits_of(model, x)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), x.flatten())
    loss.backward()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = peak_rss()
    return dict(T=T, peak_mib=(peak - base) / 2**20, total_mib=peak / 2**20)


def reset_peak_rss() -> None:
    # A forked child inherits the parent's ru_maxrss, so a big parent (HF models loaded) would mask the
    # child's own peak. Writing 5 to clear_refs resets this process's VmHWM to its current RSS (Linux >= 4.0).
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss() -> int:
    """Peak resident set size in bytes: VmHWM (resettable), else ru_maxrss."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def current_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory(args: argparse.Namespace, p: dict) -> list[dict]:
    out = []
    for T in args.mem_contexts:
        for impl in ("sdpa", "plain"):
            if args.device == "cuda":
                out.append(memory_case(args, p, impl, T))  # max_memory_allocated is per-process exact
                continue
            cmd = [sys.executable, __file__, "--_mem-case", impl, str(T), *sys.argv[1:]]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return out


# --------------------------------------------------------------------------- report


def machine() -> str:
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores visible, torch threads {torch.get_num_threads()}; {gpu}; " \
           f"Python {platform.python_version()}, torch {torch.__version__}"


def report(args: argparse.Namespace, p: dict, sp: dict | None, mem: list[dict] | None, mfu: dict | None = None) -> str:
    lines = [
        f"Command: `python benchmarks/bench_model.py {' '.join(a for a in sys.argv[1:] if a)}`".replace("  ", " "),
        f"Date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
        f"Machine: {machine()}",
    ]
    if sp or mem:  # the preset's comparison (mfu reports its own model and settings)
        lines += [
            f"Device/dtype: {args.device} / {args.dtype}{' (autocast)' if args.dtype == 'bfloat16' else ''}"
            f"{', torch.compile' if args.compile else ''}",
            f"Config (speed; memory uses the contexts below): n_layer={p['n_layer']} n_head={p['n_head']} "
            f"n_embd={p['n_embd']} context={p['block_size']} vocab={p['vocab_size']} batch={p['batch']}",
        ]
    lines += [f"Load average (1 min) at the end: {os.getloadavg()[0]:.1f} (other processes share these cores)", ""]
    if sp:
        lines += [
            f"Training step = forward + backward + AdamW; {args.rounds} interleaved rounds x "
            f"{args.steps} steps (after {args.warmup} warm-up steps). "
            f"Non-embedding params {sp['non_embedding_params'] / 1e6:.2f}M, "
            f"{sp['flops_per_token'] / 1e6:.1f} MFLOP/token.",
            "",
            "Speed-up columns: median over rounds of the paired per-round ratio (this model's step time / ours), "
            "by wall clock and by process CPU time.",
            "",
            "| model | params | ms/step (median) | tokens/s (median) | tokens/s (best round) | tokens/s (CPU time) "
            "| ours vs this (wall) | ours vs this (CPU time) |" + (" MFU |" if args.device == "cuda" else ""),
            "|---|---|---|---|---|---|---|---|" + ("---|" if args.device == "cuda" else ""),
        ]
        for name, r in sp["rows"].items():
            lines.append(
                f"| {name} | {r['params'] / 1e6:.2f}M | {r['step_s'] * 1e3:.1f} | {r['tok_s']:,.0f} | "
                f"{r['best_tok_s']:,.0f} | {r['cpu_tok_s']:,.0f} | {r['ratio_wall']:.2f}x | {r['ratio_cpu']:.2f}x |"
                + (f" {r['mfu'] * 100:.1f}% |" if "mfu" in r else "")
            )
        lines.append("")
    if mem:
        how = "torch.cuda.max_memory_allocated" if args.device == "cuda" else \
            "the peak RSS (VmHWM, reset just before the step; ru_maxrss where /proc lacks it) of a fresh " \
            "subprocess per case, minus its RSS just before the step"
        lines += [
            f"Peak memory of one forward+backward of our Decoder (batch {args.mem_batch}), attention through "
            f"SDPA vs plain softmax(QK^T/sqrt(d))V with the score matrix materialised; measured with {how}.",
            "",
            "| context | SDPA (MiB) | plain (MiB) | SDPA / plain |",
            "|---|---|---|---|",
        ]
        for T in args.mem_contexts:
            s = next(m for m in mem if m["T"] == T and m["impl"] == "sdpa")["peak_mib"]
            pl = next(m for m in mem if m["T"] == T and m["impl"] == "plain")["peak_mib"]
            lines.append(f"| {T} | {s:,.0f} | {pl:,.0f} | {s / pl:.2f} |")
        lines.append("")
    if mfu:
        lines += mfu_report(mfu)
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--preset", default=None, choices=sorted(PRESETS), help="default: cpu-small on CPU, gpt2-85m on CUDA")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--what", default="all", choices=["all", "speed", "memory", "mfu"],
                    help="mfu: the default model's training against this CPU's bf16 matmul peak")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--steps", type=int, default=1, help="steps per model per round")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-eager", action="store_true", help="skip HF GPT-2 with eager attention")
    ap.add_argument("--compile", action="store_true", help="torch.compile both models")
    ap.add_argument("--mem-contexts", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--mem-batch", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    ap.add_argument("--out", type=Path, default=None, help="also write the markdown report here")
    ap.add_argument("--_mem-case", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    p = dict(PRESETS[args.preset or ("gpt2-85m" if args.device == "cuda" else "cpu-small")])
    if args.batch:
        p["batch"] = args.batch
    if args._mem_case:
        impl, T = args._mem_case
        print(json.dumps(memory_case(args, p, impl, int(T))))
        return
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    sp = speed(args, p) if args.what in ("all", "speed") else None
    mem = memory(args, p) if args.what in ("all", "memory") else None
    mfu = default_model_mfu(args) if args.what == "mfu" else None
    md = report(args, p, sp, mem, mfu)
    print(md)
    if args.out:
        args.out.write_text(md + "\n")


if __name__ == "__main__":
    main()
