"""Bar infilling, measured (issue #18): does the right side help, and do filled bars look like the real ones?

For runs trained with infilling (data.infill > 0), on random spans of 1-4 bars with bars on both sides in the
pieces of the run's val split (train when it has none):

  NLL both sides   nats per token of the true bars in the infilling layout (the bars around them as
                   `guitarformer infill` lays them out: generation/infill.plan); the bars' music tokens only: their
                   control tokens are inputs, never scored (the sampler writes what is asked, and a run trained
                   with data.control_targets false never learned to guess them);
  NLL left only    the same tokens as a plain continuation of the piece, with as much left context as the model
                   holds (decoder: the last block_size tokens before the bars; encoder-decoder: the last
                   src_block_size tokens before them as the source, as its continuation pairs are built);
  same left        the same again with only the bars before the gap that the layout holds (BOS head before):
                   what the bars after the gap add, everything else equal;
  OA               overlapping area of the pitch, duration and onset-in-bar distributions of the filled bars
                   (sampled as the command samples them) and of the real bars they replace, per span, averaged;
                   beside it the same OA for the bars right before the span (copying the left side: a baseline).

    python benchmarks/bench_infill.py RUN [RUN ...] [--num 200] [--device auto]   # writes docs/results/INFILL.md

Small settings run on a CPU (a tiny run, --num 20: seconds); a GPU takes a few minutes for decoder-small at 200.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.app.requests import InfillRequest
from guitarformer.vocab.controls import control_kinds
from guitarformer.data.dataset import TokenSplit
from guitarformer.vocab.infill import MAX_SPAN_BARS, FillIds, decoder_layout, seq2seq_layout, split_bars
from guitarformer.errors import GuitarformerError
from guitarformer.evaluation.features import overlap_area
from guitarformer.compose.infill import Gap, bar_notes, check_infill_run, plan, sample_fill
from guitarformer.compose.riffs import Draws
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.models.loss import token_stats
from guitarformer.music.guitar import STANDARD_TUNING
from guitarformer.runs import load_run
from guitarformer.runtime import resolve_device

ROOT = Path(__file__).resolve().parents[1]
NOTES_MARK = "<!-- notes: kept when the bench writes this file again -->"


def spans(split: TokenSplit, fill: FillIds, num: int, seed: int):
    """(piece, head, bars, first, last) for `num` random spans with bars on both sides, over the split's pieces."""
    rng = np.random.default_rng(seed)
    pieces = []
    for i in range(split.num_sequences):
        ids = [int(t) for t in split.sequence(i) if t not in (fill.bos, fill.eos)]
        head, bars = split_bars(ids, fill.bars)
        if len(bars) >= 3:
            pieces.append((i, head, bars))
    if not pieces:
        return []
    out = []
    for _ in range(num):
        i, head, bars = pieces[rng.integers(len(pieces))]
        k = int(rng.integers(1, min(MAX_SPAN_BARS, len(bars) - 2) + 1))
        first = int(rng.integers(2, len(bars) - k + 1))  # 1-based; bar 1 before it, a bar after it
        out.append((i, head, bars, first, first + k - 1))
    return out


def span_split(dataset: Path) -> tuple[TokenSplit, str]:
    """The split the spans come from, and its name: val, or train where the dataset has no val pieces."""
    split = TokenSplit(dataset, "val")
    if split.num_sequences == 0 or len(split) < 2:
        return TokenSplit(dataset, "train"), "train (no val pieces)"
    return split, "val"


def fill_spans(cfg, split: TokenSplit, fill: FillIds, num: int, seed: int):
    """(k, head, bars, first, layout) for the `spans` whose fill fits the run's context (`plan`; a decoder's
    whole layout within its block), k the span's index among all `num` (its fills' seed is seed + k)."""
    for k, (_, head, bars, first, last) in enumerate(spans(split, fill, num, seed)):
        try:
            layout = plan(cfg, head, bars, first, last)
        except GuitarformerError:  # a span too long for the context
            continue
        at = 2 + len(head) + sum(len(b) for b in layout.before + layout.after) + len(layout.span)  # the fill's start
        if cfg.model.kind == "decoder" and at + sum(len(b) for b in layout.span) > cfg.model.block_size + 1:
            continue
        yield k, head, bars, first, layout


