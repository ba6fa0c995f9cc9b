"""Continuations and fills that keep the song: `sample --prompt F --bars 4` and `infill F --bars a-b` with the
shipped model over a sample of the real files in ../shared/data/guitar (mixed formats, single- and multi-track).

Per file and command, read back from what was written (the MIDI for the parts, tempo and meter; the GP5 for the
tuning): whether every new bar is in the meter the file has where they go, whether the tempo there is the file's,
whether the edited part keeps its tuning, whether every part of the file came back, where the new bars sit (bar
numbers, and the output's length), and the note values the new bars use against those of the file.

    PYTHONPATH=. python benchmarks/sweep_continue.py [--shared ../shared/data/guitar] [--files 24]
        [--out docs/results/CONTINUE.md]

The files are chosen with a fixed seed (a few per format, bars >= 6), so a second run measures the same files.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from guitarformer.app.files import read_user_parts
from guitarformer.app.infill import infill
from guitarformer.runs.run import load_run
from guitarformer.app.requests import InfillRequest, Outputs, SampleRequest
from guitarformer.app.sample import sample
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.music.bars import bar_starts, signature_at
from guitarformer.readers import read_guitar
from harness import table

ROOT = Path(__file__).resolve().parents[1]
PER_FORMAT = {"gp": 4, "gpx": 4, "gp5": 4, "gp4": 3, "gp3": 2, "mid": 5, "txt": 2}
MIN_BARS = 6


@dataclass
class Case:
    file: str
    command: str  # "sample" or "infill"
    parts_in: int = 0
    parts_out: int = 0
    meter_kept: bool = False
    tempo_kept: bool = False
    tuning_kept: bool = False
    new_bars: str = ""  # "98-101 of 101"
    new_value: float = 0.0  # median note value of the new bars, in quarters
    file_value: float = 0.0  # the same over the file's edited part
    error: str = ""


def pick_files(shared: Path, total: int) -> list[Path]:
    """A few readable files per format, bars >= MIN_BARS, chosen with a fixed seed; multi-track ones first."""
    rng = random.Random(0)
    chosen: list[Path] = []
    for ext, want in PER_FORMAT.items():
        files = sorted(shared.rglob(f"*.{ext}"))
        rng.shuffle(files)
        multi, single = [], []
        for f in files:
            if len(multi) + len(single) >= 4 * want:
                break
            try:
                parts = read_guitar(f, tracks="all")
            except Exception:  # broken files are the reliability sweep's business
                continue
            s = parts[0].score
            if not parts or len(bar_starts(s.time_signatures, s.ticks_per_quarter, s.end())) < MIN_BARS:
                continue
            (multi if len(parts) > 1 else single).append(f)
        half = want // 2
        chosen += (multi[:half] + single)[:want] if len(multi) >= half else (multi + single)[:want]
    return chosen[:total]


def _median_value(notes, tpq: int) -> float:
    return statistics.median(n.duration / tpq for n in notes) if notes else 0.0


def _check(case: Case, src: Path, out_mid: Path, out_gp: Path, new_from: int, new_to: int) -> None:
    """Read the outputs back and fill `case` (new bars from tick `new_from` to `new_to` of the output MIDI)."""
    case.parts_in = len(read_guitar(src, tracks="all"))
    try:
        before = read_guitar(src)  # the edited part is the first guitar part
    except SkipFile:  # a file without a guitar part: its first part
        before = read_guitar(src, tracks="all")
    after = read_guitar(out_mid, tracks="all")
    case.parts_out = len(after)
    s = after[0].score
    tpq = s.ticks_per_quarter
    starts = bar_starts(s.time_signatures, tpq, max(s.end(), new_to))
    new = [t for t in starts if new_from <= t < new_to]
    orig = before[0].score
    scale = orig.ticks_per_quarter / tpq
    want = signature_at(orig.time_signatures, orig.ticks_per_quarter, max(0, round(new_from * scale) - 1)) \
        if case.command == "sample" else None
    case.meter_kept = bool(new) and all(
        signature_at(s.time_signatures, tpq, t) == (want or signature_at(orig.time_signatures,
                                                                           orig.ticks_per_quarter, round(t * scale)))
        for t in new)
    tempo_of = lambda sc, t: [e.qpm for e in sc.tempos if e.time <= t][-1:] or [120.0]  # noqa: E731
    at = new_from if case.command == "infill" else max(0, round(new_from * scale) - 1)
    case.tempo_kept = abs(tempo_of(s, new_from)[0] - tempo_of(orig, at)[0]) < 0.5
    gp = read_guitar(out_gp, tracks="all")
    case.tuning_kept = any(p.tuning == before[0].tuning for p in gp)
    k = starts.index(new[0]) + 1 if new else 0
    case.new_bars = f"{k}-{k + len(new) - 1} of {len(starts)}" if new else f"none of {len(starts)}"
    edited = max(after, key=lambda p: sum(new_from <= n.time < new_to for n in p.track.notes))
    case.new_value = _median_value([n for n in edited.track.notes if new_from <= n.time < new_to], tpq)
    case.file_value = _median_value(list(before[0].track.notes), orig.ticks_per_quarter)


def run_case(loaded, src: Path, command: str, tmp: Path) -> Case:
    case = Case(file=str(src), command=command)
    out = Outputs(midi=tmp / "out.mid", gp=tmp / "out.gp5", tab=tmp / "out.txt")
    try:
        if command == "sample":
            result = sample(SampleRequest(outputs=out, prompt=src, bars=4, seed=0), loaded)
            riff = result.riffs[0]
            new_from = riff.gs.extra["generated_from_tick"]
            s = riff.gs.score
            lines = bar_starts(s.time_signatures, s.ticks_per_quarter, s.end() + 1)
            later = [t for t in lines if t > new_from]
            new_to = later[min(len(later), riff.new_bars) - 1] if later and riff.new_bars else s.end() + 1
            new_to = max(new_to, max(n.time + 1 for n in riff.gs.track.notes))
            _check(case, src, out.midi, out.gp, new_from, new_to)
        else:
            parts = read_user_parts(src)
            s = parts[0].score
            starts = bar_starts(s.time_signatures, s.ticks_per_quarter, s.end())
            a = max(2, len(starts) // 2)
            result = infill(InfillRequest(song=src, bars=(a, a + 1), outputs=out, seed=0), loaded)
            s = result.score.score
            starts = bar_starts(s.time_signatures, s.ticks_per_quarter, s.end() + 1)
            _check(case, src, out.midi, out.gp, starts[a - 1], starts[a + 1] if a + 1 < len(starts) else s.end())
    except GuitarformerError as e:
        case.error = e.problem[:120]
    except Exception as e:  # noqa: BLE001 - a crash is a finding: recorded, and the sweep goes on
        case.error = f"crash: {type(e).__name__}: {str(e)[:100]}"
    return case


def report(cases: list[Case], shared: Path, seconds: float) -> str:
    ok = [c for c in cases if not c.error]

    def share(cmd: str, attr: str) -> str:
        got = [c for c in ok if c.command == cmd]
        return f"{sum(bool(getattr(c, attr)) for c in got)}/{len(got)}" if got else "-"

    rows = [[cmd, share(cmd, "meter_kept"), share(cmd, "tempo_kept"), share(cmd, "tuning_kept"),
             f"{sum(c.parts_out == c.parts_in for c in ok if c.command == cmd)}/{sum(c.command == cmd for c in ok)}",
             sum(c.error != "" for c in cases if c.command == cmd)] for cmd in ("sample", "infill")]
    yes = {True: "kept", False: "**changed**"}
    per_file = [[str(Path(c.file).relative_to(shared)), c.command, *[""] * 6, c.error] if c.error else
                [str(Path(c.file).relative_to(shared)), c.command, f"{c.parts_in} → {c.parts_out}", yes[c.meter_kept],
                 yes[c.tempo_kept], yes[c.tuning_kept], c.new_bars, f"{c.new_value:.3g} / {c.file_value:.3g}", ""]
                for c in cases]
    lines = [
        "# Continuations and fills that keep the song",
        "",
        "Written by `benchmarks/sweep_continue.py` (the shipped model, seed 0): `sample --prompt F --bars 4` and "
        "`infill F --bars a-b` (a = half the song's bars) on "
        f"{len(cases) // 2} files of the shared guitar folder, read back from the MIDI and GP5 written. "
        f"{seconds:.0f} s in all.",
        "",
        table(["command", "new bars in the file's meter", "tempo kept", "tuning kept", "every part kept", "refused"],
              rows, align="l" * 6),
        "",
        "Parts: the file's pitched parts as the toolkit reads them (`--tracks all`, drums included).",
        "Note value: the median note length (quarters) of the new bars, against the file's edited part.",
        "",
        table(["file", "command", "parts in → out", "meter", "tempo", "tuning", "new bars", "note value new / file",
               "refused"], per_file, align="l" * 9),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data" / "guitar")
    ap.add_argument("--files", type=int, default=24)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "CONTINUE.md")
    args = ap.parse_args(argv)
    if not args.shared.is_dir():
        print(f"no shared guitar folder at {args.shared}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    loaded = load_run(None, None, "cpu")
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for src in pick_files(args.shared, args.files):
            for command in ("sample", "infill"):
                case = run_case(loaded, src, command, Path(tmp))
                cases.append(case)
                print(f"{command} {src.name}: parts {case.parts_in}->{case.parts_out} meter {case.meter_kept} "
                      f"tempo {case.tempo_kept} tuning {case.tuning_kept} new {case.new_bars} "
                      f"value {case.new_value:.3g}/{case.file_value:.3g} {case.error}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(cases, args.shared, time.perf_counter() - t0))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
