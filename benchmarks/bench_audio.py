"""How long `--wav` takes: render_wav (the in-process SoundFont renderer, render/soundfont.py, with the bundled SF3)
on an 8-bar riff and on a song of about three minutes, at 44.1 and 22.05 kHz, on one thread.

The riff: 8 bars of 4/4 at 120 bpm, power chords in eighth notes on an overdriven guitar (program 29), with a
bend track as render/midi.py writes one. The song: a multi-track MIDI from ../shared/data/guitar (its time only is
reported). "first" is a fresh process's first render (the font parsed, its samples decoded); "best" the best of
--rounds after it. Prints a Markdown page (docs/results/BENCH_AUDIO.md).

    python benchmarks/bench_audio.py [--rounds 3] [--song PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from harness import Timer, table  # noqa: E402 (benchmarks/harness.py)

import symusic  # noqa: E402

from guitarformer.render import sf2, soundfont  # noqa: E402
from guitarformer.render.audio import Synth, render_wav  # noqa: E402

SONG = ROOT.parent / "shared" / "data" / "guitar" / "miditok" / "tests" / "MIDIs_multitrack" / \
    "Girls Just Want to Have Fun.mid"


def eight_bar_riff(path: Path) -> Path:
    """The riff the page times: 64 power chords (root, fifth, octave) and a bent note per bar on its own channel."""
    s = symusic.Score(480)
    s.tempos.append(symusic.Tempo(0, 120))
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    gtr, bent = symusic.Track(program=29, name="guitar"), symusic.Track(program=29, name="guitar (bends)")
    for number, value in ((101, 0), (100, 0), (6, 4), (38, 0)):
        bent.controls.append(symusic.ControlChange(0, number, value))
    roots = [40, 40, 43, 45, 40, 40, 38, 45]
    for bar, root in enumerate(roots):
        for eighth in range(7):
            t = bar * 1920 + eighth * 240
            for p in (root, root + 7, root + 12):
                gtr.notes.append(symusic.Note(t, 220, p, 96))
        t = bar * 1920 + 7 * 240
        bent.notes.append(symusic.Note(t, 240, root + 14, 100))
        bent.pitch_bends.extend(symusic.PitchBend(t + k * 30, 512 * k) for k in range(8))
        bent.pitch_bends.append(symusic.PitchBend(t + 240, 0))
    s.tracks.extend([gtr, bent])
    s.dump_midi(str(path))
    return path


def timed(midi: Path, wav: Path, rate: int) -> float:
    with Timer() as t:
        render_wav(midi, wav, Synth(None, str(soundfont.BUNDLED_SOUNDFONT)), rate)
    return t.seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--song", type=Path, default=SONG)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        riff = eight_bar_riff(Path(tmp) / "riff.mid")
        pieces = [("8-bar riff", riff)] + ([("song", args.song)] if args.song.is_file() else [])
        first = None
        for name, midi in pieces:
            score = symusic.Score(str(midi), ttype="second")
            notes = sum(len(t.notes) for t in score.tracks)
            for rate in (44100, 22050):
                wav = Path(tmp) / "out.wav"
                t = timed(midi, wav, rate)
                first = t if first is None else first
                best = min([t] + [timed(midi, wav, rate) for _ in range(args.rounds)])
                rows.append([name, f"{score.end():.1f}", len(score.tracks), notes, rate, f"{best:.2f}",
                             f"{score.end() / best:.0f}x"])
    font = sf2.load(soundfont.BUNDLED_SOUNDFONT)
    print("# --wav: render time of the in-process SoundFont renderer\n")
    print("Written by `python benchmarks/bench_audio.py` (render_wav: MIDI -> float audio -> trimmed, levelled 16-bit WAV;"
          " one thread). The bundled font: sonivox.sf3, "
          f"{len(font.presets)} presets, {len(font.samples)} Ogg Vorbis samples.\n")
    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}. "
          f"A fresh process's first render (the font parsed and the samples it needs decoded): {first:.2f} s.\n")
    print(table(["piece", "seconds of music", "tracks", "notes", "rate (Hz)", "render_wav best (s)",
                 "faster than real time"], rows, align="l" * 7))


if __name__ == "__main__":
    main()