def bars_before(bars: list[list[int]], first: int, k: int) -> list[int]:
    """The tokens of the `k` bars right before bar `first` (1-based): what copying the left side puts in a gap."""
    return [t for b in bars[max(0, first - 1 - k):first - 1] for t in b]


def token_nll(logits: torch.Tensor, targets: list[int], skip: frozenset[int] = frozenset()) -> float:
    """Summed NLL of `targets` under logits (len(targets), V), the ids in `skip` (control tokens) left out: the NLL
    every measurement uses (models/loss.py)."""
    y = [IGNORE_INDEX if t in skip else t for t in targets]
    return token_stats(logits[None], torch.tensor([y], device=logits.device))[0]


def control_ids(tok) -> frozenset[int]:
    """The ids of the tokenizer's control tokens (none without controls)."""
    return frozenset(int(i) for i in np.nonzero(control_kinds(tok.vocab, len(tok)) >= 0)[0])


def _continuation_nll(model, left: list[int], truth: list[int], T: int, device, skip: frozenset[int]) -> float:
    plain = (left + truth)[-(T + 1):]
    x = torch.tensor([plain[:-1]], device=device)
    return token_nll(model(x)[0][0, len(plain) - 1 - len(truth):], truth, skip)


@torch.no_grad()
def nll_pair(model, cfg, fill: FillIds, head, before, span, after, left: list[int], device,
             skip: frozenset[int] = frozenset()) -> tuple[float, float, float]:
    """(summed NLL of the span's tokens but those in `skip` given both sides, given the left side only, given the
    layout's bars before only)."""
    truth = [i for b in span for i in b]
    same_left = [fill.bos, *head, *(i for b in before for i in b)]
    if cfg.model.kind == "decoder":
        ids, at = decoder_layout(fill, head, before, span, after)
        x = torch.tensor([ids[:at + len(truth) - 1]], device=device)
        both = token_nll(model(x)[0][0, at - 1:], truth, skip)
        T = cfg.model.block_size
        return both, _continuation_nll(model, left, truth, T, device, skip), _continuation_nll(
            model, same_left, truth, T, device, skip)
    T = cfg.model.block_size
    truth = truth[: T - 1]
    tgt = torch.tensor([[fill.bos, *truth[:-1]]], device=device)

    def run(src: list[int]) -> float:
        s = torch.tensor([src], device=device)
        logits = model(s, tgt, src_key_mask=torch.ones_like(s, dtype=torch.bool))[0]
        return token_nll(logits[0], truth, skip)

    src, _ = seq2seq_layout(fill, head, before, span, after)
    return run(src), run(left[-cfg.model.src_block_size:]), run(same_left)


def bench_run(run: Path, num: int, seed: int, device, temperature: float | None = None,
              candidates: int = InfillRequest.candidates) -> dict:
    loaded = load_run(run, None, str(device))
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    fill = check_infill_run(tok, cfg)
    split, split_name = span_split(Path(cfg.data.dataset))
    skip = control_ids(tok)
    t0 = time.time()
    both = only = same = 0.0
    tokens = 0
    oa = {"pitch": [], "duration": [], "onset": []}
    oa_left = {"pitch": [], "duration": [], "onset": []}
    done = 0
    for k, head, bars, first, layout in fill_spans(cfg, split, fill, num, seed):
        before, span, after, _ = layout
        piece = [fill.bos, *head, *(t for b in bars[:first - 1] for t in b)]
        b_nll, o_nll, s_nll = nll_pair(model, cfg, fill, head, before, span, after, piece, device, skip)
        same += s_nll
        scored = [t not in skip for b in span for t in b]
        n_tok = sum(scored[: cfg.model.block_size - 1] if cfg.model.kind != "decoder" else scored)
        both, only, tokens = both + b_nll, only + o_nll, tokens + n_tok
        new, _ = sample_fill(model, tok, cfg, Gap(fill, head, layout, STANDARD_TUNING),
                             SamplingParams.from_config(cfg.sample, temperature=temperature),
                             Draws(candidates, seed + k), device)
        real = bar_notes(tok, [t for b in span for t in b])
        made = bar_notes(tok, new)
        left = bar_notes(tok, bars_before(bars, first, len(span)))
        for j, name in enumerate(oa):
            oa[name].append(overlap_area(made[j], real[j]))
            oa_left[name].append(overlap_area(left[j], real[j]))
        done += 1
    mean = {n: float(np.nanmean(v)) if np.isfinite(v).any() else math.nan for n, v in oa.items()}
    mean_left = {n: float(np.nanmean(v)) if np.isfinite(v).any() else math.nan for n, v in oa_left.items()}
    return {"run": run.name, "kind": cfg.model.kind, "infill": cfg.data.infill, "split": split_name, "spans": done,
            "tokens": tokens, "nll_both": both / max(1, tokens), "nll_left": only / max(1, tokens),
            "nll_same": same / max(1, tokens), "oa": mean,
            "oa_left": mean_left, "candidates": candidates, "seconds": time.time() - t0, "device": str(device)}


