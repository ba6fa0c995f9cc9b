"""The riffs the server made, by id: their files (downloads name an id and a kind, never a path) and their
parts (so Regenerate fills bars of exactly the riff on the page).

Each riff gets a folder under one temporary root; the oldest riffs are dropped past `keep`, so a studio left
open for a day holds a bounded number of files.
"""

from __future__ import annotations

import re
import secrets
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from guitarformer.errors import GuitarformerError
from guitarformer.music.score import GuitarScore

# kind -> file name in a riff's folder; the kinds the API serves
KINDS = {"gp": "riff.gp5", "midi": "riff.mid", "tab": "riff.txt", "wav": "riff.wav"}
MEDIA_TYPES = {"gp": "application/x-guitar-pro", "midi": "audio/midi", "tab": "text/plain; charset=utf-8",
               "wav": "audio/wav"}
ID_PATTERN = re.compile(r"^[0-9a-f]{16}$")


class UnknownRiff(GuitarformerError):
    """No such riff or file on this server (answered with 404)."""


@dataclass
class StoredRiff:
    id: str
    folder: Path
    score: GuitarScore | None = None  # the part the model wrote (continued or regenerated)
    files: dict[str, Path] = field(default_factory=dict)
    parts: list[GuitarScore] = field(default_factory=list)  # every part, in its files' track order: `score` among them
    edited: int = 0  # `score`'s place in `parts`


class RiffStore:
    """Riff folders under `root`, newest last; at most `keep` of them."""

    def __init__(self, root: Path, keep: int = 500):
        self.root, self.keep = Path(root), keep
        self.root.mkdir(parents=True, exist_ok=True)
        self._riffs: OrderedDict[str, StoredRiff] = OrderedDict()
        self._lock = threading.Lock()

    def new(self) -> StoredRiff:
        """A fresh, empty riff folder (the oldest riffs go past `keep`)."""
        riff_id = secrets.token_hex(8)
        riff = StoredRiff(riff_id, self.root / riff_id)
        riff.folder.mkdir()
        with self._lock:
            self._riffs[riff_id] = riff
            while len(self._riffs) > self.keep:
                _, old = self._riffs.popitem(last=False)
                shutil.rmtree(old.folder, ignore_errors=True)
        return riff

    def discard(self, riff: StoredRiff) -> None:
        with self._lock:
            self._riffs.pop(riff.id, None)
        shutil.rmtree(riff.folder, ignore_errors=True)

    def get(self, riff_id: str) -> StoredRiff:
        """The riff with this id; a clear error for an unknown (or expired) one."""
        with self._lock:
            riff = self._riffs.get(riff_id) if ID_PATTERN.match(riff_id or "") else None
        if riff is None:
            raise UnknownRiff(f"no riff {riff_id!r} on this server (unknown, or dropped as one of the oldest)",
                                    "generate it again, or use an id a /api/sample answer gave")
        return riff

    def file(self, riff_id: str, kind: str) -> Path:
        """The file of `kind` the server wrote for this riff."""
        riff = self.get(riff_id)
        if kind not in KINDS:
            raise UnknownRiff(f"no file kind {kind!r}", f"ask for one of {', '.join(KINDS)}")
        path = riff.files.get(kind)
        if path is None or not path.is_file():
            raise UnknownRiff(f"riff {riff_id} has no {kind} file",
                                    "wav needs soundfile (or fluidsynth) on the server; the page renders WAV itself")
        return path

    def __len__(self) -> int:
        return len(self._riffs)
