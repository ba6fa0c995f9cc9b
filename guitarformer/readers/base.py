"""What every reader shares: size and time limits, part names, the score skeleton, timeouts, and how a note's
techniques sound in MIDI (the same in every reader that knows them)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path

import symusic

from guitarformer.errors import SkipFile
from guitarformer.music.guitar import TPQ
from guitarformer.music.score import Technique

DEFAULT_VELOCITY = 80
# Sanity bounds: a real guitar file is well under a few MB and a few hours long. A 3 KB MIDI whose
# delta times jump by 2^28 ticks would otherwise tokenize into hundreds of millions of Bar tokens.
MAX_FILE_BYTES = 64 << 20
MAX_QUARTERS = 100_000  # about 14 hours at 120 BPM
# A score's timing must make bars that are music, not corrupt data: real scores have at most a few thousand bars
# of a few quarter notes each. A 0/4 or 1/128 signature makes bars of a tick or so (millions of bars to walk), a
# 128/1 one bars of 512 quarters; a tempo near 0 stretches a bar over hours.
MAX_BARS = 50_000
MAX_BAR_QUARTERS = 64
MIN_BAR_QUARTERS = 1 / 16
TEMPO_RANGE = (1.0, 3000.0)  # quarter notes per minute
TRACK_CHOICES = ("guitar", "all")  # read_guitar(tracks=...)
BEND_PER_QUARTER_TONE = 2048  # MIDI pitch-bend units per quarter tone at the default +-2 semitone range
DEAD_NOTE_TICKS = TPQ // 8  # a dead (x) note sounds as a 1/32 click (at TPQ=480)
DEAD_NOTE_VELOCITY = 30


def check_timing(gs, name: str) -> None:
    """ValueError naming the problem when a part's length, time signatures or tempos are not plausible music
    (see MAX_QUARTERS, MAX_BARS, MAX_BAR_QUARTERS, MIN_BAR_QUARTERS, TEMPO_RANGE)."""
    score = gs.score
    tpq = max(1, score.ticks_per_quarter)
    end = score.end()
    if end / tpq > MAX_QUARTERS:
        raise ValueError(f"{name}: implausible length ({end / tpq:,.0f} quarter notes > {MAX_QUARTERS:,}); "
                         "corrupt timing data?")
    for tempo in score.tempos:
        if not TEMPO_RANGE[0] <= tempo.qpm <= TEMPO_RANGE[1]:  # also NaN
            raise ValueError(f"{name}: tempo {tempo.qpm:g} quarter notes a minute at tick {tempo.time} is outside "
                             f"{TEMPO_RANGE[0]:g}-{TEMPO_RANGE[1]:g} (corrupt tempo data)")
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures)
    bars = 0.0
    for k, (time, num, den) in enumerate(sigs):
        quarters = 4 * num / den if num > 0 and den > 0 else 0.0
        if not MIN_BAR_QUARTERS <= quarters <= MAX_BAR_QUARTERS:
            raise ValueError(f"{name}: time signature {num}/{den} at tick {time} makes a bar of {quarters:g} quarter "
                             f"notes (corrupt data: bars of {MIN_BAR_QUARTERS:g} to {MAX_BAR_QUARTERS} are read)")
        until = sigs[k + 1][0] if k + 1 < len(sigs) else end
        bars += max(0, until - time) / (quarters * tpq)
    if bars > MAX_BARS:
        raise ValueError(f"{name}: {bars:,.0f} bars (more than {MAX_BARS:,}): corrupt timing data?")


def copy_timing(src: symusic.Score, dst: symusic.Score) -> None:
    """Copy tempos and time signatures (src and dst share a TPQ), with MIDI's defaults if absent."""
    dst.tempos.extend(src.tempos.copy() if len(src.tempos) else [symusic.Tempo(0, 120.0)])
    if len(src.time_signatures):
        dst.time_signatures.extend(src.time_signatures.copy())
    else:
        dst.time_signatures.append(symusic.TimeSignature(0, 4, 4))


def new_score(tpq: int, tempos: list[tuple[int, float]], time_signatures: list[tuple[int, int, int]]) -> symusic.Score:
    score = symusic.Score(tpq)
    for time, qpm in tempos or [(0, 120.0)]:
        score.tempos.append(symusic.Tempo(time, float(qpm)))
    for time, num, den in time_signatures or [(0, 4, 4)]:
        score.time_signatures.append(symusic.TimeSignature(time, num, den))
    return score


