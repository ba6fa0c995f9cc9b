"""How often a tab-token model fingers held-out human tabs as their authors did, vs fret() (issue #17); writes
docs/FINGERING_MODEL.md.

    python scripts/bench_fingering.py RUN [--data ../shared/data/guitar] [--every N] [--device auto]
    python scripts/bench_fingering.py --list-split train.txt     # the fit half's files, one path per line
    python scripts/bench_fingering.py --link-split DIR           # the same as a folder of links, for `prepare`

Files are split in two exactly as scripts/bench_fretting.py does (its `half()`: a hash of the file name without
extension, so a song's .gp3/.gp4/.gp5 copies land together): half 0 is for training, half 1 is held out and
scored here. Parts are de-duplicated by their notes and fingering, then every Nth is kept (`--every`).
Sources: classtab's ASCII tabs, Guitar Pro 3-5 files (the two sources of docs/FRETTING.md) and Guitar Pro 6-8
files. Agreement is counted in token space on the same notes for the model and fret()
(guitarformer/evaluation/fingering.py: the model re-chooses every String token of the part encoded with the
human fingering; dead notes and natural harmonics are left out).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_fretting import half as _part_half  # noqa: E402  (the split must be exactly the fretting benchmark's)

from guitarformer.evaluation.fingering import Agreement, has_human_fingering, part_ids, score_parts  # noqa: E402
from guitarformer.generation.fingering import BEAM  # noqa: E402
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


def write_split(data: Path, list_out: Path | None, link_dir: Path | None) -> list[Path]:
    """The training half (half 0) of every source: written as a list of paths and/or a folder of links that
    mirrors the data folder (prepare reads a folder recursively and follows the links)."""
    files = [f for find in SOURCES.values() for f in find(data) if half(f) == 0]
    if list_out is not None:
        list_out.parent.mkdir(parents=True, exist_ok=True)
        list_out.write_text("".join(f"{f.resolve()}\n" for f in files))
        print(f"wrote {list_out}: {len(files)} files of half 0")
    if link_dir is not None:
        for f in files:
            link = link_dir / f.relative_to(data)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            os.symlink(f.resolve(), link)
        print(f"linked {len(files)} files of half 0 under {link_dir} (guitarformer prepare {link_dir} --tokenizer "
              f"TabREMI)")
    return files


def held_out_parts(tok, files: list[Path], every: int, name: str):
    """PartIds of the held-out half: de-duplicated parts with a human fingering, every Nth."""
    scores, seen, bad = [], set(), 0
    for f in files:
        if half(f) != 1:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, nargs="?", help="run directory of a TabREMI decoder")
    ap.add_argument("--checkpoint", type=Path, default=None, help="a checkpoint file instead of the run's best")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--every", type=int, default=1, help="score every Nth held-out part (quick runs)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--beam", type=int, nargs="+", default=[BEAM], help="rows kept per window: 1 is the greedy "
                    "choice; several values score the same parts with each (default: %(default)s)")
    ap.add_argument("--context", type=int, default=None, help="windows of at most this many tokens (default: the "
                    "model's block_size; shorter is faster, with less context)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (on a shared 2-core machine one thread "
                    "stepped 35 rows 4x faster than two, with the other core busy)")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "FINGERING_MODEL.md")
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--list-split", type=Path, default=None, help="write half 0's files here, one path a line")
    ap.add_argument("--link-split", type=Path, default=None, help="link half 0's files under this folder")
    args = ap.parse_args()

    if args.list_split or args.link_split:
        write_split(args.data, args.list_split, args.link_split)
        return
    if args.run is None and args.checkpoint is None:
        ap.error("give a RUN (or --checkpoint), or --list-split / --link-split")

    import torch

    from guitarformer.generation.fingering import check_fingering_run
    from guitarformer.runs import load_run
    from guitarformer.runtime import resolve_device

    torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    model, tok, cfg = load_run(args.run, args.checkpoint, str(dev))
    check_fingering_run(model, tok)
    n_params = sum(p.numel() for p in model.parameters())
    rows = []
    for name, find in SOURCES.items():
        t0 = time.perf_counter()
        parts, bad = held_out_parts(tok, find(args.data), args.every, name)
        t_read = time.perf_counter() - t0
        for k in args.beam:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            got = score_parts(model, tok, parts, dev, args.batch_size, args.context, beam=k)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_model = time.perf_counter() - t0
            a = Agreement()
            for g in got:
                a.add(g)
            rows.append((name, k, a, bad, t_read, t_model))
            d = a.as_dict()
            print(f"{name}, beam {k}: {a.parts} parts, {a.notes} notes: model {d['model_accuracy'] or 0:.1%}  "
                  f"fret() {d['fret_accuracy'] or 0:.1%}  (model {a.notes / max(t_model, 1e-9):,.0f} notes/s; "
                  f"reading, fret() and encoding {t_read:.0f}s; {bad} files or parts passed over)", flush=True)
    pooled = {}
    for _, k, a, *_ in rows:
        pooled.setdefault(k, Agreement()).add(a)
    for k, p in pooled.items():
        d = p.as_dict()
        print(f"held out, pooled, beam {k}: {p.notes} notes: model {d['model_accuracy'] or 0:.1%}  fret() "
              f"{d['fret_accuracy'] or 0:.1%}")
    if args.no_doc:
        return
    cmd = "python scripts/bench_fingering.py " + " ".join(a for a in sys.argv[1:])
    write_doc(args.doc, rows, pooled, cmd, args, cfg, n_params, dev)


def write_doc(path: Path, rows, pooled: dict[int, Agreement], cmd: str, args, cfg, n_params: int, dev) -> None:
    def pct(a: Agreement, key: str) -> str:
        v = a.as_dict()[key]
        return "-" if v is None else f"{v:.1%}"

    threads = f"{args.threads} thread" + ("s" if args.threads > 1 else "")
    table = "\n".join(
        f"| {name} | {k} | {a.parts} | {a.notes:,} | {pct(a, 'model_accuracy')} | {pct(a, 'fret_accuracy')} | "
        f"{a.notes / max(tm, 1e-9):,.0f} |" for name, k, a, _, _, tm in rows)
    table += "".join(f"\n| pooled | {k} | {a.parts} | {a.notes:,} | {pct(a, 'model_accuracy')} | "
                     f"{pct(a, 'fret_accuracy')} | |" for k, a in pooled.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.is_file() else ""
    notes = old[old.index(NOTES):] if NOTES in old else f"{NOTES}\n"  # hand-written notes below the marker stay
    path.write_text(f"""# The model fingers other music (issue #17)

