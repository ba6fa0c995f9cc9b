"""Score tab.fret() against human fingerings (Guitar Pro files and ASCII tabs) on held-out files; write docs/results/FRETTING.md.

    python benchmarks/bench_fretting.py [--data ../shared/data/guitar] [--doc docs/results/FRETTING.md] [--every N]
    python benchmarks/bench_fretting.py --fit [--epochs 3]     # refit both passes on the fit half, print the table
    python benchmarks/bench_fretting.py --train-nn [--nn-epochs 15]  # train the learned string model, pick its weight
    python benchmarks/bench_fretting.py --fit-distorted         # refit the distorted-guitar costs (programs 29-30)
    python benchmarks/bench_fretting.py --human-agreement       # two versions of one piece: how often humans agree

Accuracy = share of notes whose (string, fret) equals the human tab's. The lowest-fret rule (each chord
gets the distinct-string assignment with the smallest sum of frets) is scored on the same notes.
Files are split in two by a hash of their name without extension (so a song's .gp3/.gp4/.gp5 copies
land in the same half): half 0 is where FretCosts' weights were fit, half 1 is held out. Parts are
de-duplicated by their note content. The GP loop here is deliberately minimal and independent of
guitarformer.readers.
"""

from __future__ import annotations

import argparse
import json
import hashlib
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from guitarformer.fingering import DEFAULT_COSTS, DISTORTED_PROGRAMS, fingering_features, fret, fret_lowest, FretCosts  # noqa: E402
from guitarformer.fingering import piece_table  # noqa: E402  (fitting needs the decoder with gold paths)
from guitarformer.fingering.costs import N_FROM_FIRST, PIECE0, N_FEATURES, WEIGHTS_FILE
from guitarformer.fingering.notes import group_onsets as _group_onsets
from guitarformer.fingering.viterbi import _decode, _piece_table

# (name, tuning lowest first, capo, notes (onset, dur, sounding pitch), human (string, fret from the capo))
Part = tuple[str, tuple[int, ...], int, list[tuple[int, int, int]], list[tuple[int, int]]]


PROGRAMS: dict[str, int] = {}  # part name -> the GP track's General MIDI program (fret() picks its costs by it)


def gp_parts(path: Path) -> list[Part]:
    """One Part per guitar track (its program recorded in PROGRAMS)."""
    import guitarpro

    song = guitarpro.parse(str(path))
    parts = []
    for ti, track in enumerate(song.tracks):
        if track.isPercussionTrack or len(track.strings) not in (6, 7):
            continue
        tuning = tuple(s.value for s in sorted(track.strings, key=lambda s: -s.number))
        if max(tuning) < 55:  # bass-register instrument with 6 strings
            continue
        notes, frets = [], []
        for measure in track.measures:
            for voice in measure.voices:
                for beat in voice.beats:
                    for note in beat.notes:
                        if note.type != guitarpro.NoteType.normal:  # ties continue a note; dead notes have no pitch
                            continue
                        if note.effect.isHarmonic:  # string/fret name a node to touch, not a fretted pitch
                            continue
                        if not 1 <= note.string <= len(tuning):
                            continue
                        pitch = tuning[len(tuning) - note.string] + track.offset + note.value
                        notes.append((beat.start, beat.duration.time, pitch))
                        frets.append((note.string, note.value))
        if notes:
            parts.append((f"{path.name}#{ti}", tuning, track.offset, notes, frets))
            PROGRAMS[parts[-1][0]] = track.channel.instrument
    return parts


def ascii_parts(path: Path) -> list[Part]:
    from guitarformer.readers.ascii_tab import read_ascii_tab

    parts = []
    for gs in read_ascii_tab(path):
        notes = [(n.time, n.duration, n.pitch) for n in gs.track.notes]  # sounding pitches: capo included
        # as in the GP loop: a harmonic's string/fret is a node to touch, a dead note's no fretted pitch
        harmonics = {i for i, t in enumerate(gs.techniques or ()) if t.harmonic or t.dead}
        ok = [i for i, f in enumerate(gs.frets) if f[1] >= 0 and i not in harmonics]
        parts.append((path.name, gs.tuning, gs.capo, [notes[i] for i in ok], [gs.frets[i] for i in ok]))
    return parts


def collect(files, reader) -> tuple[list[Part], int]:
    parts, seen, bad = [], set(), 0
    for f in files:
        try:
            got = reader(f)
        except Exception:  # broken/unsupported files are part of the data set; count and go on
            bad += 1
            continue
        for p in got:
            key = hashlib.sha1(repr((p[1], p[3], p[4])).encode()).hexdigest()
            if key not in seen and len(p[3]) >= 8:
                seen.add(key)
                parts.append(p)
    return parts, bad


def half(part: Part) -> int:
    """0 = fit half, 1 = held out; by file name without extension, so format copies of a song stay together."""
    stem = part[0].split("#")[0].rsplit(".", 1)[0].lower()
    return hashlib.sha256(stem.encode()).digest()[0] % 2


