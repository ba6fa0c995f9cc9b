"""How often a tab-token model fingers held-out human tabs as their authors did, vs fret() (issue #17); writes
docs/results/FINGERING_MODEL.md.

    python benchmarks/bench_fingering.py RUN [--data ../shared/data/guitar] [--every N] [--device auto]
    python benchmarks/bench_fingering.py --list-split train.txt     # the fit half's files, one path per line
    python benchmarks/bench_fingering.py --copy-split DIR           # the same files copied under DIR, for `prepare`

Files are split in two exactly as benchmarks/bench_fretting.py does (its `half()`: a hash of the file name without
extension, so a song's .gp3/.gp4/.gp5 copies land together): half 0 is for training, half 1 is held out and
scored here. Parts are de-duplicated by their notes and fingering, then every Nth is kept (`--every`).
Sources: classtab's ASCII tabs, Guitar Pro 3-5 files (the two sources of docs/results/FRETTING.md) and Guitar Pro 6-8
files. Agreement is counted in token space on the same notes for the model and fret()
(guitarformer/fingering/agreement.py: the model re-chooses every note's string of the part encoded with the
human fingering, in the run's tab layout: 2, a String on every note, or 3, a String only off the lowest-fret
string; dead notes and natural harmonics are left out).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fretting import half as _part_half  # noqa: E402  (the split must be exactly the fretting benchmark's)

from guitarformer.fingering.agreement import (Agreement, has_human_fingering, part_ids, score_parts,
                                               score_parts_combined)  # noqa: E402
from guitarformer.fingering.tab_model import BEAM  # noqa: E402
from guitarformer.readers import read_guitar  # noqa: E402

NOTES = "<!-- notes: kept when the script rewrites this page -->"
SOURCES = {  # name -> how to find its files under the data folder
    "classtab ASCII tabs": lambda d: sorted((d / "classtab" / "app" / "tabs").glob("*.txt")),
    "Guitar Pro 3-5": lambda d: sorted(p for ext in ("gp3", "gp4", "gp5") for p in d.rglob(f"*.{ext}")),
    "Guitar Pro 6-8": lambda d: sorted(p for ext in ("gpx", "gp") for p in d.rglob(f"*.{ext}")),
}


def half(path: Path) -> int:
    """0 = training half, 1 = held out (bench_fretting.half on the file's name)."""
    return _part_half((path.name,))


def write_split(data: Path, list_out: Path | None, copy_dir: Path | None) -> list[Path]:
    """The training half (half 0) of every source: written as a list of paths and/or copied into a folder that
    mirrors the data folder (prepare reads a folder recursively; it does not follow links out of the folder it
    was given, so a folder of links would be read as nothing)."""
    files = [f for find in SOURCES.values() for f in find(data) if half(f) == 0]
    if list_out is not None:
        list_out.parent.mkdir(parents=True, exist_ok=True)
        list_out.write_text("".join(f"{f.resolve()}\n" for f in files))
        print(f"wrote {list_out}: {len(files)} files of half 0")
    if copy_dir is not None:
        for f in files:
            copy = copy_dir / f.relative_to(data)
            copy.parent.mkdir(parents=True, exist_ok=True)
            if copy.is_symlink() or copy.exists():
                copy.unlink()
            shutil.copyfile(f, copy)
        print(f"copied {len(files)} files of half 0 under {copy_dir} (guitarformer prepare {copy_dir} --tokenizer "
              f"TabREMI)")
    return files


def held_out_parts(tok, files: list[Path], every: int, name: str, held_out: bool = True):
    """PartIds of the held-out half (`held_out` False: of all `files`): de-duplicated parts with a human
    fingering, every Nth."""
    scores, seen, bad = [], set(), 0
    for f in files:
        if held_out and half(f) != 1:
            continue
        try:
            got = read_guitar(f)
        except Exception:  # broken and non-guitar files are part of the data set: count and go on
            bad += 1
            continue
        for k, gs in enumerate(got):
            if not has_human_fingering(gs) or len(gs.track.notes) < 8:
                continue
            key = hashlib.sha1(repr((gs.tuning, gs.capo, [(n.time, n.pitch) for n in gs.track.notes],
                                     gs.frets)).encode()).hexdigest()
            if key not in seen:
                seen.add(key)
                scores.append((f"{f.name}#{k}", gs))
    parts = []
    for pname, gs in scores[::every]:
        try:
            p = part_ids(tok, gs, pname, name)
        except Exception:  # a part the tokenizer cannot take
            bad += 1
            continue
        if p is not None:
            parts.append(p)
    return parts, bad


def val_files(dataset: Path) -> dict[str, list[Path]]:
    """The validation files of a dataset prepared from the training half (its manifest's split "val"), by source:
    where `--tune` chooses the weight of fret() + model without looking at the held-out half."""
    import json

    by_ext = {".txt": "classtab ASCII tabs", ".gp3": "Guitar Pro 3-5", ".gp4": "Guitar Pro 3-5",
              ".gp5": "Guitar Pro 3-5", ".gpx": "Guitar Pro 6-8", ".gp": "Guitar Pro 6-8"}
    out: dict[str, list[Path]] = {name: [] for name in SOURCES}
    with open(dataset / "manifest.jsonl") as fh:
        for line in fh:
            row = json.loads(line)
            path = Path(row["path"])
            if row.get("split") == "val" and path.suffix.lower() in by_ext:
                out[by_ext[path.suffix.lower()]].append(path)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, nargs="?", help="run directory of a TabREMI decoder")
    ap.add_argument("--checkpoint", type=Path, default=None, help="a checkpoint file instead of the run's best")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--every", type=int, default=1, help="score every Nth held-out part (quick runs)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--beam", type=int, nargs="+", default=[BEAM], help="rows kept per window: 1 is the greedy "
                    "choice; several values score the same parts with each (default: %(default)s)")
    ap.add_argument("--combine", type=float, nargs="*", default=[], help="also score fret() + the model: fret()'s "
                    "Viterbi with W x -log p(string) from the model per note, for each weight W given")
    ap.add_argument("--rounds", type=int, default=1, help="fret() + model: rounds (each reads the part as the "
                    "round before fingered it)")
    ap.add_argument("--tune", type=Path, default=None, help="score the validation files of this dataset (prepared "
                    "from the training half) instead of the held-out half; no page is written")
    ap.add_argument("--context", type=int, default=None, help="windows of at most this many tokens (default: the "
                    "model's block_size; shorter is faster, with less context)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (on a shared 2-core machine one thread "
                    "stepped 35 rows 4x faster than two, with the other core busy)")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "results" / "FINGERING_MODEL.md")
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--list-split", type=Path, default=None, help="write half 0's files here, one path a line")
    ap.add_argument("--copy-split", type=Path, default=None, help="copy half 0's files under this folder")
    args = ap.parse_args()

    if args.list_split or args.copy_split:
        write_split(args.data, args.list_split, args.copy_split)
        return
    if args.run is None and args.checkpoint is None:
        ap.error("give a RUN (or --checkpoint), or --list-split / --copy-split")

    import torch

    from guitarformer.vocab.tab_tokens import implied_strings
    from guitarformer.fingering.tab_model import check_fingering_run
    from guitarformer.runs import load_run
    from guitarformer.runtime import resolve_device

    torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    loaded = load_run(args.run, args.checkpoint, str(dev))
    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    check_fingering_run(model, tok)
    args.layout = 3 if implied_strings(tok) else 2  # the run's own (tokenizer.json), for the page
    n_params = sum(p.numel() for p in model.parameters())
    methods = [(f"model, beam {k}", k, None) for k in args.beam]
    methods += [(f"fret() + model x{w:g}" + (f", {args.rounds} rounds" if args.rounds > 1 else ""), None, w)
                for w in args.combine]
    sources = val_files(args.tune) if args.tune else {name: find(args.data) for name, find in SOURCES.items()}
    rows = []
    for name, files in sources.items():
        t0 = time.perf_counter()
        parts, bad = held_out_parts(tok, files, args.every, name, held_out=args.tune is None)
        t_read = time.perf_counter() - t0
        for label, k, w in methods:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            if w is None:
                got = score_parts(model, tok, parts, dev, args.batch_size, args.context, beam=k)
            else:
                got = score_parts_combined(model, tok, parts, w, args.rounds, dev, args.batch_size, args.context)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_model = time.perf_counter() - t0
            a = Agreement()
            for g in got:
                a.add(g)
            rows.append((name, label, a, bad, t_read, t_model))
            d = a.as_dict()
            print(f"{name}, {label}: {a.parts} parts, {a.notes} notes: {d['model_accuracy'] or 0:.1%}  "
                  f"fret() {d['fret_accuracy'] or 0:.1%}  either {d['either_accuracy'] or 0:.1%}  "
                  f"({a.notes / max(t_model, 1e-9):,.0f} notes/s; "
                  f"reading, fret() and encoding {t_read:.0f}s; {bad} files or parts passed over)", flush=True)
    pooled = {}
    for _, label, a, *_ in rows:
        pooled.setdefault(label, Agreement()).add(a)
    for label, p in pooled.items():
        d = p.as_dict()
        print(f"pooled, {label}: {p.notes} notes: {d['model_accuracy'] or 0:.1%}  fret() "
              f"{d['fret_accuracy'] or 0:.1%}  ({(d['model_accuracy'] or 0) - (d['fret_accuracy'] or 0):+.1%}); "
              f"either of the two {d['either_accuracy'] or 0:.1%}")
    if args.tune:
        return
    if args.no_doc:
        return
    cmd = "python benchmarks/bench_fingering.py " + " ".join(a for a in sys.argv[1:])
    write_doc(args.doc, rows, pooled, cmd, args, cfg, n_params, dev)


