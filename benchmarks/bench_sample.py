"""Generated tokens/s: our KV-cached `generate` vs Hugging Face GPT-2 `generate` vs a recompute-everything loop.

Same dims on every side (`--dims`; `--pretrained`: the shipped model itself against HF GPT-2 of its dims), a
512-token prompt so the cache matters, sampling at temperature 1 with no top-k/top-p and no constraints for
fairness; ours is also timed with the guitar constraint on, and with the constraint and classifier-free guidance
(an unconditioned twin read beside each row, as `sample --key/--style` runs). Prints a Markdown table
(docs/results/BENCH_SAMPLE.md).

    python benchmarks/bench_sample.py [--threads 1] [--new 256] [--prompt 512] [--repeat 3]
    python benchmarks/bench_sample.py --pretrained --batches 1                   # what `guitarformer sample` runs
    python benchmarks/bench_sample.py --device cuda --dims base --batches 1,32   # GPU, decoder-base dims

To compare two versions of the package, run it with PYTHONPATH set to each checkout in turn, alternating
(A B A B ...): on a shared CPU one run's ratio moves by ±15%, so compare ratios over several runs.
"""

from __future__ import annotations

import argparse
import os
import platform
from dataclasses import replace

import symusic
import torch
from harness import interleaved


def remi_prompt(tok, n: int, shift: int = 0) -> list[int]:
    """n ids of a real riff in the tokenizer's own layout (so the constraint's state is a real one); tab
    tokenizers get the riff fretted by `fret()`, as `prepare` does for MIDI. `shift`: another riff of the same
    rhythm, its pitch pattern moved (a batch's rows differ, as riffs do: rows of one prompt would share its cache)."""
    from guitarformer.vocab.tokenization import encode, is_tab_tokenizer
    from guitarformer.fingering.viterbi import fret
    from guitarformer.music.score import GuitarScore

    s = symusic.Score(480)
    s.tempos.append(symusic.Tempo(0, 100))
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=25)
    for i in range(n):
        tr.notes.append(symusic.Note(i * 240, 240, 40 + (i * 5 + shift) % 24, 90))
    s.tracks.append(tr)
    if is_tab_tokenizer(tok):
        return encode(tok, GuitarScore(s, frets=fret(tr.notes)))[:n]
    return encode(tok, s)[:n]


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fns: dict, repeat: int) -> dict:
    """Best wall time of each callable over `repeat` interleaved rounds (after one warm-up call each; harness.py):
    on a shared machine, background load then hits every contender alike."""
    for fn in fns.values():
        fn()  # warm-up (allocator, kernels, graph capture)
    sync()
    times = interleaved({name: (lambda fn=fn: (fn(), sync())) for name, fn in fns.items()}, repeat)
    return {name: min(ts) for name, ts in times.items()}