def write_doc(rows: list[dict], out: Path, command: str) -> None:
    notes_text = ""
    if out.is_file() and NOTES_MARK in out.read_text():
        notes_text = out.read_text().split(NOTES_MARK, 1)[1]
    lines = [
        "# Bar infilling (issue #18)",
        "",
        "Runs trained with `data.infill` > 0 fill random spans of 1-4 bars (bars on both sides) of their val pieces.",
        "NLL both sides: nats per token of the true bars in the infilling layout; NLL left only: the same tokens as",
        "a plain continuation with as much left context as the model holds; same left: the same with only the bars",
        "before the gap that the infilling layout holds (what the bars after the gap add, all else equal); ratio:",
        "both sides / left only, issue 26's target <= 0.95. OA: overlapping area of pitch, duration",
        "and onset-in-bar distributions, filled bars vs the real ones, per span, averaged; in brackets the same for",
        "the bars right before the span (copying the left side). Fills are sampled as `guitarformer infill` samples",
        "them: the run's sampling settings, `fills drawn` candidates side by side, the one ranked first kept",
        "(compose/infill.py `rank_fills`: its fit to the bars around the gap, and the model's likelihood).",
        "",
        f"    {command}",
        "",
        "| run | kind | infill | split | spans | tokens | NLL both sides | NLL left only | same left | ratio "
        "| fills drawn | OA pitch | OA duration | OA onset | device | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        oa = " | ".join(f"{r['oa'][n]:.3f} ({r['oa_left'][n]:.3f})" for n in ("pitch", "duration", "onset"))
        lines.append(f"| {r['run']} | {r['kind']} | {r['infill']:g} | {r['split']} | {r['spans']} | {r['tokens']} "
                     f"| {r['nll_both']:.3f} | {r['nll_left']:.3f} | {r['nll_same']:.3f} "
                     f"| {r['nll_both'] / max(r['nll_left'], 1e-9):.3f} | {r.get('candidates', 1)} | {oa} "
                     f"| {r['device']} | {r['seconds']:.0f} |")
    lines += ["", NOTES_MARK]
    out.write_text("\n".join(lines) + (notes_text if notes_text else "\n"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories trained with data.infill > 0")
    ap.add_argument("--num", type=int, default=200, help="spans per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--temperature", type=float, default=None, help="the fills' sampling temperature (default: "
                    "each run's sample.temperature, as `guitarformer infill` uses it)")
    ap.add_argument("--candidates", type=int, default=InfillRequest.candidates, help="fills sampled per span, one "
                    "kept as `guitarformer infill` keeps it (default: the command's)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "INFILL.md")
    a = ap.parse_args(argv)
    device = resolve_device(a.device)
    rows = []
    for run in a.runs:
        r = bench_run(run, a.num, a.seed, device, a.temperature, a.candidates)
        print(f"{r['run']} ({r['kind']}): {r['spans']} spans, NLL both sides {r['nll_both']:.3f} vs left only "
              f"{r['nll_left']:.3f} (same bars before {r['nll_same']:.3f}) nats/token; OA fill pitch/duration/onset "
              + "/".join(f"{r['oa'][n]:.3f}" for n in ("pitch", "duration", "onset"))
              + " (left bars " + "/".join(f"{r['oa_left'][n]:.3f}" for n in ("pitch", "duration", "onset"))
              + f"); {r['seconds']:.0f} s", flush=True)
        rows.append(r)
    command = "python benchmarks/bench_infill.py " + " ".join(sys.argv[1:] if argv is None else argv)
    write_doc(rows, a.out, command)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
