"""MIDI -> audio in this process with TinySoundFont, from the General MIDI SoundFont the package ships (the one the
studio's page plays), so `--wav` needs no program installed.

Each track plays on a channel of its own (drums on channel 10, the kit bank); every note, program, pitch bend and
controller is sent at its sample, the synthesizer rendering the stretch between two events in one call.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import numpy as np
import symusic

from guitarformer.errors import GuitarformerError

BUNDLED_SOUNDFONT = Path(str(files("guitarformer") / "studio" / "static" / "alphatab" / "soundfont" / "sonivox.sf3"))
DRUM_CHANNEL = 9  # channel 10, counted from 1
RELEASE_SECONDS = 2.0  # rendered after the last event so the last notes ring out (trimmed to the sound after)
NOTE_OFF, CONTROL, PITCH_BEND, NOTE_ON = range(4)  # at one instant: offs first, so a repeated note sounds again


def available() -> bool:
    """Whether the in-process synthesizer can be imported here."""
    try:
        import tinysoundfont  # noqa: F401  (optional at import time: FluidSynth is the fallback)
    except ImportError:
        return False
    return True


def channels(tracks) -> list[int]:
    """A MIDI channel per track: drums on 10, the others in turn on the 15 other channels."""
    melodic = [c for c in range(16) if c != DRUM_CHANNEL]
    out, k = [], 0
    for tr in tracks:
        if tr.is_drum:
            out.append(DRUM_CHANNEL)
        else:
            out.append(melodic[k % len(melodic)])
            k += 1
    return out


def events(score: symusic.Score, rate: int) -> list[tuple[int, int, int, int, int]]:
    """(sample, kind, channel, a, b) of every note on/off, controller and pitch bend, in playing order. `score`
    in seconds."""
    out = []
    for tr, ch in zip(score.tracks, channels(score.tracks)):
        for n in tr.notes:
            start = int(round(n.time * rate))
            out.append((start, NOTE_ON, ch, int(n.pitch), max(1, min(127, int(n.velocity)))))
            out.append((max(start + 1, int(round((n.time + n.duration) * rate))), NOTE_OFF, ch, int(n.pitch), 0))
        out += [(int(round(c.time * rate)), CONTROL, ch, int(c.number), int(c.value)) for c in tr.controls]
        out += [(int(round(b.time * rate)), PITCH_BEND, ch, max(0, min(16383, int(b.value) + 8192)), 0)
                for b in tr.pitch_bends]
    out.sort()
    return out


def render(music: Path | symusic.Score, rate: int = 44100, soundfont: str | Path | None = None) -> np.ndarray:
    """A MIDI file (or a symusic Score) played with `soundfont` (default: the bundled GM font): float32 (2, N), the
    release of the last notes included, not yet trimmed or levelled (render.audio does that)."""
    import tinysoundfont  # optional: render.audio checks `available()` first

    score = symusic.Score(str(music), ttype="second") if isinstance(music, (str, Path)) else music.to("second")
    synth = tinysoundfont.Synth(samplerate=rate)
    try:
        font = synth.sfload(str(soundfont or BUNDLED_SOUNDFONT))
    except Exception as e:  # TinySoundFont raises its own exception types for a file it cannot read
        raise GuitarformerError(f"cannot load the soundfont {soundfont or BUNDLED_SOUNDFONT}: {e}",
                                "point GUITARFORMER_SOUNDFONT at a General MIDI .sf2/.sf3 file") from None
    for tr, ch in zip(score.tracks, channels(score.tracks)):
        synth.program_select(ch, font, 0, int(tr.program) % 128, is_drums=tr.is_drum)  # drums: the kit of that number
    chunks, at = [], 0
    for when, kind, ch, a, b in events(score, rate):
        if when > at:
            chunks.append(np.frombuffer(synth.generate_simple(when - at), dtype=np.float32).copy())
            at = when
        if kind == NOTE_ON:
            synth.noteon(ch, a, b)
        elif kind == NOTE_OFF:
            synth.noteoff(ch, a)
        elif kind == CONTROL:
            synth.control_change(ch, a, b)
        else:
            synth.pitchbend(ch, a)
    chunks.append(np.frombuffer(synth.generate_simple(int(RELEASE_SECONDS * rate)), dtype=np.float32).copy())
    return np.concatenate(chunks).reshape(-1, 2).T  # interleaved stereo -> (2, N)
