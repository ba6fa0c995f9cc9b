"""Benchmark: `prepare` vs plain miditok on the same MIDI files (files/s, tokens/s), side by side in one run.

    python benchmarks/bench_prepare.py [--data ../shared/data/guitar] [--repeat 3] [--out docs/results/BENCH_PREPARE.md]

(Another tree's prepare: PYTHONPATH=TREE python benchmarks/bench_prepare.py ...)

Plain miditok = symusic load + `tokenizer.encode` per file, nothing else (no track selection, no hashing,
no manifest, no cache). prepare = the full path users run (hash, read_guitar, encode, cache, manifest,
arrays), from an empty output folder each time so nothing is reused. Rounds alternate between the two
to spread machine noise over both; the ratio of medians is what to quote.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import symusic
from harness import Timer, table

from guitarformer.config import DataConfig
from guitarformer.data.prepare import PrepareOptions, prepare
from guitarformer.vocab.tokenization import build_tokenizer


def plain_miditok(files: list[Path], tok) -> tuple[int, int]:
    n_tok, ok = 0, 0
    for f in files:
        try:
            seqs = tok.encode(symusic.Score(str(f)))
        except Exception:
            continue
        ok += 1
        n_tok += sum(len(s.ids) for s in (seqs if isinstance(seqs, list) else [seqs]))
    return ok, n_tok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data" / "guitar"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--limit", type=int, default=0, help="use the first N MIDI files")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    files = sorted(p for p in Path(a.data).rglob("*") if p.suffix.lower() in (".mid", ".midi"))
    if a.limit:
        files = files[: a.limit]
    if not files:
        raise SystemExit(f"no MIDI files under {a.data}")
    tok = build_tokenizer(DataConfig())

    # The default tab tokens finger every MIDI part with fret() (its strings); REMI tokens hold pitches alone.
    remi = DataConfig(tokenizer="REMI")
    runs = ((1, DataConfig(), "prepare, 1 worker"), (a.workers, DataConfig(), f"prepare, {a.workers} workers"),
            (a.workers, remi, f"prepare, REMI tokens (no fingering), {a.workers} workers"))
    rows: dict[str, list[float]] = {"plain miditok (1 core)": [], **{key: [] for _, _, key in runs}}
    tokens: dict[str, int] = {}
    for r in range(a.repeat):
        with Timer() as t:
            _, n = plain_miditok(files, tok)
        rows["plain miditok (1 core)"].append(t.seconds)
        tokens["plain miditok (1 core)"] = n
        for w, cfg, key in runs:
            out = Path(tempfile.mkdtemp())
            with Timer() as t:
                # the files themselves
                meta = prepare(files, out / "ds", cfg, PrepareOptions(workers=w, progress=False))
            rows[key].append(t.seconds)
            tokens[key] = sum(meta["tokens"].values())
            shutil.rmtree(out)

    base = statistics.median(rows["plain miditok (1 core)"])
    lines = [
        "# prepare vs plain miditok",
        "",
        f"`python benchmarks/bench_prepare.py --repeat {a.repeat}{f' --limit {a.limit}' if a.limit else ''}` on "
        f"{len(files)} MIDI files from ../shared/data/guitar; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}. Median of {a.repeat} alternating rounds.",
        "",
        table(["path", "seconds", "files/s", "tokens/s", "time per file vs plain miditok"],
              [[key, f"{m:.2f}", f"{len(files) / m:.1f}", f"{tokens[key] / m:,.0f}", f"{m / base:.2f}×"]
               for key, m in ((key, statistics.median(ts)) for key, ts in rows.items())], align="lllll"),
    ]
    lines += ["", "prepare's token count includes BOS/EOS per part and only guitar tracks; plain miditok "
              "tokenizes every track, so tokens/s are not like for like — files/s are. Plain miditok encodes with "
              "the default tab tokenizer, whose notes then take their lowest-fret string; prepare fingers every "
              "MIDI part with fret() first (the REMI row: the same reading without fingering)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