A decoder trained on tab tokens (TabREMI: each note's `String_<n>` after its Duration) chooses the string, and so
the fret, of every note of a file it did not write: `guitarformer tab FILE --run RUN` shows its tab, `guitarformer
eval --run RUN --fingering DIR` scores it against the human fingering of every tab and Guitar Pro file under DIR,
and this page scores it on the held-out half of the real-guitar files, against `fret()` on the same notes.

    {cmd}

Run: `{args.run or args.checkpoint}`: {cfg.model.n_layer} layers, width {cfg.model.n_embd}, \
context {cfg.model.block_size}
({n_params / 1e6:.1f}M parameters); windows of {args.context or cfg.model.block_size} tokens, \
batches of {args.batch_size} rows; on {dev.type}
({threads}); every {args.every}. de-duplicated part of the held-out half.

| held-out source | beam | parts | notes | model | fret() | model notes/s |
|---|---|---|---|---|---|---|
{table}

Accuracy = share of notes whose (string, fret) equals the human tab's, for the model and for fret() on the same
notes. How it is counted (guitarformer/generation/fingering.py): each part is encoded with its human fingering;
the model reads those tokens with teacher forcing except String tokens, which it chooses itself among the
strings the guitar allows (a string that sounds the pitch in the part's tuning and capo, free at that onset, and
leaving the onset's later notes strings of their own) and then reads back; fret()'s fingering goes through the
same encoder. Beam 1 takes the likeliest allowed String given the tokens before it; beam K keeps, per window,
the K likeliest sequences so far (every token's log-probability counts, the teacher-forced ones too, so a string
that makes the next notes unlikely loses), one of them always the greedy one, and keeps the best at the
window's end. With the pitch the same, the same string means the same fret. Dead notes and natural harmonics are
left out (their string and fret are not a fretted pitch), as in scripts/bench_fretting.py, and so are notes
whose human string cannot sound their pitch.

The split is bench_fretting.py's: a hash of the file name without extension, half 0 to train on (written by
`--list-split FILE` as one path a line, or `--link-split DIR` as a folder of links that `guitarformer prepare DIR
--tokenizer TabREMI` reads), half 1 held out. fret()'s own weights were fit on half 0 too.

Differences from docs/FRETTING.md's table: the parts here are read by guitarformer's readers (Guitar Pro through
`read_guitar`, not the benchmark's own minimal loop), fret() fingers every note of a part (dead notes and
harmonics included, as `tab` does) before those notes are left out of the count, and a note counts as the
tokenizer sees it (notes its quantisation merges are one note). The fret() column should land within a few
tenths of a point of FRETTING.md's held-out numbers.

Speed: the model steps one token per row through the KV cache (beam K: K rows per window), all windows of a
source in batches of {args.batch_size} rows; notes/s counts compared notes over the model's time only (reading,
fret() and encoding are not in it).

{notes}""")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
