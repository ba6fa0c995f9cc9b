"""Audio of a part: WAV from a SoundFont (in process, FluidSynth as a fallback), loudness and silence (render/media.py
draws what TensorBoard shows)."""

from __future__ import annotations

import os
import shutil
import subprocess
import wave
from pathlib import Path
from typing import NamedTuple

import numpy as np

from guitarformer.errors import GuitarformerError
from guitarformer.render import soundfont

SOUNDFONT_PLACES = (
    "/usr/share/sounds/sf2/FluidR3_GM.sf2", "/usr/share/sounds/sf2/default-GM.sf2", "/usr/share/soundfonts/default.sf2",
    "/usr/share/soundfonts/FluidR3_GM.sf2", "/usr/share/sounds/sf2/TimGM6mb.sf2", "/usr/local/share/soundfonts/default.sf2",
    "/opt/homebrew/share/soundfonts/default.sf2", "/usr/local/share/fluidsynth/default.sf2",
)


class Synth(NamedTuple):
    """How WAV is rendered: `program` None plays `soundfont` in this process (render/soundfont.py); otherwise the
    path of the fluidsynth program, used only where the in-process synthesizer cannot run (no soundfile)."""
    program: str | None
    soundfont: str


def find_synth() -> Synth:
    """The synthesizer and its General MIDI soundfont: $GUITARFORMER_SOUNDFONT, else the bundled one in process
    (else FluidSynth with a system .sf2, where soundfile, which decodes the bundled font's samples, cannot load)."""
    env = os.environ.get("GUITARFORMER_SOUNDFONT")
    if env and not Path(env).is_file():
        raise GuitarformerError(f"GUITARFORMER_SOUNDFONT={env} is not a file", "point it at a .sf2 or .sf3 soundfont")
    if soundfont.available():
        return Synth(None, env or str(soundfont.BUNDLED_SOUNDFONT))
    exe = shutil.which("fluidsynth")
    places = [env] if env else []
    places += list(SOUNDFONT_PLACES) + sorted(str(p) for d in ("/usr/share/sounds/sf2", "/usr/share/soundfonts")
                                              for p in Path(d).glob("*.sf2"))
    sf2 = next((p for p in places if p and Path(p).is_file()), None)
    if exe is None or sf2 is None:
        missing = "the fluidsynth program" if exe is None else "a General MIDI soundfont (.sf2)"
        raise GuitarformerError(f"--wav needs the soundfile package (not importable here) or {missing}",
                                "pip install soundfile (it decodes the soundfont guitarformer ships), or install "
                                "fluidsynth and a GM soundfont (e.g. apt install fluidsynth fluid-soundfont-gm)")
    return Synth(exe, sf2)


def render_wav(midi: Path, wav: Path, synth: Synth, rate: int = 44100) -> None:
    """MIDI -> 16-bit WAV at normal loudness without trailing silence: in process, or with FluidSynth (no audio
    device: -n -i, file renderer only) then finish_wav."""
    wav.parent.mkdir(parents=True, exist_ok=True)
    if synth.program is None:
        audio = soundfont.render(midi, rate, synth.soundfont)
        write_wav(wav, normalize_loudness(trim_silence(audio, rate)), rate)
        return
    r = subprocess.run([synth.program, "-ni", "-F", str(wav), "-r", str(rate), synth.soundfont, str(midi)],
                       capture_output=True, text=True)
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
