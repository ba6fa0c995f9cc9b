"""How often the sampler's guitar constraint would forbid what people wrote: human tabs (Guitar Pro files and
ASCII tabs, each note's string as written) are encoded with the tab tokenizer and teacher-forced through
GuitarConstraint.start/mask/update; every token the mask forbids is counted, per kind of token, with the
reasons for String and Tech_Hammer refusals. A rule that refuses much of human writing is too strict.

    python scripts/check_constraint_on_tabs.py                      # ../shared/data/guitar, 150 files a kind
    python scripts/check_constraint_on_tabs.py --limit 40 --batch 32
    python scripts/check_constraint_on_tabs.py --time 1,32      # only timings: the constraint's step (mask +
                                                                # update) and constrained sampling, tab tokens

Parts are replayed in batches (one row per part, finished rows fed EOS, which changes no state), grouped by
tuning and capo since the constraint is built for one of each.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from guitarformer.config import DataConfig
from guitarformer.data.tokenization import build_tokenizer, encode
from guitarformer.generation.constraint import GuitarConstraint
from guitarformer.generation.grammar import NO_PITCH
from guitarformer.readers import detect_format, read_guitar

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "guitar"
KINDS = {"Guitar Pro": (".gp3", ".gp4", ".gp5", ".gp", ".gpx"), "ASCII tab": (".txt", ".tab")}


def human_parts(data: Path, suffixes: tuple[str, ...], limit: int, seed: int = 0) -> list:
    """Up to `limit` files' guitar parts that carry a human fingering (frets as written)."""
    files = sorted(p for p in data.rglob("*") if p.suffix.lower() in suffixes and detect_format(p))
    random.Random(seed).shuffle(files)
    parts = []
    for f in files[:limit]:
        try:
            read = read_guitar(f)
        except Exception as e:  # noqa: BLE001 - dirt in the shared data: a broken file is reported, not counted
            print(f"skipped {f.name}: {str(e)[:80]}", file=sys.stderr)
            continue
        parts += [gs for gs in read if gs.frets is not None and len(gs.track.notes) >= 2]
    return parts


def token_kind(name: str) -> str:
    return "Tech_Hammer" if name == "Tech_Hammer" else name.split("_")[0]


def replay(tok, seqs: list[list[int]], tuning: tuple[int, ...], capo: int, stats: dict) -> None:
    """Teacher-force `seqs` (one row each) through a constraint and count what its masks forbid."""
    eos = tok["EOS_None"]
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [eos] * (T - len(s)) for s in seqs])  # (B, T)
    c = GuitarConstraint(tok, tuning, capo)
    c.start(ids[:, :1])
    st = c.strings
    before = torch.zeros(ids.shape[0], 3, dtype=torch.long)  # per row: end, pitch of the string's earlier note, now
    for t in range(1, T):
        last, nxt = ids[:, t - 1], ids[:, t]
        allowed = c.mask(last).gather(1, nxt.unsqueeze(1))[:, 0]
        now = c.time.now
        for b in range(ids.shape[0]):
            if t >= len(seqs[b]):
                continue
            name = tok[int(nxt[b])]
            kind = token_kind(name)
            stats["tokens"][kind] += 1
            if kind == "Tech_Hammer":  # what the human note had before it on its string, for the tolerance table
                end, pitch, at = before[b].tolist()
                stats["hammers"].append((pitch != NO_PITCH, pitch == int(st.pending[b]), (at - end) / tok.time_division))
            if bool(allowed[b]):
                continue
            stats["refused"][kind] += 1
            if kind == "Pitch":
                p = int(name.split("_")[1])
                sounding = st.slot_end[b] > now[b]
                if bool((sounding & (st.slot_pitch[b] == p)).any()):
                    stats["why"]["Pitch: the same pitch still sounds"] += 1
                    stats["overlap_pitch"][int((st.slot_end[b] - now[b]).masked_fill(st.slot_pitch[b] != p, 0).max())
                                           / tok.time_division] += 1
                elif not bool((st.free_strings(now)[b] & st.fits[p, : st.n_strings]).any()):
                    stats["why"]["Pitch: no free string can play it"] += 1
                else:
                    stats["why"]["Pitch: other (Hall's condition)"] += 1
            elif kind == "String":
                k = int(name.split("_")[1]) - 1
                p = int(st.pending[b])
                if k >= st.n_strings or not bool(st.fits[p, k]):
                    stats["why"]["String: cannot play the pitch"] += 1
                else:
                    over = int(st.string_end[b, k] - now[b])
                    stats["why"]["String: a note still sounds on it"] += 1
                    stats["overlap"][over / tok.time_division] += 1
            elif kind == "Tech_Hammer":
                end, pitch, at = before[b].tolist()
                if pitch == NO_PITCH:
                    stats["why"]["Hammer: no earlier note on the string"] += 1
                elif pitch == int(st.pending[b]):
                    stats["why"]["Hammer: earlier note has the same pitch"] += 1
                else:
                    stats["why"]["Hammer: earlier note ended too long ago"] += 1
                    stats["gap"][(at - end) / tok.time_division] += 1
        is_string = c.grammar.is_string[nxt]
        if bool(is_string.any()):  # what the chosen string held before this note (for the Hammer reasons)
            k = (c.grammar.string_val[nxt] - 1).clamp(0, st.n_strings - 1).unsqueeze(1)
            b_end, b_pitch = st.string_end.gather(1, k)[:, 0], st.string_pitch.gather(1, k)[:, 0]
            upd = torch.stack([b_end, b_pitch, c.time.now], 1)
            before = torch.where(is_string.unsqueeze(1), upd, before)
        c.update(nxt)