def score(parts: list[Part], fn, **kw) -> tuple[int, int, float]:
    """(notes right, notes, seconds)."""
    hit = total = 0
    t0 = time.perf_counter()
    for name, tuning, capo, notes, human in parts:
        extra = {"program": PROGRAMS.get(name)} if fn is fret and "costs" not in kw else {}
        pred = fn(notes, tuning=tuning, capo=capo, **kw, **extra)
        hit += sum(a == b for a, b in zip(pred, human))
        total += len(human)
    return hit, total, time.perf_counter() - t0


def chunks(parts: list[Part], tables=None, size: int = 32) -> list[tuple]:
    """Parts cut into pieces of `size` onsets: the perceptron updates once per piece, not once per song.
    `tables`: each part's piece_table (computed on the whole part), sliced along; None without."""
    out = []
    for k_part, (name, tuning, capo, notes, human) in enumerate(parts):
        groups = _group_onsets(notes)
        for k in range(0, len(groups), size):
            idx = sorted(i for g in groups[k : k + size] for i in g)
            tab = None if tables is None else tables[k_part][idx]
            out.append((name, tuning, capo, [notes[i] for i in idx], [human[i] for i in idx], tab))
    return out


def fit(parts: list[Part], epochs: int = 3, lr: float = 0.05, seed: int = 0, first: FretCosts | None = None,
        w0: np.ndarray | None = None, size: int = 32) -> FretCosts:
    """Averaged structured perceptron: decode each piece (human fingering among the candidates); where the
    decoder's fingering differs, move the weights by lr * (features(decoded) - features(human)).

    first=None fits the first pass (no piece terms). Given `first` (first-pass costs), fits the second pass:
    each part's piece features come from `first`'s own decoding of the whole part (never from the human tab),
    and the weights start from `first`'s with zero piece weights. The learned string model stays out of the fit
    (nn_weight 0 while fitting; the returned costs have it at 0 too)."""
    import dataclasses

    rng = random.Random(seed)
    t0 = time.perf_counter()
    if first is None:  # only the pitch-only piece features
        tables = [_piece_table(notes, tuning, capo, 24, None) for _, tuning, capo, notes, _ in parts]
    else:
        first = dataclasses.replace(first, nn_weight=0.0)
        tables = [piece_table(notes, tuning, capo, 24, first) for _, tuning, capo, notes, _ in parts]
    print(f"piece tables for {len(parts)} parts ({time.perf_counter() - t0:.0f}s)", flush=True)
    from_first = slice(PIECE0, PIECE0 + N_FROM_FIRST)
    pieces = chunks(parts, tables, size)
    w = np.zeros(N_FEATURES)
    if w0 is not None:
        w[:] = w0
    else:
        w[:] = (DEFAULT_COSTS.first() if first is None else first).vector()
    if first is None:
        w[from_first] = 0.0
    w_sum, n_sum = np.zeros_like(w), 0
    fixed = {"first_pass": None if first is None else tuple(first.vector()), "nn_weight": 0.0}
    for epoch in range(epochs):
        rng.shuffle(pieces)
        wrong, t0 = 0, time.perf_counter()
        for _, tuning, capo, notes, human, tab in pieces:
            n = len(tuning)
            groups, chosen = _decode(notes, tuning, capo, 24, FretCosts.from_vector(w, **fixed),
                                     gold=[(n - s, f) for s, f in human], piece=tab)
            pred: list = [None] * len(notes)
            for g, cand in zip(groups, chosen):
                for k, i in enumerate(g):
                    s, f = cand.assign[k]
                    pred[i] = (n - s, f) if s >= 0 else (-1, -1)
            if pred != list(human):
                wrong += 1
                w = w + lr * (fingering_features(notes, pred, tuning, tab) - fingering_features(notes, human, tuning, tab))
                if first is None:
                    w[from_first] = 0.0
            w_sum += w
            n_sum += 1
        print(f"fit epoch {epoch}: {wrong}/{len(pieces)} pieces differ ({time.perf_counter() - t0:.0f}s)", flush=True)
    return FretCosts.from_vector(w_sum / n_sum, **fixed)


def nn_split(part: Part) -> bool:
    """Within the fit half: True for the 1/8 of files kept out of the string model's training (its early stopping
    and the choice of FretCosts.nn_weight are made there, not on the model's own training notes)."""
    stem = part[0].split("#")[0].rsplit(".", 1)[0].lower()
    return hashlib.sha256(stem.encode()).digest()[1] % 8 == 0


def save_weights(key_first: str, first: FretCosts, key_second: str, second: FretCosts) -> None:
    """Write a refit into guitarformer/fingering/weights.json (the weights fret() loads), keeping the other entries."""
    data = json.loads(WEIGHTS_FILE.read_text())
    data[key_first], data[key_second] = first.vector().tolist(), second.vector().tolist()
    WEIGHTS_FILE.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {key_first} and {key_second} to {WEIGHTS_FILE}", flush=True)


