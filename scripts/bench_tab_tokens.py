"""Cost of carrying the guitar in the tokens: tokens per note of TabREMI against pitch-only REMI on the same parts,
the round trip of every note through `tok.encode` / `tok.decode`, and how often each technique occurs.

    python scripts/bench_tab_tokens.py --limit 80                      # ../shared/data/guitar, per source kind
    python scripts/bench_tab_tokens.py --limit 80 --doc docs/TAB_TOKENS.md   # also writes the tables there
    python scripts/bench_tab_tokens.py --corpus REMI_DATASET TAB_DATASET --doc docs/TAB_TOKENS.md

Parts without a human fingering (MIDI) get `fret()`'s, as `prepare` gives them. Three tab layouts are counted:
the default (Velocity only with dynamics; these sources are counted without, as a dataset with one velocity is),
the same with a Velocity on every note (a dataset with dynamics), and the first layout's count (always a Velocity,
as the second). A note round-trips when it comes back from the tokens with its pitch, onset, duration (both as
the tokenizer quantises the note), string, fret and techniques (as tokens hold them: a bend's peak and release).
`--corpus` compares two prepared datasets of the same files (train+val+test tokens, notes = Pitch tokens).
"Notes on their lowest-fret string": notes whose String is the one that plays their pitch at the lowest fret in the
part's tuning and capo (`lowest_fret_string`, the string a bare Score's notes get): what a layout that writes a
String only where the fingering departs from it would leave out.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_tab_doc

from guitarformer.config import DataConfig  # noqa: E402
from guitarformer.data.tab_tokens import canonical, lowest_fret_string, technique_tokens  # noqa: E402
from guitarformer.data.tokenization import build_tokenizer, encode, load_tokenizer  # noqa: E402
from guitarformer.errors import SkipFile  # noqa: E402
from guitarformer.fretting import fret  # noqa: E402
from guitarformer.music.guitar import STANDARD_TUNING, fret_of  # noqa: E402
from guitarformer.music.score import PLAIN, GuitarScore  # noqa: E402
from guitarformer.readers import detect_format, read_guitar  # noqa: E402
from bench_tab_doc import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "guitar"
KINDS = {"Guitar Pro": (".gp3", ".gp4", ".gp5", ".gp", ".gpx"), "ASCII tab": (".txt", ".tab"),
         "MIDI (fingered by `fret()`)": (".mid", ".midi")}


def quantised_notes(tok, gs: GuitarScore) -> tuple[Counter, int, int]:
    """What a perfect round trip gives back: each note's (onset, duration in quarters, pitch, string, fret,
    technique) as the tokenizer quantises it, string by string, apart from the notes the source leaves
    UNPLAYABLE though a string plays them (`fret()` where a chord has more notes than strings: the tokens give
    each note a string) or writes with a fret that does not give its pitch on that string (pitch != open string
    + capo + fret: a reader's or the file's own inconsistency, which no layout of pitch and string can keep),
    which come second; and how many notes quantisation itself drops (merged into another on their string),
    which count as not round-tripped."""
    notes = gs.track.notes
    techs = gs.techniques or [PLAIN] * len(notes)
    by_string: dict[int, list[int]] = {}
    for i, (s, _) in enumerate(gs.frets):
        by_string.setdefault(s, []).append(i)
    want, odd, dropped = Counter(), Counter(), 0
    for s, idx in by_string.items():
        one = gs.score.copy()
        one.tracks[0].notes.clear()
        for i in idx:
            one.tracks[0].notes.append(notes[i].copy())
        pre = tok.preprocess_score(one)
        tpq = pre.ticks_per_quarter
        for p in {notes[i].pitch for i in idx}:  # each pitch's notes keep their order through quantisation
            q = sorted((n.time, n.duration) for t in pre.tracks for n in t.notes if n.pitch == p)
            src = sorted((i for i in idx if notes[i].pitch == p), key=lambda i: notes[i].time)
            dropped += max(0, len(src) - len(q))
            for (t, d), i in zip(q, src):
                key = (Fraction(t, tpq), Fraction(d, tpq), p, *gs.frets[i], canonical(techs[i]))
                (odd if _off_pitch(gs, notes[i].pitch, *gs.frets[i]) else want)[key] += 1
    return want, odd, dropped


def _off_pitch(gs: GuitarScore, pitch: int, string: int, fret_: int) -> bool:
    """The source's (string, fret) is not one the tokens can hold: UNPLAYABLE though a string plays the pitch,
    or a fret that does not give the pitch on its string."""
    if string <= 0:
        return any(0 <= fret_of(pitch, s, gs.tuning, gs.capo) <= 24 for s in range(1, len(gs.tuning) + 1))
    return fret_of(pitch, string, gs.tuning, gs.capo) != fret_


def decoded_notes(tok, ids: list[int], gs: GuitarScore) -> Counter:
    back = tok.decode(ids, tuning=gs.tuning, capo=gs.capo)
    if back.frets is None:
        return Counter()
    tpq = back.score.ticks_per_quarter
    return Counter((Fraction(n.time, tpq), Fraction(n.duration, tpq), n.pitch, *sf, t)
                   for n, sf, t in zip(back.track.notes, back.frets, back.techniques or [PLAIN] * len(back.frets)))


def bench_sources(data: Path, limit: int) -> tuple[str, str]:
    remi = build_tokenizer(DataConfig(tokenizer="REMI"))
    tab = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    loud = build_tokenizer(DataConfig(tokenizer="TabREMI"), dynamics=True)
    rows, techs, notes_all, failures = [], Counter(), 0, Counter()
    for kind, suffixes in KINDS.items():
        files = sorted(p for p in data.rglob("*") if p.suffix.lower() in suffixes and detect_format(p))
        random.Random(0).shuffle(files)
        c = Counter()
        velocities: set[int] = set()
        t0 = time.perf_counter()
        for f in files[:limit]:
            try:
                read = read_guitar(f)
            except SkipFile:
                continue
            except Exception as e:  # counted and reported below
                failures[f"{kind}: {type(e).__name__}"] += 1
                continue
            for gs in read:
                if len(gs.track.notes) < 2:
                    continue
                if gs.frets is None:
                    gs.frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
                try:
                    seq = tab.encode(gs)[0]
                except SkipFile:
                    c["skipped"] += 1
                    continue
                velocities.update(n.velocity for n in gs.track.notes)
                want, odd, dropped = quantised_notes(tab, gs)
                got = decoded_notes(tab, list(seq.ids), gs)
                c["same_rest"] += sum((want & got).values())
                c["odd"] += sum(odd.values())
                want += odd
                c["parts"] += 1
                c["notes"] += len(gs.track.notes)
                c["remi"] += len(encode(remi, gs.score)) - 2
                c["tab"] += len(seq.ids)
                c["loud"] += len(loud.encode(gs)[0].ids)
                c["same"] += sum((want & got).values())
                c["dropped"] += dropped
                c["lowest"] += sum(s == lowest_fret_string(gs.tuning, gs.capo, n.pitch)
                                   for (s, _), n in zip(gs.frets, gs.track.notes))
                for x in gs.techniques or []:
                    for token in technique_tokens(x):
                        techs[token.split("_", 1)[1] if token.startswith("Tech_") else "Bend"] += 1
        notes_all += c["notes"]
        if c["parts"]:
            rows.append((kind, c, len(velocities), time.perf_counter() - t0))
    lines = ["| source | parts | notes | velocities | REMI tokens/note | TabREMI tokens/note | TabREMI / REMI | "
             "with Velocity (dynamics; the first layout) / REMI | round trip | notes the source leaves unplayable "
             "or frets off their pitch | round trip of the rest | notes on their lowest-fret string |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, c, nv, _ in rows:
        n = c["notes"]
        lines.append(f"| {kind} | {c['parts']} | {n:,} | {nv} | {c['remi'] / n:.3f} | {c['tab'] / n:.3f} | "
                     f"**{c['tab'] / c['remi']:.3f}x** | {c['loud'] / c['remi']:.3f}x | "
                     f"{c['same'] / n:.2%} ({n - c['same']:,} notes differ, {c['dropped']} merged by quantisation) | "
                     f"{c['odd']} | {c['same_rest'] / (n - c['odd']):.3%} | {c['lowest'] / n:.1%} |")
    total = Counter()
    for _, c, _, _ in rows:
        total.update(c)
    if total["notes"]:
        lines.append(f"| all | {total['parts']} | {total['notes']:,} | | {total['remi'] / total['notes']:.3f} | "
                     f"{total['tab'] / total['notes']:.3f} | **{total['tab'] / total['remi']:.3f}x** | "
                     f"{total['loud'] / total['remi']:.3f}x | **{total['same'] / total['notes']:.3%}** | "
                     f"{total['odd']} | **{total['same_rest'] / (total['notes'] - total['odd']):.3%}** | "
                     f"{total['lowest'] / total['notes']:.1%} |")
    if failures:
        lines += ["", "Files the readers failed on (not counted): " + ", ".join(f"{k} {v}" for k, v in failures.items())]
    tech_lines = ["| technique | per 100 notes |", "|---|---:|"]
    for name, k in techs.most_common():
        tech_lines.append(f"| {name} | {100 * k / max(notes_all, 1):.2f} |")
    return "\n".join(lines), "\n".join(tech_lines)


def bench_corpus(remi_dir: Path, tab_dir: Path) -> str:
    lines = ["| dataset | tokenizer | files | tokens | notes | tokens/note |", "|---|---|---:|---:|---:|---:|"]
    per_note, lowest = [], ""
    for d in (remi_dir, tab_dir):
        meta = json.loads((d / "meta.json").read_text())
        tok = load_tokenizer(d / "tokenizer.json")
        pitch = sorted(i for t, i in tok.vocab.items() if t.startswith("Pitch_"))
        tokens = notes = 0
        for split in ("train", "val", "test"):
            if meta["tokens"].get(split):
                arr = np.memmap(d / f"{split}.bin", dtype=np.dtype(meta["dtype"]), mode="r")
                tokens += int(arr.shape[0])
                notes += int(np.isin(np.asarray(arr), pitch).sum())
        per_note.append(tokens / notes)
        if d == tab_dir:
            lowest = _lowest_share(d, tok, meta)
        lines.append(f"| {d.name} | {type(tok).__name__} | {meta.get('status', {}).get('ok', '')} | "
                     f"{tokens:,} | {notes:,} | {tokens / notes:.3f} |")
    lines.append(f"| | TabREMI / REMI | | | | **{per_note[1] / per_note[0]:.3f}x** |")
    return "\n".join(lines) + f"\n\nNotes on their lowest-fret string in {tab_dir.name} (standard tuning): {lowest}"


def _lowest_share(d: Path, tok, meta: dict) -> str:
    """The share of a tab dataset's notes (Pitch .. String) on the string that plays them at the lowest fret."""
    pitch = {i: int(t.split("_")[1]) for t, i in tok.vocab.items() if t.startswith("Pitch_")}
    string = {i: int(t.split("_")[1]) for t, i in tok.vocab.items() if t.startswith("String_")}
    low = total = 0
    for split in ("train", "val", "test"):
        if meta["tokens"].get(split):
            last = None
            for i in np.memmap(d / f"{split}.bin", dtype=np.dtype(meta["dtype"]), mode="r").tolist():
                if i in pitch:
                    last = pitch[i]
                elif i in string and last is not None:
                    total += 1
                    low += string[i] == lowest_fret_string(STANDARD_TUNING, 0, last)
                    last = None
    return f"{low / max(total, 1):.1%} of {total:,}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=400, help="files per source kind (GP, ASCII tab, MIDI)")
    ap.add_argument("--corpus", type=Path, nargs=2, metavar=("REMI_DATASET", "TAB_DATASET"))
    ap.add_argument("--doc", type=Path, help="write the tables into this markdown file's marked sections")
    args = ap.parse_args()
    cmd = "python scripts/bench_tab_tokens.py " + " ".join(sys.argv[1:])
    stamp = f"`{cmd}` ({time.strftime('%Y-%m-%d')}, 2-core CPU shared with other jobs)"
    if args.corpus:
        text = f"{stamp}\n\n{bench_corpus(*args.corpus)}"
        print(text)
        if args.doc:
            write_section(args.doc, "tab-corpus", text)
        return
    table, techs = bench_sources(args.data, args.limit)
    text = f"{stamp}: up to {args.limit} files per kind from `../shared/data/guitar`, every part with at least 2 " \
           f"notes; tokens counted without BOS/EOS.\n\n{table}"
    print(text + "\n\n" + techs)
    if args.doc:
        write_section(args.doc, "tab-sources", text)
        write_section(args.doc, "tab-techniques", f"{stamp}, per 100 notes:\n\n{techs}")


if __name__ == "__main__":
    main()
