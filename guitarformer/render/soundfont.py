"""MIDI -> audio in this process from a SoundFont (render/sf2.py reads it), by default the General MIDI font the
package ships (the one the studio's page plays), so `--wav` needs no program installed.

Each track plays on a channel of its own (drums on channel 10, the kit bank). Every note sounds the samples its
preset's zones give it: resampled to its pitch (linear interpolation; loops held while the key is down), shaped by
the volume envelope (delay, attack, hold, decay, sustain, release), scaled by velocity, attenuation and the
channel's volume and expression, panned into stereo and mixed. Pitch bends (with the bend range RPN 0 sets) move a
note while it sounds. A note is one numpy pass over its samples; not played: filters, LFOs, the modulation
envelope, modulators beyond the defaults above, reverb and chorus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from importlib.resources import files
from pathlib import Path

import numpy as np
import symusic

from guitarformer.render import sf2

BUNDLED_SOUNDFONT = Path(str(files("guitarformer") / "studio" / "static" / "alphatab" / "soundfont" / "sonivox.sf3"))
DRUM_CHANNEL = 9  # channel 10, counted from 1
RELEASE_SECONDS = 2.0  # rendered after the last note ends so it rings out (trimmed to the sound after)
SILENT_DB = -100.0  # an envelope this far down has ended (the span SoundFont decay and release times cover)
CHOKE_SECONDS = 0.005  # how fast an exclusive class (an open hi-hat under a closed one) cuts the older note
VOLUME, PAN, EXPRESSION = 7, 10, 11  # MIDI controllers the default modulators read
DEFAULT_BEND_RANGE = 2.0  # semitones, until RPN 0 sets another


def available() -> bool:
    """Whether the in-process synthesizer can run here: SF3 samples need soundfile (libsndfile, Ogg Vorbis)."""
    try:
        import soundfile  # noqa: F401  (its wheel bundles libsndfile; a build without it raises OSError)
    except (ImportError, OSError):
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


@dataclass(frozen=True)
class Voice:
    """One sample a note sounds: seconds from the start of the piece, where the key lifts, its loudness and pan."""
    region: sf2.Region
    start: float
    off: float
    key: int
    velocity: int
    gain: float  # the channel's volume and expression at the onset
    pan: float  # the channel's pan at the onset, -1 (left) .. 1 (right)
    choke: float = math.inf  # when a later note of the same exclusive class cuts this one


@dataclass(frozen=True)
class Bends:
    """A track's pitch bend curve: from `times[i]` (seconds) on, `semitones[i]`."""
    times: np.ndarray
    semitones: np.ndarray


def step_value(times: np.ndarray, values: np.ndarray, t: float, default: float) -> float:
    """The value of a step curve at `t` (the last change at or before it), `default` before the first."""
    i = int(np.searchsorted(times, t, side="right")) - 1
    return float(values[i]) if i >= 0 else default


