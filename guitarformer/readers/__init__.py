"""Readers: one per format, one dispatch. `read_guitar(path)` returns every guitar part of a file; `read_song(path)`
every part it has (guitars, bass, drums, others) as one Song.

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
from guitarformer.music.song import Song
from guitarformer.readers.ascii_tab import read_ascii_tab
from guitarformer.readers.base import TRACK_CHOICES, check_timing
from guitarformer.readers.formats import FORMATS, detect_format
from guitarformer.readers.gpif import read_gpif
from guitarformer.readers.guitarpro import read_gp
from guitarformer.readers.limits import ReadLimits, check_notes, too_large
from guitarformer.readers.midi import read_midi


def read_guitar(path: str | os.PathLike, tracks: str = "guitar", include_bass: bool = False) -> list[GuitarScore]:
    """Read every guitar part of a file, in this process.

    tracks="guitar" keeps guitar parts only (plus bass when include_bass); tracks="all" keeps every
    part, drum parts too (MIDI and Guitar Pro; see GuitarScore.is_drum). Raises SkipFile for a usable-but-not-guitar or unsupported file, ReadLimitError
    for a file over the size limit or parts over the note limits (ReadLimits.from_env()), and an ordinary exception naming the problem for
    a corrupt one. Each reader bounds what a file may expand to; for a file from someone else (an upload, a
    command's argument) use `readers.contained.read_guitar_contained`, which also caps the read's time and
    memory in a child process.
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
    limits = ReadLimits.from_env()
    if limits.max_file_mb and size > limits.max_file_bytes:
        raise too_large(path.name, size, limits)
    if fmt in ("gp", "gp6+"):  # by content: a GP6-8 file saved with a .gp5 name is still read
        with open(path, "rb") as f:
            head = f.read(4)
        fmt = "gp6+" if head in (b"BCFZ", b"BCFS") or head[:2] == b"PK" else "gp"
    if fmt == "ascii_tab":
        parts = read_ascii_tab(path)
    else:
        reader = _notation().read_notation if fmt in ("musicxml", "abc") else {
            "midi": read_midi, "gp": read_gp, "gp6+": read_gpif}[fmt]
        parts = reader(path, tracks=tracks, include_bass=include_bass)
    check_notes(path.name, [len(gs.track.notes) for gs in parts], limits)  # before any work per note follows
    for gs in parts:
        check_timing(gs, path.name)
    return parts


def read_song(path: str | os.PathLike) -> Song:
    """Every part of a file (`read_guitar(path, tracks="all")`: guitars, bass, drums, others, each with its role) as a
    Song on the file's bar grid, in this process; for a file from someone else use
    `readers.contained.read_song_contained`."""
    return song_of(read_guitar(path, tracks="all"), Path(path))


def song_of(parts: list[GuitarScore], path: Path) -> Song:
    """The Song of the parts read from `path`."""
    return Song(parts, name=path.stem, source_format=parts[0].source_format if parts else "")


def _notation():
    """readers.notation, imported on first use: it imports music21, a fifth of a second that a command reading no
    MusicXML or ABC (sampling from the shipped model, a Guitar Pro file) should not wait for."""
    from guitarformer.readers import notation

    return notation


def __getattr__(name: str):
    if name == "from_music21":
        return _notation().from_music21
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMATS", "detect_format", "from_music21", "read_guitar", "read_song", "song_of"]
