"""What TensorBoard shows of a riff: a piano roll a person reads, its audio and its tab.

Its own module because matplotlib and pretty_midi take about half a second to import: `sample`, `tab` and the
studio, which never draw, import render/audio.py only."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")  # drawn off-screen: training runs and servers have no display
import matplotlib.pyplot as plt  # noqa: E402 (the backend is chosen first)
import numpy as np  # noqa: E402
import pretty_midi  # noqa: E402

from guitarformer.music.bars import bar_lines  # noqa: E402
from guitarformer.music.guitar import pitch_name  # noqa: E402
from guitarformer.music.score import GuitarScore  # noqa: E402
from guitarformer.render.ascii_tab import render_ascii_tab  # noqa: E402
from guitarformer.render import soundfont  # noqa: E402
from guitarformer.render.audio import normalize_loudness, trim_silence  # noqa: E402

ROLL_PX_PER_SECOND = 60  # piano roll: a 16-beat riff at 120 bpm draws about 500 px wide
ROLL_PX_PER_PITCH = 7


def piano_roll_image(gs: GuitarScore, px_per_second: int = ROLL_PX_PER_SECOND,
                     px_per_pitch: int = ROLL_PX_PER_PITCH) -> np.ndarray:
    """The part's notes as a picture a person reads: time across (seconds), pitch up with note names on
    the axis, dotted bar lines numbered at the top; greyscale (H, W) uint8, about 60 px a second."""
    notes = list(gs.track.notes)
    tpq = gs.score.ticks_per_quarter
    to_sec = _seconds_of(gs)
    end_tick = max((n.time + n.duration for n in notes), default=tpq * 4)
    low, high = (min(n.pitch for n in notes), max(n.pitch for n in notes)) if notes else (40, 64)
    low, high = low - 2, high + 2
    seconds = max(to_sec(end_tick), 1.0)
    width = min(1600, max(480, int(seconds * px_per_second) + 90))
    height = max(240, (high - low + 1) * px_per_pitch + 70)
    fig = plt.figure(figsize=(width / 100, height / 100), dpi=100)
    ax = fig.add_axes((70 / width, 40 / height, 1 - 85 / width, 1 - 70 / height))
    for n in notes:
        t0, t1 = to_sec(n.time), to_sec(n.time + n.duration)
        ax.add_patch(plt.Rectangle((t0, n.pitch - 0.4), max(t1 - t0, 0.02), 0.8, color="0.1", lw=0))
    lines = bar_lines(gs.score.time_signatures, tpq, end_tick)
    for i, tick in enumerate(lines):
        x = to_sec(tick)
        ax.axvline(x, color="0.55", lw=0.8, ls=":")
        if i < len(lines) - 1:
            ax.text(x, high + 0.6, str(i + 1), fontsize=7, color="0.3", va="bottom")
    ax.set_xlim(0, max(seconds, to_sec(lines[-1])))
    ax.set_ylim(low - 0.5, high + 0.5)
    step = 1 if high - low <= 16 else 2
    ticks = [p for p in range(low, high + 1) if p % 12 in (0, 4, 7) or step == 1]
    ax.set_yticks(ticks, [pitch_name(p) for p in ticks], fontsize=7)
    ax.set_xlabel("seconds", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="y", color="0.9", lw=0.5)
    ax.set_axisbelow(True)  # grid lines under the notes, not through them
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    plt.close(fig)
    return (rgba[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)).astype(np.uint8)


def _seconds_of(gs: GuitarScore):
    """tick -> seconds under the part's tempo map."""
    tpq = gs.score.ticks_per_quarter
    tempos = sorted((int(t.time), float(t.qpm)) for t in gs.score.tempos) or [(0, 120.0)]
    if tempos[0][0] > 0:
        tempos.insert(0, (0, tempos[0][1]))

    def to_sec(tick: int) -> float:
        sec, prev_t, prev_q = 0.0, 0, tempos[0][1]
        for t, q in tempos:
            if t >= tick:
                break
            sec += (t - prev_t) / tpq * 60 / prev_q
            prev_t, prev_q = t, q
        return sec + (tick - prev_t) / tpq * 60 / prev_q

    return to_sec


PREVIEW_SECONDS = 30


def preview_audio(gs: GuitarScore, fs: int) -> np.ndarray:
    """Mono float32 audio of the part: the bundled soundfont's instruments (as `--wav` sounds), else, where soundfile
    cannot load, pretty_midi's sine waves."""
    if soundfont.available():
        return soundfont.render(gs.score, fs).mean(axis=0)
    return pretty_midi.PrettyMIDI(io.BytesIO(gs.score.dumps_midi())).synthesize(fs=fs).astype(np.float32)


def render_media(gs: GuitarScore, frets=None, fs: int = 16000) -> dict[str, Any]:
    """Piano roll (H, W uint8), audio (float32, (1, N), -16 dBFS RMS, no trailing silence) and ASCII tab of a
    part, for TensorBoard."""
    audio = None
    if any(len(tr.notes) for tr in gs.score.tracks):
        audio = trim_silence(preview_audio(gs, fs)[: fs * PREVIEW_SECONDS], fs)
        audio = normalize_loudness(audio).reshape(1, -1)
    return {"piano_roll": piano_roll_image(gs), "audio": audio, "sample_rate": fs,
            "tab": render_ascii_tab(gs, frets)}
