"""The drum kit, defined once: General MIDI percussion (a drum part's pitch is the kit piece it strikes, e.g. 36
kick, 38 snare, 42 closed hi-hat), the channel drums play on, and how a drum part is built from its hits."""

from __future__ import annotations

import numpy as np
import symusic

from guitarformer.music.score import GuitarScore

DRUM_CHANNEL = 9  # MIDI channel 10, counted from 0: General MIDI's percussion channel
DRUM_KEYS = range(27, 88)  # General MIDI Level 1/2 percussion keys (GM1's 35-81, GM2's 27-87)
GM_DRUMS: dict[int, str] = {
    35: "Acoustic Bass Drum", 36: "Bass Drum 1", 37: "Side Stick", 38: "Acoustic Snare", 39: "Hand Clap",
    40: "Electric Snare", 41: "Low Floor Tom", 42: "Closed Hi-Hat", 43: "High Floor Tom", 44: "Pedal Hi-Hat",
    45: "Low Tom", 46: "Open Hi-Hat", 47: "Low-Mid Tom", 48: "Hi-Mid Tom", 49: "Crash Cymbal 1", 50: "High Tom",
    51: "Ride Cymbal 1", 52: "Chinese Cymbal", 53: "Ride Bell", 54: "Tambourine", 55: "Splash Cymbal",
    56: "Cowbell", 57: "Crash Cymbal 2", 59: "Ride Cymbal 2",
}
DRUM_VOICES = 6  # the "strings" of a Guitar Pro percussion track: at most this many hits at one onset


def drum_name(key: int) -> str:
    """'Bass Drum 1' for 36; 'Drum 60' for a key without a name here."""
    return GM_DRUMS.get(key, f"Drum {key}")


def drum_part(hits: list[tuple[int, int, int, int]], score: symusic.Score, name: str, source_format: str,
              extra: dict | None = None) -> GuitarScore:
    """A drum part: `hits` (time, duration, GM key, velocity) on one is_drum track added to `score` (which holds
    the song's tempos and time signatures), sorted by (time, key). A drum part has no tuning and no frets."""
    hits = sorted(hits, key=lambda h: (h[0], h[2]))
    track = symusic.Track(name, 0, True)
    columns = np.array(hits, dtype=np.int32).reshape(-1, 4)
    track.notes = symusic.Note.from_numpy(columns[:, 0], np.maximum(1, columns[:, 1]), columns[:, 2].astype(np.int8),
                                          np.clip(columns[:, 3], 1, 127).astype(np.int8), "tick")
    score.tracks.append(track)
    return GuitarScore(score=score, tuning=(), source_format=source_format,
                       extra={"track_name": name, "program": 0, "role": "drums", **(extra or {})})
