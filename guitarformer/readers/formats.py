"""Which files the readers read: the format from a path's suffix, and what a file that should be text really is.

Shared by every way a file comes in (prepare, the commands, the contained reader), so that each says the same
thing about an unsupported or binary file."""

from __future__ import annotations

import os
from pathlib import Path

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
_FORMAT_LABELS = {"midi": "MIDI", "gp": "Guitar Pro", "gp6+": "Guitar Pro", "ascii_tab": "ASCII tab",
                  "musicxml": "MusicXML", "abc": "ABC"}


def detect_format(path: str | os.PathLike) -> str | None:
    """Format name for a path from its suffix (case-insensitive), or None if we do not read it."""
    return FORMATS.get(Path(path).suffix.lower())


def readable_types() -> str:
    """The file types `read_guitar` reads, from its own table: ".mid .midi (MIDI), .gp3 ... (Guitar Pro), ..."."""
    groups: dict[str, list[str]] = {}
    for suffix, fmt in FORMATS.items():
        groups.setdefault(_FORMAT_LABELS.get(fmt, fmt), []).append(suffix)
    return ", ".join(f"{' '.join(suffixes)} ({label})" for label, suffixes in groups.items())


def unsupported_reason(path: Path) -> str:
    return f"unsupported file type {path.suffix or '(no suffix)'}; readable: {readable_types()}"


# What a binary file that claims to be text (.txt, .abc, .xml) really is, from its first bytes.
_MAGIC = ((b"\x7fELF", "an ELF executable"), (b"MZ", "a Windows executable"), (b"PK\x03\x04", "a zip archive"),
          (b"%PDF", "a PDF document"), (b"MThd", "a MIDI file: rename it .mid"), (b"\x89PNG", "a PNG image"),
          (b"\xff\xd8\xff", "a JPEG image"), (b"BCFZ", "a Guitar Pro 6 file: rename it .gpx"),
          (b"\x18FICHIER GUITAR PRO", "a Guitar Pro 3-5 file: rename it .gp5"))
_TEXT_FORMATS = ("ascii_tab", "abc")
_CONTROL = set(range(32)) - {9, 10, 12, 13}


def binary_reason(path: Path) -> str | None:
    """Why a file that should be text is not ("binary file, not text (an ELF executable)"), or None for text.

    Binary: a NUL byte or more than 1 in 20 control characters in its first 8 KiB. Text in any 8-bit encoding
    passes; UTF-16 (which has NUL bytes) is recognised by its byte-order mark."""
    fmt = detect_format(path)
    if fmt not in _TEXT_FORMATS and not (fmt == "musicxml" and path.suffix.lower() != ".mxl"):
        return None
    with open(path, "rb") as f:
        head = f.read(8192)
    if not head or head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    if b"\0" not in head and sum(b in _CONTROL for b in head) * 20 <= len(head):
        return None
    what = next((name for magic, name in _MAGIC if head.startswith(magic)), None)
    return "binary file, not text" + (f" ({what})" if what else "")