@torch.no_grad()
def recompute_loop(model, idx: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    """The naive baseline: the whole sequence through the model for every new token."""
    for _ in range(n):
        logits = model(idx)[0][:, -1]
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
        idx = torch.cat([idx, nxt], 1)
    return idx


def eager(call):
    """`call()` with the CUDA graph off: the engine's decoding-path hook (engine._PATH; no user option chooses it)."""
    from guitarformer.generation import engine

    was, engine._PATH = engine._PATH, engine._Path(capture=False)
    try:
        return call()
    finally:
        engine._PATH = was


def extra(rows: list[dict], key: str, intro: str, columns: list[str], cells) -> None:
    """A table of one more measurement `key` (only where the rows have it): the intro, then batch + `columns`, a row
    of `cells(r)` per batch."""
    if not any(key in r for r in rows):
        return
    print(f"\n{intro}")
    print("\n| batch | " + " | ".join(columns) + " |\n|" + "---:|" * (len(columns) + 1))
    for r in rows:
        print(f"| {r['B']} | " + " | ".join(cells(r)) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--recompute-new", type=int, default=64, help="fewer steps for the slow baseline")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dims", default="small", choices=["small", "base", "default"],
                    help="small: 6 layers, C=192 (the earlier rounds' shipped model); base: decoder-base (12 layers, "
                         "C=768); default: the default preset's model (4 layers, C=128, prev_token, copy)")
    ap.add_argument("--pretrained", action="store_true",
                    help="ours is the shipped model itself (its dims, weights and tokenizer; HF GPT-2 of its dims)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                    help="both models' weights (and so their steps) in this dtype")
    ap.add_argument("--compile", action="store_true",
                    help="also ours with its one-token step compiled (SamplingParams.compile; on CUDA compiled, then "
                         "captured; seconds of compiling in the warm-up, once per batch shape)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import GPT2Config, GPT2LMHeadModel

    from guitarformer.config import DataConfig, ModelConfig
    from guitarformer.vocab.tokenization import build_tokenizer
    from guitarformer.models import build_model
    from guitarformer.generation.constraint.guitar import GuitarConstraint, constraint_device
    from guitarformer.generation.decode.engine import generate
    from guitarformer.generation.decode.sampling import SamplingParams

    dev = torch.device(args.device)
    torch.manual_seed(0)
    if args.pretrained:
        from guitarformer.runs import load_run

        loaded = load_run("pretrained", device=args.device)

        ours, tok, _ = loaded.model, loaded.tokenizer, loaded.cfg
        args.dims = "shipped"
    else:
        tok = build_tokenizer(DataConfig())
        if args.dims == "default":
            from guitarformer.config import load_config

            mc = replace(load_config(None).model, vocab_size=len(tok))
        else:
            L, C, H = (6, 192, 6) if args.dims == "small" else (12, 768, 12)
            mc = ModelConfig(vocab_size=len(tok), block_size=1024, n_layer=L, n_head=H, n_embd=C, dropout=0.0)
        ours = build_model(mc).eval().to(dev)
    cfg = ours.config
    V, ctx, L, C, H = cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_embd, cfg.n_head
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=ctx, n_embd=C, n_layer=L, n_head=H, resid_pdrop=0.0,
                                    embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2)).eval().to(dev)
    dtype = getattr(torch, args.dtype)
    ours, hf = ours.to(dtype), hf.to(dtype)
    prompts = [remi_prompt(tok, args.prompt, shift=r) for r in range(max(int(b) for b in args.batches.split(",")))]
    rows = []
    for B in (int(b) for b in args.batches.split(",")):
        idx = torch.tensor(prompts[:B], device=dev)  # rows that differ: one prompt repeated would share its cache
        gen = torch.Generator().manual_seed(0)
        gen_re = torch.Generator(device=dev).manual_seed(0)
        n, nr = args.new, args.recompute_new
        attn = torch.ones_like(idx)
        twin = idx[:, [0, *range(4, idx.shape[1])]]  # the prompt less three tokens, as an unconditioned twin
        fns = {
            "ours": lambda: generate(ours, idx, SamplingParams(n), generator=gen),
            "cons": lambda: generate(ours, idx, SamplingParams(n), generator=gen,
                                     constraint=GuitarConstraint(tok, device=dev)),
            "guided": lambda: generate(ours, idx, SamplingParams(n, guidance=1.0), generator=gen, guide=twin,
                                       constraint=GuitarConstraint(tok, device=dev)),
            "hf": lambda: hf.generate(idx, attention_mask=attn, max_new_tokens=n, min_new_tokens=n, do_sample=True,
                                      top_k=0, top_p=1.0, temperature=1.0, use_cache=True, pad_token_id=0),
        }
        if dev.type == "cuda":  # what the captured step (CUDA graph, the default there) is worth: the eager steps
            fns["eager"] = lambda: eager(lambda: generate(ours, idx, SamplingParams(n), generator=gen,
                                                          constraint=GuitarConstraint(tok, device=dev)))
            # the constraint where `sample` keeps it for this batch (constraint_device: the host up to HOST_ROWS
            # rows), against "cons" above, which keeps it on the GPU
            fns["home"] = lambda: generate(ours, idx, SamplingParams(n), generator=gen,
                                           constraint=GuitarConstraint(tok, device=constraint_device(dev, B)))
        if args.compile:  # the compiled step (generation/decode/compiled.py; on CUDA compiled, then captured)
            fns["compiled"] = lambda: generate(ours, idx, SamplingParams(n, compile=True), generator=gen)
            fns["compiled_cons"] = lambda: generate(ours, idx, SamplingParams(n, compile=True), generator=gen,
                                                    constraint=GuitarConstraint(tok, device=constraint_device(dev, B)))
        best = timed(fns, args.repeat)
        r = {"B": B, **{k: B * n / t for k, t in best.items()}}
        r["re"] = B * nr / timed({"re": lambda: recompute_loop(ours, idx, nr, gen_re)}, 1)["re"]
        print(r, flush=True)
        rows.append(r)

    where = torch.cuda.get_device_name() if dev.type == "cuda" else cpu_name()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    extras = ", ".join(k for k in ("prev_token", "copy") if getattr(cfg, k))
    print(f"\n{where}, {args.dims} dims ({L} layers, C={C}, {H} heads, {cfg.pos} positions, vocabulary {V}"
          f"{', ' + extras if extras else ''}), "
          f"{args.dtype} weights, torch {torch.__version__}, {args.threads} thread(s), load average {load:.1f} at the end; "
          f"prompt {args.prompt} tokens, {args.new} new (recompute: {args.recompute_new} new), best of {args.repeat}\n")
    print("| batch | ours (cache) | ours + constraint | HF GPT-2 generate | recompute loop | ours/HF | "
          "ours + constraint/HF | ours/recompute | constraint cost (ours / ours + constraint) | "
          "ours + constraint + guidance | guidance cost |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['B']} | {r['ours']:.0f} | {r['cons']:.0f} | {r['hf']:.0f} | {r['re']:.0f} | "
              f"{r['ours'] / r['hf']:.2f}x | {r['cons'] / r['hf']:.2f}x | {r['ours'] / r['re']:.1f}x | "
              f"{r['ours'] / r['cons']:.2f}x | {r['guided']:.0f} | {r['cons'] / r['guided']:.2f}x |")
    extra(rows, "eager", "On CUDA, ours runs its one-token steps as a captured CUDA graph; without it (eager steps, "
          "constraint on):", ["ours + constraint, eager steps", "captured / eager"],
          lambda r: [f"{r['eager']:.0f}", f"{r['cons'] / r['eager']:.2f}x"])
    extra(rows, "home", "The constraint where `guitarformer sample` keeps it for the batch (`constraint_device`: the "
          "host up to HOST_ROWS rows, tokens drawn there; the column \"ours + constraint\" above keeps it on the GPU):",
          ["ours + constraint (sample's placement)", "its cost (ours / this)", "this / HF",
           "this / constraint on the GPU"],
          lambda r: [f"{r['home']:.0f}", f"{r['ours'] / r['home']:.2f}x", f"{r['home'] / r['hf']:.2f}x",
                     f"{r['home'] / r['cons']:.2f}x"])
    extra(rows, "compiled", "Ours with the one-token step compiled (`SamplingParams(compile=True)`, "
          "generation/decode/compiled.py; on CUDA compiled, then captured; the constraint where `sample` keeps it; the "
          "compiling is in the warm-up):",
          ["ours compiled", "ours compiled + constraint", "compiled/HF", "compiled + constraint/HF",
           "compiled / not (plain)", "compiled / not (constraint)"],
          lambda r: [f"{r['compiled']:.0f}", f"{r['compiled_cons']:.0f}", f"{r['compiled'] / r['hf']:.2f}x",
                     f"{r['compiled_cons'] / r['hf']:.2f}x", f"{r['compiled'] / r['ours']:.2f}x",
                     f"{r['compiled_cons'] / r.get('home', r['cons']):.2f}x"])


if __name__ == "__main__":
    main()