def time_steps(tok, seq: list[int], B: int, repeat: int = 3) -> float:
    """Seconds per step of mask + update, teacher-forcing `seq` in B rows (each row starting elsewhere in it)."""
    T = len(seq) // 2
    ids = torch.tensor([seq[(b * 7) % T:][:T] for b in range(B)])  # (B, T)
    best = float("inf")
    for _ in range(repeat):
        c = GuitarConstraint(tok)
        c.start(ids[:, :1])
        t0 = time.perf_counter()
        for t in range(1, T):
            c.mask(ids[:, t - 1])
            c.update(ids[:, t])
        best = min(best, (time.perf_counter() - t0) / (T - 1))
    return best


def time_generate(tok, seq: list[int], B: int, new: int = 64, repeat: int = 3) -> float:
    """Generated tokens per second with the constraint, decoder-small dims (6 layers, C=192), a 64-token prompt."""
    from guitarformer.config import ModelConfig
    from guitarformer.generation.engine import generate
    from guitarformer.generation.sampling import SamplingParams
    from guitarformer.models import build_model

    torch.manual_seed(0)
    model = build_model(ModelConfig(vocab_size=len(tok), block_size=256, n_layer=6, n_head=6, n_embd=192,
                                    dropout=0.0)).eval()
    idx = torch.tensor([seq[:64]] * B)
    best = float("inf")
    for _ in range(repeat):
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        generate(model, idx, SamplingParams(new), generator=gen, constraint=GuitarConstraint(tok), eos_id=None)
        best = min(best, time.perf_counter() - t0)
    return B * new / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=150, help="files per source kind (Guitar Pro, ASCII tab)")
    ap.add_argument("--batch", type=int, default=64, help="parts replayed together")
    ap.add_argument("--time", default="", help="batch sizes (e.g. 1,32): time the constraint's steps instead")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    if args.time:
        seq = max((encode(tok, gs) for gs in human_parts(args.data, KINDS["Guitar Pro"], 10)), key=len)[:2000]
        for B in (int(b) for b in args.time.split(",")):
            print(f"batch {B}: {1e3 * time_steps(tok, seq, B):.3f} ms per step (mask + update), "
                  f"{time_generate(tok, seq, B):.0f} tokens/s sampled (decoder-small dims, constrained)")
        return
    for kind, suffixes in KINDS.items():
        t0 = time.perf_counter()
        parts = human_parts(args.data, suffixes, args.limit)
        groups: dict[tuple, list[list[int]]] = defaultdict(list)
        for gs in parts:
            if len(gs.tuning) <= 8:
                groups[(tuple(gs.tuning), gs.capo)].append(encode(tok, gs))
        stats = {"tokens": Counter(), "refused": Counter(), "why": Counter(), "overlap": Counter(), "gap": Counter(),
                 "overlap_pitch": Counter(), "hammers": []}
        for (tuning, capo), seqs in groups.items():
            seqs.sort(key=len)  # similar lengths share a batch
            for i in range(0, len(seqs), args.batch):
                replay(tok, seqs[i:i + args.batch], tuning, capo, stats)
        n_parts = sum(len(s) for s in groups.values())
        print(f"\n## {kind}: {n_parts} parts, {sum(stats['tokens'].values())} tokens "
              f"({time.perf_counter() - t0:.0f} s)\n")
        print("| token kind | tokens | refused | allowed |")
        print("|---|---:|---:|---:|")
        for k, n in stats["tokens"].most_common():
            r = stats["refused"][k]
            print(f"| {k} | {n} | {r} | {100 * (1 - r / n):.2f}% |")
        for why, n in stats["why"].most_common():
            print(f"- {why}: {n}")
        if stats["overlap"]:
            print("- still sounding for (quarters):", sorted(stats["overlap"].items())[:20])
        if stats["overlap_pitch"]:
            print("- same pitch still sounding for (quarters):",
                  sorted(stats["overlap_pitch"].items())[:20])
        if stats["gap"]:
            print("- hammer gap (quarters):", sorted(stats["gap"].items())[:20])
        hammer_table(stats["hammers"])


def hammer_table(hammers: list[tuple[bool, bool, float]]) -> None:
    """Share of the human Tech_Hammer tokens that other tolerances would allow: how long ago the earlier note on
    the string may have ended, and whether it may have the same pitch."""
    if not hammers:
        return
    print("\n| earlier note ended at most | other pitch only | any pitch |")
    print("|---|---:|---:|")
    for window in (0.25, 0.5, 1, 2, 4, float("inf")):
        row = []
        for same_ok in (False, True):
            ok = sum(has and (same_ok or not same) and gap <= window for has, same, gap in hammers)
            row.append(f"{100 * ok / len(hammers):.2f}%")
        print(f"| {window} quarters before | {row[0]} | {row[1]} |")


if __name__ == "__main__":
    main()