def controller(track, number: int) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) of one controller on a track, in time order."""
    cs = sorted((c.time, c.value) for c in track.controls if c.number == number)
    return np.array([t for t, _ in cs], dtype=np.float64), np.array([v for _, v in cs], dtype=np.float64)


def bend_curve(track) -> Bends:
    """The track's pitch bends in semitones, each scaled by the bend range RPN 0 (CC 101/100 = 0, then data entry
    CC 6 semitones and CC 38 cents) set before it."""
    events = sorted([(c.time, 0, c.number, c.value) for c in track.controls if c.number in (6, 38, 100, 101)]
                    + [(b.time, 1, -1, b.value) for b in track.pitch_bends], key=lambda e: e[:2])  # stable: an
    # instant's controllers keep their order (RPN select, then data entry) and come before its bends
    rpn, semis, cents = [127, 127], DEFAULT_BEND_RANGE, 0.0
    times, values = [], []
    for t, kind, number, value in events:
        if kind == 1:
            times.append(t)
            values.append(value / 8192.0 * (semis + cents / 100.0))
        elif number in (100, 101):
            rpn[number - 100] = value
        elif rpn == [0, 0]:
            semis, cents = (float(value), cents) if number == 6 else (semis, float(value))
    return Bends(np.array(times, dtype=np.float64), np.array(values, dtype=np.float64))


def track_voices(font: sf2.SoundFont, track, channel: int) -> list[Voice]:
    """Every voice a track's notes sound, exclusive classes (a kit's hi-hats) choking the notes before them."""
    bank = sf2.PERCUSSION_BANK if channel == DRUM_CHANNEL else 0
    vol, pan, expr = controller(track, VOLUME), controller(track, PAN), controller(track, EXPRESSION)
    voices, regions = [], {}
    for n in track.notes:
        key, vel = int(n.pitch), max(1, min(127, int(n.velocity)))
        if (key, vel) not in regions:
            regions[key, vel] = font.regions(bank, int(track.program) % 128, key, vel)
        t = float(n.time)
        gain = (step_value(*vol, t, 100) / 127) ** 2 * (step_value(*expr, t, 127) / 127) ** 2
        where = (step_value(*pan, t, 64) - 64) / 64
        voices += [Voice(r, t, t + max(float(n.duration), 0.0), key, vel, gain, where) for r in regions[key, vel]]
    classes: dict[int, list[int]] = {}
    for i, v in enumerate(voices):
        if v.region.gens[sf2.EXCLUSIVE_CLASS]:
            classes.setdefault(v.region.gens[sf2.EXCLUSIVE_CLASS], []).append(i)
    for members in classes.values():  # each voice cut by the class's next onset after its own
        starts = np.sort([voices[i].start for i in members])
        for i in members:
            later = int(np.searchsorted(starts, voices[i].start, side="right"))
            if later < starts.size:
                voices[i] = replace(voices[i], choke=float(starts[later]))
    return voices


def render(music: Path | symusic.Score, rate: int = 44100, soundfont: str | Path | None = None) -> np.ndarray:
    """A MIDI file (or a symusic Score) played with `soundfont` (default: the bundled GM font): float32 (2, N), the
    release of the last notes included, not yet trimmed or levelled (render.audio does that)."""
    font = sf2.load(soundfont or BUNDLED_SOUNDFONT)
    score = symusic.Score(str(music), ttype="second") if isinstance(music, (str, Path)) else music.to("second")
    end = max((float(n.time + n.duration) for tr in score.tracks for n in tr.notes), default=0.0)
    out = np.zeros((2, int(math.ceil((end + RELEASE_SECONDS) * rate))), dtype=np.float32)
    for tr, ch in zip(score.tracks, channels(score.tracks)):
        bends = bend_curve(tr)
        for v in track_voices(font, tr, ch):
            play(out, font.sample(v.region.sample), v, bends, rate)
    return out


@dataclass(frozen=True)
class Envelope:
    """The volume envelope of one voice, in seconds from its onset (decay and release: for the full SILENT_DB)."""
    delay: float
    attack: float
    hold: float
    decay: float
    sustain_db: float
    release: float

    @classmethod
    def of(cls, gens: tuple, key: int) -> Envelope:
        def seconds(timecents: float) -> float:
            return 2.0 ** (max(-12000.0, min(8000.0, timecents)) / 1200.0)

        return cls(seconds(gens[sf2.DELAY_VOL]), seconds(gens[sf2.ATTACK_VOL]),
                   seconds(gens[sf2.HOLD_VOL] + (60 - key) * gens[sf2.KEY_TO_HOLD]),
                   seconds(gens[sf2.DECAY_VOL] + (60 - key) * gens[sf2.KEY_TO_DECAY]),
                   max(0.0, min(144.0, gens[sf2.SUSTAIN_VOL] / 10.0)), seconds(gens[sf2.RELEASE_VOL]))

    def level(self, t: float) -> float:
        """Amplitude `t` seconds after the onset, the key still down."""
        peak = self.delay + self.attack + self.hold
        if t < self.delay + self.attack:
            return max(0.0, (t - self.delay) / self.attack)
        if t < peak:
            return 1.0
        return 10.0 ** (max(-self.sustain_db, SILENT_DB * (t - peak) / self.decay) / 20.0)

    def length(self, held: float) -> float:
        """Seconds from the onset until the release, begun `held` seconds in, has faded to silence."""
        level = self.level(held)
        if level <= 0.0:
            return held
        return held + self.release * max(0.0, 1.0 + 20.0 * math.log10(level) / -SILENT_DB)

    def curve(self, n: int, held: float, rate: int) -> np.ndarray:
        """Amplitude of a voice's `n` frames, its key lifted `held` seconds in: float32, segment by segment."""
        out = np.empty(n, dtype=np.float32)
        lift = min(n, int(round(held * rate)))
        peak = self.delay + self.attack + self.hold
        bounds = [min(lift, int(round(x * rate))) for x in (
            self.delay, self.delay + self.attack, peak, peak + self.decay * self.sustain_db / -SILENT_DB)]
        d, a, p, s = bounds[0], max(bounds[:2]), max(bounds[:3]), max(bounds)

        def seconds(lo: int, hi: int) -> np.ndarray:
            return np.arange(lo, hi, dtype=np.float32) / np.float32(rate)

        out[:d] = 0.0
        out[d:a] = (seconds(d, a) - self.delay) / self.attack
        out[a:p] = 1.0
        out[p:s] = np.exp((seconds(p, s) - peak) * np.float32(SILENT_DB / 20 * math.log(10) / self.decay))
        out[s:lift] = 10.0 ** (-self.sustain_db / 20.0)
        if lift < n:  # released: down SILENT_DB in `release` seconds, from where the key lifted
            fall = np.float32(SILENT_DB / 20 * math.log(10) / self.release)
            out[lift:] = self.level(held) * np.exp(seconds(0, n - lift) * fall)
        return out


