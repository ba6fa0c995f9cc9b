"""Audio and pictures of a part: WAV through FluidSynth, and the piano roll + audio + tab TensorBoard shows."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pretty_midi

from guitarformer.errors import GuitarformerError
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
    """MIDI -> WAV with FluidSynth (no audio device: -n -i, file renderer only)."""


    exe, sf2 = synth
    wav.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([exe, "-ni", "-F", str(wav), "-r", str(rate), sf2, str(midi)], capture_output=True, text=True)
    if r.returncode != 0 or not wav.is_file():
        raise GuitarformerError(f"fluidsynth failed on {midi}: {(r.stderr or r.stdout).strip()[-200:]}",
                                "check the soundfont with `fluidsynth -ni FONT.sf2 FILE.mid`")


def render_media(gs: GuitarScore, frets=None, fs: int = 16000) -> dict[str, Any]:
    """Piano roll (H, W uint8), audio (float32 in [-1, 1]) and ASCII tab of a part, for TensorBoard."""

    pm = pretty_midi.PrettyMIDI(io.BytesIO(gs.score.dumps_midi()))
    roll = pm.get_piano_roll(fs=16)[28:100][::-1]  # guitar-ish range, high notes on top
    img = (np.clip(roll / 127.0, 0, 1) * 255).astype(np.uint8) if roll.size else np.zeros((72, 1), np.uint8)
    audio = None
    if pm.instruments and pm.instruments[0].notes:
        audio = pm.synthesize(fs=fs).astype(np.float32)[: fs * 30]
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        audio = (audio / peak * 0.9 if peak > 0 else audio).reshape(1, -1)

    return {"piano_roll": img, "audio": audio, "sample_rate": fs, "tab": render_ascii_tab(gs, frets)}
