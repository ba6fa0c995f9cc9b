"""Audio and pictures of a part: WAV through FluidSynth, and the piano roll + audio + tab TensorBoard shows."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import wave
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # drawn off-screen: training runs and servers have no display
import matplotlib.pyplot as plt  # noqa: E402 (the backend is chosen first)
import numpy as np  # noqa: E402
import pretty_midi  # noqa: E402

from guitarformer.errors import GuitarformerError
from guitarformer.music.bars import bar_lines
from guitarformer.music.guitar import pitch_name
from guitarformer.music.score import GuitarScore
from guitarformer.render.ascii_tab import render_ascii_tab

SOUNDFONT_PLACES = (
    "/usr/share/sounds/sf2/FluidR3_GM.sf2", "/usr/share/sounds/sf2/default-GM.sf2", "/usr/share/soundfonts/default.sf2",
    "/usr/share/soundfonts/FluidR3_GM.sf2", "/usr/share/sounds/sf2/TimGM6mb.sf2", "/usr/local/share/soundfonts/default.sf2",
    "/opt/homebrew/share/soundfonts/default.sf2", "/usr/local/share/fluidsynth/default.sf2",
)


def find_synth() -> tuple[str, str]:
    """(fluidsynth binary, General MIDI .sf2): $GUITARFORMER_SOUNDFONT first, then the usual places."""
    exe = shutil.which("fluidsynth")
    env = os.environ.get("GUITARFORMER_SOUNDFONT")
    places = [env] if env else []
    places += list(SOUNDFONT_PLACES) + sorted(str(p) for d in ("/usr/share/sounds/sf2", "/usr/share/soundfonts")
                                              for p in Path(d).glob("*.sf2"))
    sf2 = next((p for p in places if p and Path(p).is_file()), None)
    if exe is None or sf2 is None:
        missing = "the fluidsynth program" if exe is None else "a General MIDI soundfont (.sf2)"
        raise GuitarformerError(f"--wav needs {missing}, which was not found",
                                "install fluidsynth and a GM soundfont (e.g. apt install fluidsynth fluid-soundfont-gm), "
                                "or set GUITARFORMER_SOUNDFONT=/path/to/font.sf2")
    if env and sf2 != env:
        raise GuitarformerError(f"GUITARFORMER_SOUNDFONT={env} is not a file", "point it at a .sf2 soundfont")
    return exe, sf2


def render_wav(midi: Path, wav: Path, synth: tuple[str, str], rate: int = 44100) -> None:
    """MIDI -> WAV with FluidSynth (no audio device: -n -i, file renderer only), then finish_wav."""
    exe, sf2 = synth
    wav.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([exe, "-ni", "-F", str(wav), "-r", str(rate), sf2, str(midi)], capture_output=True, text=True)
    if r.returncode != 0 or not wav.is_file():
        raise GuitarformerError(f"fluidsynth failed on {midi}: {(r.stderr or r.stdout).strip()[-200:]}",
                                "check the soundfont with `fluidsynth -ni FONT.sf2 FILE.mid`")
    finish_wav(wav)


def finish_wav(wav: Path) -> None:
    """Rewrite a 16-bit PCM WAV at normal loudness without its trailing silence (FluidSynth renders its default
    gain, about -22 dBFS, and seconds of release after the last note)."""
    with wave.open(str(wav), "rb") as w:
        params = w.getparams()
        frames = w.readframes(params.nframes)
    if params.sampwidth != 2:  # FluidSynth's default is 16-bit; leave anything else as it was written
        return
    x = np.frombuffer(frames, dtype="<i2").astype(np.float32).reshape(-1, params.nchannels).T / 32768.0
    x = normalize_loudness(trim_silence(x, params.framerate))
    write_wav(wav, x, params.framerate)


def write_wav(path: Path, audio: np.ndarray, rate: int) -> None:
    """float audio in [-1, 1], (N,) or (channels, N) -> 16-bit PCM WAV."""
    x = np.atleast_2d(np.asarray(audio, dtype=np.float32))
    pcm = (np.clip(x, -1.0, 1.0) * 32767).round().astype("<i2").T.copy()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(x.shape[0])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


TARGET_DBFS = -16.0  # RMS loudness of a preview: near what music players play at (was -22 to -25 dBFS)
PEAK_LIMIT = 10 ** (-1.0 / 20)  # never above -1 dBFS, whatever the RMS target asks
SILENCE_DBFS = -60.0  # below this, a preview's tail counts as silence
TAIL_SECONDS = 0.5  # kept after the last sound, faded out, so the last note decays instead of stopping dead
ROLL_PX_PER_SECOND = 60  # piano roll: a 16-beat riff at 120 bpm draws about 500 px wide
ROLL_PX_PER_PITCH = 7


def normalize_loudness(audio: np.ndarray, target_dbfs: float = TARGET_DBFS) -> np.ndarray:
    """Scale to `target_dbfs` RMS, peaks held at -1 dBFS (silence stays silence)."""
    x = np.asarray(audio, dtype=np.float32)
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0
    peak = float(np.abs(x).max()) if x.size else 0.0
    if rms <= 0.0 or peak <= 0.0:
        return x
    gain = min(10 ** (target_dbfs / 20) / rms, PEAK_LIMIT / peak)
    return (x * gain).astype(np.float32)


def trim_silence(audio: np.ndarray, rate: int, tail: float = TAIL_SECONDS,
                 threshold_dbfs: float = SILENCE_DBFS) -> np.ndarray:
    """Cut the trailing silence (synthesizers render seconds of release after the last note): keep `tail`
    seconds after the last sample above `threshold_dbfs` of the peak, faded out."""
    x = np.asarray(audio, dtype=np.float32)
    mono = np.abs(x).max(axis=0) if x.ndim == 2 else np.abs(x)
    peak = float(mono.max()) if mono.size else 0.0
    if peak <= 0.0:
        return x[..., :0]
    loud = np.nonzero(mono > peak * 10 ** (threshold_dbfs / 20))[0]
    end = min(mono.size, int(loud[-1]) + 1 + int(tail * rate))
    out = x[..., :end].copy()
    fade = min(end, int(tail * rate))
    if fade > 0:
        out[..., end - fade:] *= np.linspace(1.0, 0.0, fade, dtype=np.float32)
    return out


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


def render_media(gs: GuitarScore, frets=None, fs: int = 16000) -> dict[str, Any]:
    """Piano roll (H, W uint8), audio (float32, (1, N), -16 dBFS RMS, no trailing silence) and ASCII tab of a
    part, for TensorBoard."""
    pm = pretty_midi.PrettyMIDI(io.BytesIO(gs.score.dumps_midi()))
    audio = None
    if pm.instruments and pm.instruments[0].notes:
        audio = trim_silence(pm.synthesize(fs=fs).astype(np.float32)[: fs * 30], fs)
        audio = normalize_loudness(audio).reshape(1, -1)
    return {"piano_roll": piano_roll_image(gs), "audio": audio, "sample_rate": fs,
            "tab": render_ascii_tab(gs, frets)}