def part_name(path: Path, track_name: str, n_parts: int) -> str:
    track_name = track_name.strip()
    return f"{path.stem} [{track_name}]" if track_name and n_parts > 1 else path.stem


def tab_text(raw: bytes) -> str:
    """A text tab's text: UTF-8, or where it is not, Windows' cp1252 (older tabs', whose dashes may be the em dash
    byte 0x97); an em or en dash counts as a tab line's dash."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("cp1252", errors="replace")
    return text.translate({0x2014: "-", 0x2013: "-"})


def no_guitar(n_tracks: int, tracks: str = "guitar", guitar: str = "programs 24-31",
              pitched: int | None = None) -> SkipFile:
    """Nothing to read as `tracks` asks: no guitar track (`guitar`: what counts as one in the format), or, with
    `tracks="all"` or no `pitched` (non-percussion) track at all, none but percussion (or none with notes), which
    --tracks all cannot help."""
    if tracks == "all" or pitched == 0:
        return SkipFile(f"no track but percussion, or none with notes, among {n_tracks} tracks: drums have no tab")
    return SkipFile(f"no guitar track ({guitar}) among {n_tracks} tracks; use --tracks all to keep every track")


def no_notes(n_kept: int, n_tracks: int, tracks: str = "guitar") -> SkipFile:
    """The tracks kept (`tracks`: guitar tracks, or every non-percussion one) hold no notes."""
    kind = "guitar track(s)" if tracks == "guitar" else "non-percussion track(s)"
    return SkipFile(f"no notes in the {n_kept} {kind} of {n_tracks} tracks")


@contextmanager
def time_limit(seconds: float, path: Path):
    """Raise TimeoutError after `seconds` (SIGALRM).

    A no-op off the main thread, without SIGALRM, or when the caller already armed a timer
    (prepare does, per file): then the caller's limit is the one that counts.
    """
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"{path.name}: gave up reading after {seconds:g} s (corrupt or pathological file?)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)



def dedupe_by_time(events: list[tuple]) -> list[tuple]:
    """Sort events by time and keep the last one at each time."""
    by_time = {}
    for ev in sorted(events, key=lambda e: e[0]):
        by_time[ev[0]] = ev
    return list(by_time.values())


def sounding(duration: int, velocity: int, tech: Technique, staccato: bool = False,
             accent: bool = False) -> tuple[int, int]:
    """MIDI length and velocity of a note played with these techniques (ticks at TPQ=480): dead notes are short
    soft clicks, palm mutes and staccato shorter, ghost notes softer, accents louder."""
    if tech.dead:
        duration, velocity = min(duration, DEAD_NOTE_TICKS), min(velocity, DEAD_NOTE_VELOCITY)
    if tech.palm_mute:
        duration, velocity = max(1, duration // 2), round(velocity * 0.85)
    if staccato:
        duration = max(1, duration // 2)
    if tech.ghost:
        velocity = round(velocity * 0.6)
    if accent:
        velocity += 15
    return max(1, duration), max(1, min(127, velocity))


def add_pitch_bends(track: symusic.Track, bent: list[tuple[int, int, tuple[tuple[float, float], ...]]]) -> None:
    """Bends as MIDI pitch bends on `track`: (note start, note duration, bend points) each, points as in
    Technique.bend; the bend is back at rest when the note ends (a pitch bend holds for the whole channel)."""
    events = []
    for start, duration, points in bent:
        for position, amount in points:
            value = round(amount * BEND_PER_QUARTER_TONE)
            events.append((start + round(duration * position), max(-8192, min(8191, value))))
        events.append((start + duration, 0))
    for t, value in sorted(events, key=lambda e: e[0]):
        track.pitch_bends.append(symusic.PitchBend(t, value))


def bend_points(amounts: list[float]) -> tuple[tuple[float, float], ...]:
    """Bend points from the amounts a bend goes through in order (bend and release: 0, 4, 0 quarter tones),
    spread evenly over the note and held at the last; () when the note never leaves its fret."""
    if not any(amounts):
        return ()
    k = len(amounts)
    return tuple((round(j / k, 4), a) for j, a in enumerate(amounts)) + ((1.0, amounts[-1]),)