def train_nn(parts: list[Part], epochs: int, out: Path, weights=(0.0, 0.5, 1.0, 1.5, 2.0, 3.0)) -> float:
    """Train guitarformer/fingering/string_model.py's string model on the fit half (less its validation eighth), save it to
    `out`, and return the nn_weight that scores best on that validation eighth."""
    import dataclasses

    import torch

    from guitarformer.fingering import string_model

    torch.set_num_threads(1)
    fit_parts = [p for p in parts if half(p) == 0]
    tr = [p for p in fit_parts if not nn_split(p)]
    va = [p for p in fit_parts if nn_split(p)]
    string_model.fit(tr, va, string_model.FitSchedule(epochs=epochs), out=out)
    string_model.WEIGHTS = out
    string_model.load.cache_clear()
    best = (-1.0, 0.0)
    for w in weights:
        hit, n, _ = score(va, fret, costs=dataclasses.replace(DEFAULT_COSTS, nn_weight=w))
        print(f"nn_weight {w}: {hit / max(n, 1):.2%} on the validation eighth of the fit half ({n} notes)", flush=True)
        best = max(best, (hit / max(n, 1), w))
    print(f"best nn_weight: {best[1]} (set FretCosts.nn_weight in guitarformer/fingering/costs.py)")
    return best[1]


def human_agreement(tab_files, min_run: int = 12) -> tuple[int, int, float, float]:
    """How often two people finger the same notes alike: for every two versions of a piece in one classtab text
    (same tuning and capo), align their notes (onset order, highest first) by runs of at least `min_run` equal
    pitches, and count the aligned notes given the same (string, fret). Pairs agreeing on 99% or more are left out
    as copies. Returns (pairs, aligned notes, human-human agreement, fret()'s mean agreement with the two on
    those notes)."""
    import difflib

    from guitarformer.readers.ascii_tab import read_ascii_tab

    pairs = total = same = ours = 0
    for f in tab_files:
        try:
            versions = [g for g in read_ascii_tab(f) if "version" in g.extra and g.extra.get("parts", 1) == 1]
        except Exception:  # unreadable tabs are counted by the main benchmark
            continue
        seqs = []
        for g in versions:
            notes = [(n.time, n.duration, n.pitch) for n in g.track.notes]
            harmonics = {i for i, t in enumerate(g.techniques or ()) if t.harmonic or t.dead}
            order = sorted((i for i in range(len(notes)) if i not in harmonics), key=lambda i: (notes[i][0], -notes[i][2]))
            seqs.append((g, order, [notes[i][2] for i in order], fret(notes, g.tuning, g.capo)))
        for a in range(len(seqs)):
            for b in range(a + 1, len(seqs)):
                (ga, oa, pa, fa), (gb, ob, pb, fb) = seqs[a], seqs[b]
                if (ga.tuning, ga.capo) != (gb.tuning, gb.capo):
                    continue
                t = agree = mine = 0
                for blk in difflib.SequenceMatcher(None, pa, pb, autojunk=False).get_matching_blocks():
                    if blk.size >= min_run:
                        for k in range(blk.size):
                            i, j = oa[blk.a + k], ob[blk.b + k]
                            t += 1
                            agree += ga.frets[i] == gb.frets[j]
                            mine += (fa[i] == ga.frets[i]) + (fb[j] == gb.frets[j])
                if t >= 100 and agree < 0.99 * t:
                    pairs, total, same, ours = pairs + 1, total + t, same + agree, ours + mine
    return pairs, total, same / max(total, 1), ours / max(2 * total, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "results" / "FRETTING.md")
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--every", type=int, default=1, help="score every Nth part only (quick iterations; no doc)")
    ap.add_argument("--fit", action="store_true", help="refit the weights on half 0 and print them (no doc)")
    ap.add_argument("--fit-distorted", action="store_true",
                    help="refit the distorted-guitar costs (from the default ones, on half 0's GP tracks with programs "
                         "29-30) and print them (no doc)")
    ap.add_argument("--human-agreement", action="store_true",
                    help="measure how often two versions of one piece (classtab) agree, and fret() with them (no doc)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-nn", action="store_true",
                    help="train the learned string model on half 0, save it (--nn-out), pick its weight (no doc)")
    ap.add_argument("--nn-epochs", type=int, default=15)
    ap.add_argument("--nn-out", type=Path, default=ROOT / "guitarformer" / "fretting" / "string_model.pt")
    args = ap.parse_args()

    if args.human_agreement:
        pairs, n, hh, ours = human_agreement(sorted((args.data / "classtab" / "app" / "tabs").glob("*.txt")))
        print(f"{pairs} pairs of versions, {n} aligned notes: human-human agreement {hh:.1%}, fret() with them {ours:.1%}")
        return
    gp_files = sorted(p for ext in ("gp3", "gp4", "gp5") for p in args.data.rglob(f"*.{ext}"))
    gp, gp_bad = collect(gp_files, gp_parts)
    tab_files = sorted((args.data / "classtab" / "app" / "tabs").glob("*.txt"))
    tabs, tab_bad = collect(tab_files, ascii_parts)

    costs = None  # fret()'s own choice: the default costs, or the distorted-guitar ones by the track's program
    if args.train_nn:
        import dataclasses

        costs = dataclasses.replace(DEFAULT_COSTS, nn_weight=train_nn(gp + tabs, args.nn_epochs, args.nn_out))
    if args.fit_distorted:
        fit_parts = [p for p in gp if half(p) == 0 and PROGRAMS.get(p[0]) in DISTORTED_PROGRAMS]
        first = fit(fit_parts, 6, w0=DEFAULT_COSTS.first().vector())
        first = FretCosts.from_vector(np.round(first.vector(), 3), first_pass=None)
        second = fit(fit_parts, 6, first=first, w0=DEFAULT_COSTS.vector())
        second = FretCosts.from_vector(np.round(second.vector(), 3), first_pass=tuple(first.vector()))
        save_weights("distorted_first", first, "distorted_second", second)
        return
    if args.fit:
        fit_parts = [p for p in gp + tabs if half(p) == 0]
        first = fit(fit_parts, args.epochs)  # first pass: no piece terms
        first = FretCosts.from_vector(np.round(first.vector(), 3), first_pass=None)
        costs = fit(fit_parts, args.epochs, first=first)  # second pass, piece features from `first`
        costs = FretCosts.from_vector(np.round(costs.vector(), 3), first_pass=tuple(first.vector()))
        save_weights("first", first, "second", costs)

    rows = []
    for name, parts in (("Guitar Pro (gp3/4/5)", gp), ("classtab ASCII tabs", tabs)):
        for h, label in ((1, "held out"), (0, "fit half (in-sample)")):
            sel = [p for p in parts if half(p) == h][:: args.every]
            hit, n, dt = score(sel, fret, **({} if costs is None else {"costs": costs}))
            hb, _, _ = score(sel, fret_lowest)
            rows.append((name, label, len(sel), n, hit / max(n, 1), hb / max(n, 1), n / max(dt, 1e-9)))
            print(f"{name}, {label}: {len(sel)} parts, {n} notes: fret() {hit / max(n, 1):.1%}  "
                  f"lowest-fret {hb / max(n, 1):.1%}  ({n / max(dt, 1e-9):,.0f} notes/s)", flush=True)
    held = [r for r in rows if r[1] == "held out"]
    n_held = max(sum(r[3] for r in held), 1)
    print(f"held out, pooled: fret() {sum(r[4] * r[3] for r in held) / n_held:.1%}  "
          f"lowest-fret {sum(r[5] * r[3] for r in held) / n_held:.1%}")
    # Distorted-guitar GP tracks (programs 29-30): fret() uses DISTORTED_COSTS for them; the default costs beside.
    dist = []
    for h in ((1, 0) if costs is None else ()):  # refit/retrained costs are passed explicitly: no program choice
        sel = [p for p in gp if half(p) == h and PROGRAMS.get(p[0]) in DISTORTED_PROGRAMS][:: args.every]
        hit, n, _ = score(sel, fret, **({} if costs is None else {"costs": costs}))
        hd, _, _ = score(sel, fret, costs=DEFAULT_COSTS)
        dist.append((len(sel), n, hit / max(n, 1), hd / max(n, 1)))
        print(f"GP tracks with a distorted-guitar program, {('fit half', 'held out')[h]}: {len(sel)} parts, {n} notes: "
              f"fret() {hit / max(n, 1):.1%}  (default costs {hd / max(n, 1):.1%})", flush=True)
    print(f"unreadable: {gp_bad} GP files, {tab_bad} ASCII tabs (skipped)")
    if not (args.no_doc or args.fit or args.train_nn or args.every > 1):
        write_doc(args.doc, rows, dist, len(gp_files), gp_bad, len(tab_files), tab_bad)