def write_doc(path: Path, rows, pooled: dict[int, Agreement], cmd: str, args, cfg, n_params: int, dev) -> None:
    def pct(a: Agreement, key: str) -> str:
        v = a.as_dict()[key]
        return "-" if v is None else f"{v:.1%}"

    threads = f"{args.threads} thread" + ("s" if args.threads > 1 else "")
    layout = args.layout
    table = "\n".join(
        f"| {name} | {label} | {a.parts} | {a.notes:,} | {pct(a, 'model_accuracy')} | {pct(a, 'fret_accuracy')} | "
        f"{a.notes / max(tm, 1e-9):,.0f} |" for name, label, a, _, _, tm in rows)
    table += "".join(f"\n| pooled | {label} | {a.parts} | {a.notes:,} | **{pct(a, 'model_accuracy')}** | "
                     f"{pct(a, 'fret_accuracy')} | |" for label, a in pooled.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.is_file() else ""
    notes = old[old.index(NOTES):] if NOTES in old else f"{NOTES}\n"  # hand-written notes below the marker stay
    path.write_text(f"""# The model fingers other music (issues #17, #25)

A decoder trained on tab tokens (TabREMI: a note's `String_<n>` after its Duration; in tab layout 3 only where the
note leaves its lowest-fret string) chooses the string, and so
the fret, of every note of a file it did not write: `guitarformer tab FILE --run RUN` shows its tab, `guitarformer
eval --run RUN --fingering DIR` scores it against the human fingering of every tab and Guitar Pro file under DIR,
and this page scores it on the held-out half of the real-guitar files, against `fret()` on the same notes.

    {cmd}

Run: `{args.run or args.checkpoint}`: {cfg.model.n_layer} layers, width {cfg.model.n_embd}, \
context {cfg.model.block_size}, tab layout {layout}
({n_params / 1e6:.1f}M parameters); windows of {args.context or cfg.model.block_size} tokens, \
batches of {args.batch_size} rows; on {dev.type}
({threads}); every {args.every}. de-duplicated part of the held-out half.

| held-out source | fingering | parts | notes | its accuracy | fret() alone | notes/s |
|---|---|---|---|---|---|---|
{table}

Accuracy = share of notes whose (string, fret) equals the human tab's, for the model and for fret() on the same
notes. How it is counted (guitarformer/fingering/tab_model.py): each part is encoded with its human fingering;
the model reads those tokens with teacher forcing except the strings, which it chooses itself at each note among
the strings the guitar allows (a string that sounds the pitch in the part's tuning and capo, free at that onset,
and leaving the onset's later notes strings of their own) and then reads back: a String token, or in layout 3,
for the lowest-fret string, none (its probability is the model's mass on ending the note there); fret()'s
fingering goes through the same encoder. Beam 1 takes the likeliest allowed string given the tokens before it;
beam K keeps, per window,
the K likeliest sequences so far (every token's log-probability counts, the teacher-forced ones too, so a string
that makes the next notes unlikely loses), one of them always the greedy one, and keeps the best at the
window's end. With the pitch the same, the same string means the same fret. Dead notes and natural harmonics are
left out (their string and fret are not a fretted pitch), as in benchmarks/bench_fretting.py, and so are notes
whose human string cannot sound their pitch.

`fret() + model xW` (guitarformer/fingering/combined.py, issue #25): fret()'s own Viterbi over the whole part,
with W x -log p(string) from the model added to each note's cost. The log-probabilities come from one
teacher-forced pass over the part as fret() fingers it (renormalised over the strings), so the model's
ear for the idiom and fret()'s hand (shifts, stretches, positions, the notes ahead) decide together. W was chosen
on the validation files of the training half (`--tune DATASET`: the manifest's val split of the dataset the run
was trained on), never on the held-out half scored here.

The split is bench_fretting.py's: a hash of the file name without extension, half 0 to train on (written by
`--list-split FILE` as one path a line, or `--copy-split DIR` as a folder of copies that `guitarformer prepare DIR
--tokenizer TabREMI` reads), half 1 held out. fret()'s own weights were fit on half 0 too.

Differences from docs/results/FRETTING.md's table: the parts here are read by guitarformer's readers (Guitar Pro through
`read_guitar`, not the benchmark's own minimal loop), fret() fingers every note of a part (dead notes and
harmonics included, as `tab` does) before those notes are left out of the count, and a note counts as the
tokenizer sees it (notes its quantisation merges are one note). The fret() column should land within a few
tenths of a point of FRETTING.md's held-out numbers.

Speed: the model steps one token per row through the KV cache (beam K: K rows per window), all windows of a
source in batches of {args.batch_size} rows; notes/s counts compared notes over the model's time only (reading,
fret() and encoding are not in it). fret() + model's notes/s counts its whole time: encoding, one forward pass per
window (batched, no cache) and fret() run again with the model's costs.

{notes}""")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
