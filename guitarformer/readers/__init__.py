"""Readers: one per format, one dispatch. `read_guitar(path)` returns every guitar part of a file.

Every reader returns a list of GuitarScore (one per guitar part). A file that is readable but not
usable (no guitar part, a format we cannot read) raises SkipFile(reason); corrupt data raises an
ordinary exception whose message names the file and the problem, so `prepare` can record it.

Conventions shared by the readers:
- Time is in ticks. GP, ASCII tab and music21 sources are written at TPQ=480; MIDI keeps its own TPQ.
- Each GuitarScore holds one track plus the song's tempos and time signatures (a 120 BPM, 4/4
  default is written when the source has none, which is what MIDI assumes anyway).
- Notes are sorted by (time, pitch); `frets` and `techniques`, where the source knows them, follow that order.
- Repeats are not expanded: a score plays straight through once, as written.
- Guitar Pro files are told apart by their bytes, not their suffix: a zip or BCFZ/BCFS container is GP6-8
  (gpif.py, with bcfz.py), anything else GP3-5 (guitarpro.py); both build their parts alike (gp_notes.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from guitarformer.errors import SkipFile
from guitarformer.music.score import GuitarScore
from guitarformer.readers.ascii_tab import read_ascii_tab
from guitarformer.readers.base import MAX_FILE_BYTES, MAX_QUARTERS, TRACK_CHOICES
from guitarformer.readers.gpif import read_gpif
from guitarformer.readers.guitarpro import read_gp
from guitarformer.readers.midi import read_midi
from guitarformer.readers.notation import from_music21, read_notation

FORMATS: dict[str, str] = {
    ".mid": "midi",
    ".midi": "midi",
    ".gp3": "gp",
    ".gp4": "gp",
    ".gp5": "gp",
    ".gpx": "gp6+",
    ".gp": "gp6+",
    ".txt": "ascii_tab",
    ".tab": "ascii_tab",
    ".musicxml": "musicxml",
    ".xml": "musicxml",
    ".mxl": "musicxml",
    ".abc": "abc",
}


def detect_format(path: str | os.PathLike) -> str | None:
    """Format name for a path from its suffix (case-insensitive), or None if we do not read it."""
    return FORMATS.get(Path(path).suffix.lower())


def read_guitar(path: str | os.PathLike, tracks: str = "guitar", include_bass: bool = False) -> list[GuitarScore]:
    """Read every guitar part of a file.

    tracks="guitar" keeps guitar parts only (plus bass when include_bass); tracks="all" keeps every
    pitched (non-drum) part. Raises SkipFile for a usable-but-not-guitar or unsupported file.
    """
    if tracks not in TRACK_CHOICES:
        raise ValueError(f"tracks must be one of {TRACK_CHOICES}, not {tracks!r}")
    path = Path(path)
    fmt = detect_format(path)
    if fmt is None:
        raise SkipFile(f"unsupported file type {path.suffix!r}; readable: {', '.join(sorted(FORMATS))}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    size = path.stat().st_size
    if size == 0:
        raise SkipFile("empty file (0 bytes)")
    if size > MAX_FILE_BYTES:
        raise SkipFile(f"file too large ({size / 2**20:.0f} MB > {MAX_FILE_BYTES >> 20} MB); "
                       "split it or convert it to MIDI")
    if fmt in ("gp", "gp6+"):  # by content: a GP6-8 file saved with a .gp5 name is still read
        with open(path, "rb") as f:
            head = f.read(4)
        fmt = "gp6+" if head in (b"BCFZ", b"BCFS") or head[:2] == b"PK" else "gp"
    if fmt == "ascii_tab":
        parts = read_ascii_tab(path)
    else:
        reader = {"midi": read_midi, "gp": read_gp, "gp6+": read_gpif, "musicxml": read_notation,
                  "abc": read_notation}[fmt]
        parts = reader(path, tracks=tracks, include_bass=include_bass)
    for gs in parts:
        quarters = gs.score.end() / max(1, gs.score.ticks_per_quarter)
        if quarters > MAX_QUARTERS:
            raise ValueError(f"{path.name}: implausible length ({quarters:,.0f} quarter notes > {MAX_QUARTERS:,}); "
                             "corrupt timing data?")
    return parts



__all__ = ["FORMATS", "detect_format", "from_music21", "read_guitar"]