def write_doc(path: Path, rows, dist, n_gp, gp_bad, n_tab, tab_bad) -> None:
    table = "\n".join(
        f"| {name} | {label} | {parts} | {notes} | **{acc:.1%}** | {base:.1%} | {speed:,.0f} |"
        for name, label, parts, notes, acc, base, speed in rows
    )
    held = [r for r in rows if r[1] == "held out"]
    acc = {r[0]: r[4] for r in held}
    pooled = sum(r[4] * r[3] for r in held) / max(sum(r[3] for r in held), 1)
    pooled_base = sum(r[5] * r[3] for r in held) / max(sum(r[3] for r in held), 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""# Fretting: how well `tab.fret()` matches human tabs

Command (from the repository root, with the shared data checked out beside it):

    python benchmarks/bench_fretting.py               # scores, writes this file
    python benchmarks/bench_fretting.py --fit         # refits both passes on the fit half into fingering/weights.json, prints the table
    python benchmarks/bench_fretting.py --train-nn    # trains the learned string model (guitarformer/fingering/string_model.pt)
    python benchmarks/bench_fretting.py --fit-distorted    # refits the distorted-guitar costs (programs 29-30)
    python benchmarks/bench_fretting.py --human-agreement  # how often two versions of one piece agree

Accuracy is the share of notes whose (string, fret) equals the one in the human tab. The lowest-fret
rule (each chord gets the distinct-string assignment with the smallest sum of frets) is computed by the
same script on the same notes. Parts are de-duplicated by note content; ties, dead notes and natural harmonics
(GP harmonic effects, "<12>" in ASCII tab: their string/fret names a node to touch, not a fretted pitch) are left out.
Files read: {n_gp} GP files ({gp_bad} unreadable), {n_tab} ASCII tabs ({tab_bad} skipped/unreadable).

Files are split in two halves by a hash of the file name without its extension (the GP test suites
hold one song as .gp3/.gp4/.gp5; those copies stay in one half). The weights in `guitarformer/fingering/weights.json` and the learned
string model (`string_model.pt`) were fit on half 0 only; **half 1 is held out** and is the number to quote. Half-0 rows are in-sample.
Held out, pooled over both sources: fret() **{pooled:.1%}**, lowest-fret {pooled_base:.1%}.

| data | half | parts | notes | fret() | lowest-fret | fret() notes/s |
|---|---|---|---|---|---|---|
{table}

(notes/s: one process on a shared 2-core machine, wall clock; noisy. The first row also pays for importing torch
and loading the learned string model on fret()'s first call, about 0.7 s.)

Guitar Pro tracks whose program is a distorted guitar (29-30) are fingered with their own costs (below);
those tracks alone, held out: {dist[0][2]:.1%} ({dist[0][3]:.1%} with the default costs), fit half {dist[1][2]:.1%} ({dist[1][3]:.1%}).

Published anchors (DadaGP, a different and much larger corpus, so not directly comparable): a
Transformer fretting model 81.6%, the lowest-fret rule 79.2%, Guitar Pro 8's own 76.6%.

## The model

`fret()` decodes twice, each time with a Viterbi pass over onsets. Each onset's chord has candidate fingerings
(assignments of its notes to distinct strings; the 16 cheapest by chord cost kept: the human fingering is
among them for 100.0% of classtab onsets and 99.8% of GP onsets, so widening the beam cannot help). A
fingering's cost is `FretCosts.vector() @ fingering_features(...)` plus two fixed terms (1000 per note left
without a string, 50 for a chord spanning more than 5 frets). The features (`guitarformer/fingering/costs.py` names them) are counts:

- per note: fret (0..24, one-hot), tab string (1..8), string x fret region (open, 1-4, 5-8, 9-12, 13+),
  string x fret (one-hot);
- per chord: span of its fretted notes (0..5, 6+), unused strings inside its string range;
- per onset pair: hand shift (the lowest fretted fret, carried across open strings) in bins
  0, 1, .., 6, 7-8, 9-12, 13+; frets shifted after a rest; shift of the mean string; for one note to
  one note, the string moving against the pitch, staying on a string, and frets slid along it; strings
  re-used while still sounding; open strings played while the hand sits at fret 5+ and 9+;
  the move of a lazy hand window (index finger at h covers frets h..h+3 and moves only as far as the
  next fretted notes need) in bins 0..5, 6-8, 9+;
- per note, from the pitches alone: fret region x the highest pitch within 6 onsets (a climbing passage
  is played higher up);
- second pass only, per note, from the FIRST pass's fingering of the same part (never from the human
  tab, at fit and at test time; each note's own first-pass choice left out): the share of the part's
  other notes of this pitch that pass 1 put on the candidate's string, the same for notes of this pitch
  with the same previous pitch and with the same previous and next pitch (repeated phrases), whether
  pass 1 put the previous / next note of this pitch on that string, and the share of the part's notes
  and of the notes within 8 onsets that pass 1 played in the candidate's fret region.

Learned string model (`guitarformer/fingering/string_model.py`, weights `guitarformer/fingering/string_model.pt`, 136,775 parameters):
a 2-layer bidirectional GRU (64 units per direction) over the part's notes in onset order (highest first within
a chord). Inputs per note, all relative to the tuning and capo so any tuning of up to 7 strings works: which tab
strings can play it and at which fret, its pitch, the number of playable strings, onset gaps to the previous and
next onset and its duration (in units of the part's median onset gap: tick resolutions differ between sources),
chord size and index within the chord, pitch steps to the previous and next onset's top note. Output: a softmax
over the strings that can play the note, the logit of each string = a linear read-out of the GRU state plus a dot
product with an embedding of (string, fret). `fret()` adds `FretCosts.nn_weight` (0.5) x -log p(string) per note
to the chord costs of both passes (the model runs once per call; the perceptron weights are unchanged). Trained
(`--train-nn`: AdamW, one-cycle lr 3e-3, 15 epochs, 256-note windows, one CPU thread, seed 0, about 4 minutes)
on 7/8 of the half-0 files; the other 1/8 (a second file-name hash) picks the epoch and the weight (pooled there:
0 83.83%, 0.5 84.14%, 1.0 84.13%, 1.5 83.92%, 2.0 83.81%). Without the weights file (or torch) `fret()` uses the hand-made costs alone.
The shipped weights were trained on an earlier reading of the data (duets as one part, harmonics kept);
`--train-nn` now trains on the current reading and gives a different model (validation eighth 84.19% at weight 1.0,
the shipped one 84.36% at 0.5 on the same notes), so it was not replaced.

`fret(..., position=N)` (`guitarformer tab --position N`, `sample --position N`) is not scored here: it adds a fixed
cost of 3 per fret outside the window N..N+3 (an open string counts 1 above position 4) for a guitarist who wants
the tab in a given position, and leaves the fitted costs to choose within it.

Weights are fit by an averaged structured perceptron (`--fit`: 3 epochs over 32-onset pieces of the half-0
parts; the human fingering is added to the candidates; where the decoded fingering differs, weights move
by 0.05 x (features(decoded) - features(human))), first for pass 1 (`_FIRST`), then, with pass-1 piece
features computed by that pass-1 model on each whole part, for pass 2 (`_FITTED`). They ship as data,
`guitarformer/fingering/weights.json`, which `--fit` / `--fit-distorted` rewrite. Tests check that each pass's Viterbi returns the brute-force minimum of
its cost on short lines (with the hand window switched off: it is path-dependent state that the Viterbi
carries along the best path, so the DP is exact only without it; a second test checks the decoded cost
with it is no worse than pass 1's or lowest-fret's and near the brute-force minimum). Two passes cost
about 2.2x the time of one (the notes/s column).

Distorted guitar: `fret(..., program=P)` (and `guitarformer tab`, `sample`, `eval`, which pass each track's program)
uses `DISTORTED_COSTS` for General MIDI programs 29-30 (overdriven, distortion guitar): the same features, both
passes fine-tuned from the default weights for 6 epochs on the fit half's 11 GP tracks with those programs
(`--fit-distorted` reproduces `_DISTORTED_FIRST` / `_DISTORTED` exactly). Every other program, and no program, gets
the default costs (`costs_for_program`). `guitarformer tab FILE --program 30` re-fingers any file that way.

## What was tried (held-out half, classtab / GP; each row adds to the one above unless marked dropped)

| change | classtab | GP | pooled |
|---|---|---|---|
| starting point (one pass, 99 weights) | 82.36% | 44.03% | 81.57% |
| two-pass piece consistency (7 features from pass 1) | 83.25% (+0.89) | 45.74% (+1.71) | 82.47% |
| lazy hand-window move features, both passes (pass 1 alone: 82.36 -> 82.89) | 83.52% (+0.27) | 45.85% | 82.73% |
| reader fix: "A A D G B E" labels read as low A1, not two A2 strings (2 Dyens tabs, 3,610 notes: 1,752 -> 3,071 right) | +0.38 | - | |
| string x fret one-hot (200 features) | +0.09 | -0.2 | |
| (the two rows above together, measured) | 83.99% | 45.62% | 83.19% |
| fret region x highest nearby pitch, in pass 2 | 84.10% (+0.11) | 46.01% (+0.4) | 83.30% |
| reader fix: "op. 34 no. 2 in G" no longer read as "string 2 tuned to G" (7 tabs changed, all false hits) | 84.16% (+0.06) | 46.01% | 83.37% |
| the same pitch-only features in pass 1 too (pass 1: 83.49 -> 83.59) | 84.17% (+0.01) | 47.02% (+1.0) | 83.40% |
| dropped: loss-augmented perceptron (margin 0.5 per note off the human string) | +0.04 | -0.05 | |
| dropped: a third pass (re-decode from pass 2's output with pass-2 weights), on 1/3 of held-out classtab | -0.37 | | |
| dropped: share of the same pitch within 16 onsets (local pitch consistency) | +0.01 | -0.05 | |
| dropped: perceptron on 16-onset pieces, 4 epochs | +0.03 | -0.4 | |
| not done: widening the 16-candidate beam (the human fingering is already among them, above) | | | |
| learned string model (BiGRU, 137k parameters), nn_weight 0.5 in both passes (the weight chosen on the validation eighth) | 84.51% (+0.34) | 45.78% (-1.24) | 83.71% (+0.31) |
| (same, nn_weight 1.0) | 84.58% | 45.54% | 83.76% |
| dropped: the model applied in pass 1 only / pass 2 only / 0.5 + 1 / 1 + 0.5 (validation eighth, classtab: 84.78 / 84.67 / 84.75 / 84.82 vs 84.78 both at 1) | noise | | |
| dropped: the model reading the hand-made fret()'s fingering as input, decoded again with its term (a "corrector"; validation eighth: classtab 84.37% vs 84.78% for the plain model at weight 1, GP 72.9% vs 69.7%) | | | |
| *from here on the held-out half is read with the two reader/benchmark changes below* | | | |
| reader fix: duet/trio tabs read as one part per guitar (stacked systems or "Gtr N" sections, a guitar's own tuning line; 35 files, 32,002 held-out notes at 76.9% -> 77.7%) | 84.58% (+0.07) | 45.78% | 83.78% |
| benchmark: natural harmonics left out (GP harmonic effect, "<12>" in ASCII tab; 1,187 held-out classtab notes, fret() matched 41% of them) | 84.77% | 45.75% | 83.96% |
| dropped: power-chord features (strings not adjacent, open root, root string 6/5/4/other), refit | 84.5% (=) | 45.6% (-0.2; fit half 79.3 -> 81.1) | |
| dropped: string model with 128 GRU units per direction (514k parameters; validation eighth at its best weight 83.96% vs 84.21% for 64 units) | | | |
| dropped: the string model's -log p as 8 perceptron features (x fret region, expected region shares), fit on out-of-fold predictions of two half-data models (validation eighth 83.81% vs 84.20%) | -0.2 on a third | | |
| dropped: top-note (string, fret region) transitions between onsets, 1,600 features (validation 84.39% vs 84.36%: noise) | 84.87% (+0.10) | 45.29% | 84.04% |
| dropped: the above, with both passes fit with the learned term present (out-of-fold predictions, weight 0.5; validation 84.34% vs 84.36%) | 84.92% (+0.15) | 47.27% | 84.14% |
| dropped: per onset, the majority of 7 decodes (fret-height bias -0.5..1, learned weight 0.5/1; validation 84.51% vs 84.36%, 7x slower) | | | |
| measured: per part, the best of 8 fret-height biases chosen by an oracle (an upper bound for a per-piece position prior): held-out third 82.6% -> 83.8%, validation 84.2% -> 85.4%; the same choice made by the string model's likelihood: 84.0% | | | |
| dropped: the string model retrained on the new reading of half 0 (validation eighth 84.19% at its best weight vs 84.36% for the shipped one: seed-level noise) | | | |
| dropped: dropout 0.3 in the string model (input, between and after the GRU layers; two seeds: validation eighth 84.04% / 83.92% at weight 0.5 vs 84.36%) | | | |
| dropped: max-marginal decoding (forward-backward over the same lattice, the costs as energies at temperature T, each onset's most probable fingering; validation T = 1 / 2 / 3 / 5: 84.40 / 84.44 / 84.36 / 84.24% vs 84.36% for the Viterbi) | | | |
| dropped: classtab notes held over the next onset too (ASCII tab has no sustain, so the "string re-used while still sounding" feature never fires there), refit: validation 84.41% vs 84.36% for the same refit without it | 84.77% vs 84.73% | 46.15% vs 45.71% | |
| *later changes* | | | |
| reader fix: several versions (arrangements) of a piece in one text are one part per version, each with its own header line's tuning and capo (classtab's "1st version - ...", "2nd version - drop D, capo 2"; 116 files) | 84.76% (-0.01) | | |
| reader: "=" after a fret (classtab's "note held") sets the note's length (383 files, 24,307 notes longer); weights not refit | 84.76% (=) | | |
| dropped: both passes refit on the new reading (with the '=' lengths the "string re-used while still sounding" weight goes from 0.05 to 11.0 in pass 1) | 84.80% (+0.04: noise) | | |
| dropped: mean probability of 3 string models (the shipped one and two more seeds trained on the current reading; validation eighth 84.37% vs 84.39% for the shipped one alone; the seeds alone 84.11-84.34%) | | | |
| dropped: the string model given 8 whole-part inputs as well (10th/50th/90th pitch percentile above the lowest open string, pitch spread, notes per onset, share of notes above the high string's 5th and 12th fret, length), so it can tell a high arrangement from a low one: validation eighth string accuracy 81.3% vs 81.9-82.2%, with fret() 84.15% vs 84.18-84.39% | | | |
| dropped: the string model fine-tuned on the decoder's own mistakes (each fit-half part decoded by fret() with the current model; a structured hinge raising log p of the human string over the decoded one wherever they differ, plus the cross-entropy as an anchor; Adam 3e-4): validation eighth 84.22 / 83.83 / 84.15% after epochs 1-3 vs 84.39% at the start; the share of training notes decoded wrong moved only from 15.5% to 15.3% | | | |
| distorted-guitar costs: both passes fine-tuned (6 epochs, from the default weights) on half 0's 11 GP tracks whose program is 29-30; `fret()` uses them for such tracks: held-out tracks with those programs 33.7% -> 45.8% (4,734 notes; 5 of 7 parts better) | 84.76% | 53.5% (+7.7) | 84.1% |
| measured: a phrase book (the fit half's majority human string for the same pitch context of 2k+1 notes; validation eighth): k = 2 covers 17% of notes and is right on 77.8% of them, where fret() (its perceptron fit on these notes too) is right on 86.7%; longer contexts cover under 4% | | | |
| measured (`--human-agreement`): human vs human. 70 pairs of versions of one piece in the same tuning (aligned stretches of at least 12 equal pitches, 41,797 notes; pairs agreeing on 99% or more left out as copies) give the same string and fret for 84.2% of notes; fret() agrees with those humans on 80.0% of the same notes | | | |

The rows were measured with `benchmarks/bench_fretting.py`'s fit/score functions on the same held-out notes;
the table at the top is the shipped model (weights rounded to 3 decimals), so it can differ from the
last row in the second decimal.

## Honest status

- **The 85% target is not met**: see the table at the top: classtab {acc['classtab ASCII tabs']:.1%}, GP
  {acc['Guitar Pro (gp3/4/5)']:.1%}, pooled {pooled:.1%} held out (pooled = all held-out notes of both
  sources; classtab is 98% of them). Everything tried together bought about +2.2 points on classtab
  and +9.5 on GP (+7.7 of it from the distorted-guitar costs); the per-feature gains shrank to noise level at
  the end. Later changes to classtab (versions split, held notes' lengths, a refit on that reading,
  an ensemble of string models) moved it by at most 0.04 points. The earlier modelling
  attempts (power chords, a wider string model, the model's output as fitted features, melody transitions,
  fitting with the model present, voting) each moved the validation eighth by less than its seed-to-seed noise
  (about 0.2 points), so none shipped; the numbers moved only through reading the data right (duets split,
  harmonics left out). The string model is data-bound (128 units: training loss falls, validation does not),
  the perceptron is not overfit (in-sample 84.6% vs 84.5% held out) but its features are used up. A per-piece
  position prior is bounded by about +1.2 points even when an oracle picks it. The learned string model gave
  +0.34 on classtab and cost 1.2 on held-out GP (91 of 7,339 notes; GP validation also dropped), a net
  +0.31 pooled: the GRU alone picks the human string for only 82.7% of held-out classtab notes (46% GP),
  below the Viterbi, so it is a small correction, not a new model. (Lowest-fret moved from 72.2% to
  72.5% held out on classtab only through the two reader fixes: the same notes, now read right.)
- Speed: two passes plus the new features take fret() from ~23k to ~9-11k notes/s on this machine
  (about 2.4x slower; the first pass of the new model alone runs at ~18-23k); the learned string model
  (the first call imports torch and loads it) takes that to ~7-8k notes/s on whole parts.
- `--fit` starts the perceptron from the weights shipped in `weights.json` (as before), so a refit is not a
  from-scratch reproduction of them; the shipped tables came from one refit (pass 1, then pass 2) that
  started from the previous version's weights with the new features at 0.
- Where the rest is: single notes are the weak spot (about 77% right vs 88-93% for onsets of 3-4 notes),
  and most errors put a note one string higher (lower position) than the human: notes the human played at
  frets 5-12 are right only ~58% of the time, open and 1-4 ~95%. Several of the worst held-out tabs are
  deliberate position choices (e.g. one pitch repeated dozens of times on the 3rd string at fret 7 where
  we choose the 2nd string at fret 3, consistently), versions marked "high frets" (rodrigo_concierto_de_aranjuez_2's
  third version, npc01_05's second: 43%) or the high part of an ensemble (mozart_k626's guitar 1) - a per-piece
  position style that pitches alone barely reveal. Reading such texts as one part per version or per guitar fixed
  how they are read, not how well they are fingered.
- The held-out GP half is small and dominated by two rock/metal songs (Gamma Ray, a prog-metal exercise)
  whose riffs sit at frets 5-9 where an open-position fingering of the same pitches exists. Tracks with a
  distorted-guitar program (29-30) now get their own costs (fine-tuned on the fit half's 11 such tracks): held
  out {dist[0][2]:.1%} vs {dist[0][3]:.1%} with the default costs ({dist[0][1]} notes, {dist[0][0]} parts; in-sample
  {dist[1][2]:.1%} vs {dist[1][3]:.1%}: they overfit 11 tracks, but every two-note fifth becomes a power-chord
  shape on adjacent strings). Gamma Ray's riffs are still played a string higher than the human (root on the
  D string at fret 2 where the human plays the A string at fret 7).
- How high is the ceiling? Where two people tabbed the same piece in the same tuning (versions in one classtab
  text), they agree on 84.2% of notes (41,797 aligned notes, 70 pairs); fret() agrees with them on 80.0% of those
  notes. These pieces are harder than the average (fret() is at 84.8% over all of classtab), so human agreement
  over all of classtab is likely higher than 84.2%, but a target of 85% is of the order of how often two
  guitarists agree.
- The GP files are mostly format test suites, not a curated corpus: tiny parts, duplicated songs
  (de-duplicated by content), and some deliberately broken files.
- classtab's string/fret come from our own ASCII reader (`guitarformer/readers/ascii_tab.py`); tabs
  whose labels or text give a tuning use it, others are taken as standard tuning. Duets and trios are one part
  per guitar when the text names several guitars, and several versions of a piece are one part per version
  (rodrigo_concierto_de_aranjuez_2: four parts now). Left alone: one tab (hatzidakis_dont_ask_the_sky) labels its
  strings in the wrong order while its text gives the tuning.
- Earlier history: the hand-set costs (commit d192c49) scored 80.6% / 44.1%, the first fitted model
  82.4% / 44.0% (plus a capo bug in this benchmark fixed then).
""")


if __name__ == "__main__":
    main()