def play(out: np.ndarray, sample: np.ndarray, v: Voice, bends: Bends, rate: int) -> None:
    """Mix one voice into `out` (2, N) in place."""
    g = v.region.gens
    held, cut = v.off - v.start, v.choke - v.start  # seconds the key is down; when a choke silences the voice
    env = Envelope.of(g, v.key)
    first = int(round(v.start * rate))
    n = min(out.shape[1] - first, int(math.ceil(min(env.length(held), cut + CHOKE_SECONDS) * rate)) + 1)
    if n <= 0 or sample.size < 2 or v.region.header.rate <= 0:
        return
    pos, n = positions(sample.size, v, bends, n, rate)
    if n <= 0:
        return
    pos = pos[:n]
    i = pos.astype(np.int64)
    frac = (pos - i).astype(np.float32)
    audio = sample[i] + (sample[np.minimum(i + 1, sample.size - 1)] - sample[i]) * frac
    velocity = g[sf2.VELOCITY] if g[sf2.VELOCITY] >= 0 else v.velocity
    gain = 10.0 ** (-max(0, g[sf2.ATTENUATION]) / 200.0) * (velocity / 127) ** 2 * v.gain  # centibels; velocity
    pan = max(-1.0, min(1.0, g[sf2.PAN] / 500.0 + v.pan))  # squared, as the default modulator's concave curve
    level = env.curve(n, held, rate)
    if cut * rate < n:  # choked, held or ringing: down SILENT_DB in CHOKE_SECONDS
        k = int(cut * rate)
        level[k:] *= np.exp(np.arange(n - k, dtype=np.float32) * np.float32(
            SILENT_DB / 20 * math.log(10) / (CHOKE_SECONDS * rate)))
    mono = audio * level * np.float32(gain)
    out[0, first:first + n] += mono * math.cos((pan + 1) * math.pi / 4)  # equal-power pan
    out[1, first:first + n] += mono * math.sin((pan + 1) * math.pi / 4)


def positions(size: int, v: Voice, bends: Bends, n: int, rate: int) -> tuple[np.ndarray, int]:
    """Where in the sample each output frame of a voice reads (frames, fractional), and how many frames it lasts
    before a sample without a loop (or past its loop, once released) runs out."""
    g, h = v.region.gens, v.region.header
    start = max(0, g[sf2.START_OFFSET] + 32768 * g[sf2.START_COARSE])
    end = min(size, size + g[sf2.END_OFFSET] + 32768 * g[sf2.END_COARSE])
    loop_start = h.loop_start + g[sf2.LOOP_START_OFFSET] + 32768 * g[sf2.LOOP_START_COARSE]
    loop_end = h.loop_end + g[sf2.LOOP_END_OFFSET] + 32768 * g[sf2.LOOP_END_COARSE]
    key = g[sf2.KEYNUM] if g[sf2.KEYNUM] >= 0 else v.key
    root = g[sf2.ROOT_KEY] if g[sf2.ROOT_KEY] >= 0 else (h.pitch if h.pitch <= 127 else 60)
    cents = (key - root) * g[sf2.SCALE_TUNING] + 100 * g[sf2.COARSE_TUNE] + g[sf2.FINE_TUNE] + h.correction
    step = 2.0 ** (cents / 1200.0) * h.rate / rate
    mode = g[sf2.SAMPLE_MODES] & 3
    looped = mode in (1, 3) and start <= loop_start < loop_end <= end
    bent = bends.times.size and bends.times[0] <= v.start + n / rate  # a bend in force at some point of the note
    if not looped and not bent:  # read no further than the sample goes
        n = min(n, int(math.ceil(max(0, end - 1 - start) / step)) + 1)
    if bent:
        at = np.searchsorted(bends.times, v.start + np.arange(n) / rate, side="right") - 1
        steps = step * 2.0 ** (np.where(at >= 0, bends.semitones[np.maximum(at, 0)], 0.0) / 12.0)
        pos = start + np.concatenate(([0.0], np.cumsum(steps[:-1])))
    else:
        pos = start + step * np.arange(n, dtype=np.float64)
    held = 0  # frames that loop (all of them for mode 1; mode 3 until the key lifts, then on to the end)
    if looped:
        held = n if mode == 1 else min(n, int(round((v.off - v.start) * rate)))
        first = int(np.searchsorted(pos[:held], loop_end))  # positions only grow until they are wrapped
        if held > first:
            unwrapped = pos[held - 1]
            pos[first:held] = loop_start + np.mod(pos[first:held] - loop_start, loop_end - loop_start)
            pos[held:] += pos[held - 1] - unwrapped
    return pos, held + int(np.searchsorted(pos[held:], end - 1))
