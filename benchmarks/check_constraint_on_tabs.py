"""How often the sampler's guitar constraint would forbid what people wrote: human tabs (Guitar Pro files and
ASCII tabs, each note's string as written) are encoded with the tab tokenizer and teacher-forced through
GuitarConstraint.start/mask/update; every token the mask forbids is counted, per kind of token, with the
reasons for String and Tech_Hammer refusals. A rule that refuses much of human writing is too strict.

Tab layout 3 (the default; `--layout 2` for the old one) writes a String only where a note leaves its lowest-fret
string: a note whose Duration is followed by anything else is on that string, and is counted as "String (implied)"
(refused where the constraint would not let the note end there). Where it is refused the token after the Duration is
not judged by its own kind (the mask rules out every token that ends the note), only counted apart. "all strings"
adds both kinds up: every note's string, comparable between the layouts.

    python benchmarks/check_constraint_on_tabs.py                      # ../shared/data/guitar, 150 files a kind
    python benchmarks/check_constraint_on_tabs.py --limit 40 --batch 32 --layout 2
    python benchmarks/check_constraint_on_tabs.py --time 1,32      # only timings: the constraint's step (mask +
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
from guitarformer.vocab.tokenization import build_tokenizer, encode
from guitarformer.generation.constraint.guitar import GuitarConstraint
from guitarformer.generation.constraint.grammar import NO_PITCH
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


def string_refusal(st, k: int, p: int, b: int, now: torch.Tensor, stats: dict, kind: str, tpq: int) -> None:
    """Why row b's note (pitch p) may not take string index k at `now`: the string cannot play it, a note still sounds
    on it (how long, in quarters), or its fret does not fit the hand with the notes sounding."""
    if k >= st.n_strings or not bool(st.fits[p, k]):
        stats["why"][f"{kind}: cannot play the pitch"] += 1
    elif not bool(st.free_strings(now)[b, k]):
        stats["why"][f"{kind}: a note still sounds on it"] += 1
        stats["overlap"][int(st.string_end[b, k] - now[b]) / tpq] += 1
    else:
        stats["why"][f"{kind}: beyond the hand's span"] += 1


def replay(tok, seqs: list[list[int]], tuning: tuple[int, ...], capo: int, stats: dict) -> None:
    """Teacher-force `seqs` (one row each) through a constraint and count what its masks forbid."""
    eos = tok["EOS_None"]
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [eos] * (T - len(s)) for s in seqs])  # (B, T)
    c = GuitarConstraint(tok, tuning, capo)
    c.start(ids[:, :1])
    st, g = c.strings, c.grammar
    before = torch.zeros(ids.shape[0], 3, dtype=torch.long)  # per row: end, pitch of the string's earlier note, now
    for t in range(1, T):
        last, nxt = ids[:, t - 1], ids[:, t]
        allowed = c.mask(last).gather(1, nxt.unsqueeze(1))[:, 0]
        now = c.time.now
        # The string each row's note takes with this token: the one a String names, or (layout 3, a Duration then
        # something else) the lowest-fret one; -1: none.
        k = torch.where(g.is_string[nxt], g.string_val[nxt] - 1, -1)
        implied = torch.zeros_like(g.is_string[nxt])
        if g.implied:
            implied = g.is_dur[last] & ~g.is_string[nxt]
            low = st.lowest[st.pending]
            k = torch.where(implied, low, k)
            _, lowest_ok = st.string_choice(now)
        if bool((k >= 0).any()):  # what the string held before this note (for the Hammer reasons)
            kk = k.clamp(0, st.n_strings - 1).unsqueeze(1)
            b_end, b_pitch = st.string_end.gather(1, kk)[:, 0], st.string_pitch.gather(1, kk)[:, 0]
            upd = torch.stack([b_end, b_pitch, now], 1)
            before = torch.where((k >= 0).unsqueeze(1), upd, before)
        for b in range(ids.shape[0]):
            if t >= len(seqs[b]):
                continue
            name = tok[int(nxt[b])]
            kind = token_kind(name)
            if bool(implied[b]):
                stats["tokens"]["String (implied)"] += 1
                if not bool(lowest_ok[b]):
                    stats["refused"]["String (implied)"] += 1
                    string_refusal(st, int(k[b]), int(st.pending[b]), b, now, stats, "String (implied)",
                                   tok.time_division)
                    stats["unjudged"] += 1  # the note-ending token: ruled out with its note, not for itself
                    continue
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
                s = int(name.split("_")[1])
                if g.implied and s - 1 == int(st.lowest[st.pending[b]]):
                    stats["why"]["String: names the lowest-fret string (layout 3 leaves it out)"] += 1
                else:
                    string_refusal(st, s - 1, int(st.pending[b]), b, now, stats, "String", tok.time_division)
            elif kind == "Tech_Hammer":
                end, pitch, at = before[b].tolist()
                if pitch == NO_PITCH:
                    stats["why"]["Hammer: no earlier note on the string"] += 1
                elif pitch == int(st.pending[b]):
                    stats["why"]["Hammer: earlier note has the same pitch"] += 1
                else:
                    stats["why"]["Hammer: earlier note ended too long ago"] += 1
                    stats["gap"][(at - end) / tok.time_division] += 1
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
    from guitarformer.generation.decode.engine import generate
    from guitarformer.generation.decode.sampling import SamplingParams
    from guitarformer.models import build_model

    torch.manual_seed(0)
    model = build_model(ModelConfig(vocab_size=len(tok), block_size=256, n_layer=6, n_head=6, n_embd=192,
                                    dropout=0.0)).eval()
    idx = torch.tensor([seq[:64]] * B)
    best = float("inf")
    for _ in range(repeat):
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        generate(model, idx, SamplingParams(new), generator=gen, constraint=GuitarConstraint(tok))
        best = min(best, time.perf_counter() - t0)
    return B * new / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=150, help="files per source kind (Guitar Pro, ASCII tab)")
    ap.add_argument("--batch", type=int, default=64, help="parts replayed together")
    ap.add_argument("--time", default="", help="batch sizes (e.g. 1,32): time the constraint's steps instead")
    ap.add_argument("--layout", type=int, default=3, choices=(2, 3),
                    help="tab layout: 3 (a String only off the lowest-fret string) or 2 (a String on every note)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=args.layout))
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
                 "overlap_pitch": Counter(), "hammers": [], "unjudged": 0}
        for (tuning, capo), seqs in groups.items():
            seqs.sort(key=len)  # similar lengths share a batch
            for i in range(0, len(seqs), args.batch):
                replay(tok, seqs[i:i + args.batch], tuning, capo, stats)
        n_parts = sum(len(s) for s in groups.values())
        print(f"\n## {kind}, tab layout {args.layout}: {n_parts} parts, {sum(stats['tokens'].values())} tokens "
              f"({time.perf_counter() - t0:.0f} s)\n")
        print("| token kind | tokens | refused | allowed |")
        print("|---|---:|---:|---:|")
        rows = stats["tokens"].most_common()
        both = ("String", "String (implied)")
        rows.append(("all strings", sum(stats["tokens"][k] for k in both)))
        stats["refused"]["all strings"] = sum(stats["refused"][k] for k in both)
        for k, n in rows:
            r = stats["refused"][k]
            print(f"| {k} | {n} | {r} | {100 * (1 - r / max(n, 1)):.2f}% |")
        if stats["unjudged"]:
            print(f"- tokens after a refused implied string, not judged by their own kind: {stats['unjudged']}")
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
