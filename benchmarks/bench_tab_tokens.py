"""Cost of carrying the guitar in the tokens: tokens per note of TabREMI against pitch-only REMI on the same parts,
the round trip of every note through `tok.encode` / `tok.decode`, and how often each technique occurs.

    python benchmarks/bench_tab_tokens.py --limit 80                      # ../shared/data/guitar, per source kind
    python benchmarks/bench_tab_tokens.py --limit 80 --doc docs/results/TAB_TOKENS.md   # also writes the tables there
    python benchmarks/bench_tab_tokens.py --corpus REMI_DATASET TAB_DATASET --doc docs/results/TAB_TOKENS.md

Parts without a human fingering (MIDI) get `fret()`'s, as `prepare` gives them. The tab layouts counted: layout 3,
the default (a String only where a note leaves its lowest-fret string; Velocity only with dynamics: these sources
are counted without, as a dataset with one velocity is), layout 2 beside it (a String on every note), and each with
a Velocity on every note (a dataset with dynamics; layout 2 with Velocity is also the first layout's count). A note
round-trips when it comes back from layout 3's tokens (decoded in the part's tuning and capo, which give the strings
the tokens leave out) with its pitch, onset, duration (both as the tokenizer quantises the note), string, fret and
techniques (as tokens hold them: a bend's peak and release).
`--corpus` compares two prepared datasets of the same files (train+val+test tokens, notes = Pitch tokens), the tab
one of either layout, with the other layout's count beside it from its notes' strings.
"Notes on their lowest-fret string": notes on the string that plays their pitch at the lowest fret in the part's
tuning and capo (`lowest_fret_string`, the string a bare Score's notes get): the notes layout 3 writes no String for.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))  # harness

from guitarformer.config import DataConfig  # noqa: E402
from guitarformer.vocab.controls import PREFIX as CTRL_PREFIX, control_type  # noqa: E402
from guitarformer.vocab.tab_tokens import (  # noqa: E402
    LAYOUT_PARAM,
    canonical,
    lowest_fret_string,
    note_offset,
    resolve_strings,
    technique_tokens,
)
from guitarformer.vocab.tokenization import build_tokenizer, encode, load_tokenizer  # noqa: E402
from guitarformer.errors import SkipFile  # noqa: E402
from guitarformer.fingering import fret  # noqa: E402
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS, fret_of  # noqa: E402
from guitarformer.music.score import PLAIN, GuitarScore  # noqa: E402
from guitarformer.readers import detect_format, read_guitar  # noqa: E402
from harness import write_section  # noqa: E402

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
    tab = build_tokenizer(DataConfig(tokenizer="TabREMI"))  # layout 3, the default
    loud = build_tokenizer(DataConfig(tokenizer="TabREMI"), dynamics=True)
    tab2 = build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=2))
    loud2 = build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=2), dynamics=True)  # the first layout's count
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
                c["tab2"] += len(tab2.encode(gs)[0].ids)
                c["loud2"] += len(loud2.encode(gs)[0].ids)
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
             "layout 2 tokens/note | layout 2 / REMI | with Velocity (dynamics) / REMI | layout 2 with Velocity "
             "(the first layout) / REMI | round trip | notes the source leaves unplayable or frets off their pitch | "
             "round trip of the rest | notes on their lowest-fret string |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind, c, nv, _ in rows:
        n = c["notes"]
        lines.append(f"| {kind} | {c['parts']} | {n:,} | {nv} | {c['remi'] / n:.3f} | {c['tab'] / n:.3f} | "
                     f"**{c['tab'] / c['remi']:.3f}x** | {c['tab2'] / n:.3f} | {c['tab2'] / c['remi']:.3f}x | "
                     f"{c['loud'] / c['remi']:.3f}x | {c['loud2'] / c['remi']:.3f}x | "
                     f"{c['same'] / n:.2%} ({n - c['same']:,} notes differ, {c['dropped']} merged by quantisation) | "
                     f"{c['odd']} | {c['same_rest'] / (n - c['odd']):.3%} | {c['lowest'] / n:.1%} |")
    total = Counter()
    for _, c, _, _ in rows:
        total.update(c)
    if total["notes"]:
        n = total["notes"]
        lines.append(f"| all | {total['parts']} | {n:,} | | {total['remi'] / n:.3f} | "
                     f"{total['tab'] / n:.3f} | **{total['tab'] / total['remi']:.3f}x** | "
                     f"{total['tab2'] / n:.3f} | {total['tab2'] / total['remi']:.3f}x | "
                     f"{total['loud'] / total['remi']:.3f}x | {total['loud2'] / total['remi']:.3f}x | "
                     f"**{total['same'] / n:.3%}** | {total['odd']} | "
                     f"**{total['same_rest'] / (n - total['odd']):.3%}** | {total['lowest'] / n:.1%} |")
    if failures:
        lines += ["", "Files the readers failed on (not counted): " + ", ".join(f"{k} {v}" for k, v in failures.items())]
    tech_lines = ["| technique | per 100 notes |", "|---|---:|"]
    for name, k in techs.most_common():
        tech_lines.append(f"| {name} | {100 * k / max(notes_all, 1):.2f} |")
    return "\n".join(lines), "\n".join(tech_lines)


def bench_corpus(remi_dir: Path, tab_dir: Path) -> str:
    """Tokens per note (control tokens not counted) of a REMI and a TabREMI dataset of the same files, the tab
    dataset's in both layouts: its
    own, measured, and the other one from its notes' strings (`_strings`): layout 2 writes a String for every note
    layout 3 leaves without one; layout 3 drops the String of every note on its lowest-fret string."""
    lines = ["| dataset | tokenizer | files | tokens | notes | tokens/note | layout 3 tokens/note | "
             "layout 2 tokens/note |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    per_note, lowest = {}, ""
    for d in (remi_dir, tab_dir):
        meta = json.loads((d / "meta.json").read_text())
        tok = load_tokenizer(d / "tokenizer.json")
        pitch = sorted(i for t, i in tok.vocab.items() if t.startswith("Pitch_"))
        # Control tokens describe the piece, not its notes, and a REMI dataset has none: not counted.
        ctrl = sorted(i for t, i in tok.vocab.items() if t.startswith(CTRL_PREFIX))
        tokens = notes = 0
        for split in _splits(meta):
            arr = np.asarray(np.memmap(d / f"{split}.bin", dtype=np.dtype(meta["dtype"]), mode="r"))
            tokens += int(arr.shape[0]) - int(np.isin(arr, ctrl).sum())
            notes += int(np.isin(arr, pitch).sum())
        name = type(tok).__name__
        if d == remi_dir:
            per_note["remi"] = tokens / notes
            lines.append(f"| {d.name} | {name} | {_files(meta)} | {tokens:,} | {notes:,} | {tokens / notes:.3f} | | |")
            continue
        layout = int((tok.config.additional_params or {}).get(LAYOUT_PARAM, 3))
        written, low, whole = _strings(d, tok, meta)
        # Layout 3 from layout 2: every note on its lowest-fret string loses its String; layout 2 from layout 3:
        # every note without one gets one.
        other = tokens - low if layout == 2 else tokens + (whole - written)
        per_note[layout], per_note[5 - layout] = tokens / notes, other / notes
        lines.append(f"| {d.name} | {name} (layout {layout}) | {_files(meta)} | {tokens:,} | {notes:,} | "
                     f"{tokens / notes:.3f} | {per_note[3]:.3f} | {per_note[2]:.3f} |")
        lowest = (f"Notes on their lowest-fret string in {d.name} (in each piece's tuning and capo as its controls "
                  f"name them; standard tuning without capo where they do not): {low / max(whole, 1):.1%} of {whole:,}")
        if layout == 2:
            lowest += "; its layout-3 count leaves out the String of each of them"
        elif low != whole - written:  # the tokenizer wrote them in the piece's own tuning, which the data did not name
            lowest += (f" ({(whole - written) / max(whole, 1):.1%} have no String token; the notes between the two "
                       f"are in pieces whose tuning the controls call \"other\" or do not name, read here in a tuning "
                       f"they were not written in)")
    lines.append(f"| | TabREMI / REMI | | | | **{per_note[layout] / per_note['remi']:.3f}x** | "
                 f"{per_note[3] / per_note['remi']:.3f}x | {per_note[2] / per_note['remi']:.3f}x |")
    return "\n".join(lines) + f"\n\n{lowest}"


def _splits(meta: dict) -> list[str]:
    return [split for split in ("train", "val", "test") if meta["tokens"].get(split)]


def _files(meta: dict) -> str:
    return str(meta.get("status", {}).get("ok", ""))


def _strings(d: Path, tok, meta: dict) -> tuple[int, int, int]:
    """(String tokens written, notes on their lowest-fret string, notes) of a tab dataset's whole notes (Pitch
    [Velocity] Duration). Each note's string is its String token's, or for layout 3 the one that layout leaves
    implied (`resolve_strings`), in the tuning and capo of its piece's CtrlTuning and CtrlCapo (standard tuning
    without capo for a piece without them, as a dataset without controls is read)."""
    vocab_size = len(tok)
    pitch_of, string_of = np.full(vocab_size + 1, -1), np.zeros(vocab_size + 1, dtype=np.int64)
    is_duration, is_velocity = np.zeros(vocab_size + 1, dtype=bool), np.zeros(vocab_size + 1, dtype=bool)
    tuning_of, capo_of = {}, {}
    for t, i in tok.vocab.items():
        kind, _, value = t.partition("_")
        if kind == "Pitch":
            pitch_of[i] = int(value)
        elif kind == "String":
            string_of[i] = int(value)
        is_duration[i], is_velocity[i] = kind == "Duration", kind == "Velocity"
        if kind == control_type("Tuning"):
            tuning_of[i] = TUNINGS.get(value, STANDARD_TUNING)  # "other": read as standard
        elif kind == control_type("Capo"):
            capo_of[i] = int(value)
    offset = note_offset(tok)
    written = low = whole = 0
    for split in _splits(meta):
        arr = np.asarray(np.memmap(d / f"{split}.bin", dtype=np.dtype(meta["dtype"]), mode="r"), dtype=np.int64)
        offsets = np.load(d / f"{split}.idx.npy")
        padded = np.append(arr, np.full(offset + 1, vocab_size))  # vocab_size: past the end (no token)
        P = np.nonzero(pitch_of[arr] >= 0)[0]
        ok = is_duration[padded[P + offset - 1]] & (is_velocity[padded[P + 1]] if tok.config.use_velocities else True)
        P = P[ok]
        pitches, strings = pitch_of[arr[P]], string_of[padded[P + offset]]
        guitars: list[tuple[tuple[int, ...], int]] = []  # the (tuning, capo) of each piece's opening controls
        for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
            head = arr[a: min(b, a + 8)].tolist()
            guitars.append((next((tuning_of[i] for i in head if i in tuning_of), STANDARD_TUNING),
                            next((capo_of[i] for i in head if i in capo_of), 0)))
        kinds = sorted(set(guitars))
        note_guitar = np.array([kinds.index(g) for g in guitars], dtype=np.int64)[
            np.searchsorted(offsets, P, side="right") - 1]
        for k, (tuning, capo) in enumerate(kinds):
            idx = np.nonzero(note_guitar == k)[0]
            resolved = resolve_strings(tok, pitches[idx].tolist(), strings[idx].tolist(), tuning, capo)
            lowest = np.array([lowest_fret_string(tuning, capo, p) for p in range(128)])
            low += int((np.asarray(resolved, dtype=np.int64) == lowest[pitches[idx]]).sum())
        written += int((strings > 0).sum())
        whole += len(P)
    return written, low, whole


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=400, help="files per source kind (GP, ASCII tab, MIDI)")
    ap.add_argument("--corpus", type=Path, nargs=2, metavar=("REMI_DATASET", "TAB_DATASET"))
    ap.add_argument("--doc", type=Path, help="write the tables into this markdown file's marked sections")
    args = ap.parse_args()
    cmd = "python benchmarks/bench_tab_tokens.py " + " ".join(sys.argv[1:])
    stamp = f"`{cmd}` ({time.strftime('%Y-%m-%d')}, 2-core CPU shared with other jobs)"
    if args.corpus:
        text = f"{stamp}\n\n{bench_corpus(*args.corpus)}"
        print(text)
        if args.doc:
            write_section(args.doc, "tab-corpus", text, by="python benchmarks/bench_tab_tokens.py")
        return
    table, techs = bench_sources(args.data, args.limit)
    text = f"{stamp}: up to {args.limit} files per kind from `../shared/data/guitar`, every part with at least 2 " \
           f"notes; tokens counted without BOS/EOS.\n\n{table}"
    print(text + "\n\n" + techs)
    if args.doc:
        write_section(args.doc, "tab-sources", text, by="python benchmarks/bench_tab_tokens.py")
        write_section(args.doc, "tab-techniques", f"{stamp}, per 100 notes:\n\n{techs}", by="python benchmarks/bench_tab_tokens.py")


if __name__ == "__main__":
    main()
