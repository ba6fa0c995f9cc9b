"""The user's files: ONE reader (any supported format, one clear error) and ONE writer chosen by the suffix.

Every command that takes a file (`tab`, `infill`, `sample --prompt`, the studio's uploads, the Python API) reads it
through `read_user_parts`, so a limit on what a file may cost (size, time, memory) plugs in here once.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.music.score import GuitarScore
from guitarformer.readers.contained import read_guitar_contained
from guitarformer.render.ascii_tab import render_ascii_tab, write_ascii_tab
from guitarformer.render.audio import Synth, find_synth, render_wav
from guitarformer.render.gp5 import write_gp5_parts
from guitarformer.render.midi import write_midi

READ_FIX = "pass a MIDI, Guitar Pro (3-8), ASCII tab, MusicXML or ABC file with a guitar part"


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


def read_user_parts(path: str | Path, tracks: str = "guitar", any_part: bool = False) -> list[GuitarScore]:
    """The parts of a user's file that have notes: its guitar parts (every part, drums too, with tracks="all"; with
    `any_part`, every part when the file has no guitar part, e.g. a melody to continue on guitar)."""
    path = Path(path)
    if not path.is_file():
        raise GuitarformerError(f"{path} does not exist" if not path.exists() else f"{path} is not a file", READ_FIX)
    try:
        try:  # in a child process under the read limits (size, time, memory): no file can take the machine
            parts = read_guitar_contained(path, tracks=tracks)
        except SkipFile:
            if not any_part or tracks == "all":
                raise
            parts = read_guitar_contained(path, tracks="all")
    except GuitarformerError:
        raise
    except SkipFile as e:
        reason = str(e)
        raise GuitarformerError(f"{path.name} is not readable music: {reason}",
                                None if "--tracks" in reason else READ_FIX) from None
    except Exception as e:  # the readers' own messages name the problem
        raise GuitarformerError(f"{path} is not readable music ({_first_line(e)})", READ_FIX) from None
    parts = [p for p in parts if len(p.track.notes)]
    if not parts:
        raise GuitarformerError(f"{path.name} has no notes", READ_FIX)
    return parts


def stringed(parts: list[GuitarScore], file: Path | str) -> list[GuitarScore]:
    """The parts a command can tab, finger or continue: all but the drum parts (GuitarformerError if none is left)."""
    out = [gs for gs in parts if not gs.is_drum]
    if not out:
        raise GuitarformerError(f"{Path(file).name} has only drum parts: drums have no strings to tab or continue",
                                READ_FIX)
    return out


def pick_track(parts: list[GuitarScore], track: str, file: Path | str, tracks: str = "guitar") -> GuitarScore:
    """The part `track` names: its number in the file's part list (1-based) or its track name."""
    name_of = Path(file).name
    names = [gs.extra.get("track_name") or gs.name for gs in parts]
    listing = ", ".join(f"{k + 1} {name!r}" for k, name in enumerate(names))
    more = "" if tracks == "all" else "; add --tracks all to choose among every track, not only guitars"
    if str(track).isdigit():
        k = int(track)
        if 1 <= k <= len(parts):
            return parts[k - 1]
        raise GuitarformerError(f"{name_of} has no track {k}: its tracks are {listing}",
                                f"pass --track 1 to {len(parts)}, or a track name{more}")
    key = track.strip().lower()
    hits = [gs for gs, name in zip(parts, names) if name.strip().lower() == key]
    hits = hits or [gs for gs, name in zip(parts, names) if key in name.lower()]
    if len(hits) == 1:
        return hits[0]
    problem = (f"--track {track!r} matches {len(hits)} tracks of {name_of}" if hits
               else f"{name_of} has no track named {track!r}")
    raise GuitarformerError(f"{problem}: its tracks are {listing}", f"pass a track number or a full name{more}")


def read_user_file(path: str | Path, track: str | None = None, tracks: str = "guitar",
                   any_part: bool = False) -> GuitarScore:
    """One part of a user's file: the one `track` names (number from 1, or name), else the first."""
    parts = stringed(read_user_parts(path, tracks, any_part), path)
    return parts[0] if track is None else pick_track(parts, track, path, tracks)


@dataclass
class UserSong:
    """A user's file as a command that edits one part of it sees it: every part the toolkit reads of it (each
    pitched track with notes, in the file's order) and the one being edited. The commands write the whole song
    back: the other parts as they were, the edited part with its new bars."""

    parts: list[GuitarScore]
    index: int  # the edited part's place in `parts`
    choices: int = 1  # the parts `track` chose among (the guitar parts, or every part with tracks="all")

    @property
    def part(self) -> GuitarScore:
        return self.parts[self.index]

    def with_part(self, gs: GuitarScore) -> list[GuitarScore]:
        """The song's parts with the edited one replaced by `gs`."""
        return [gs if k == self.index else p for k, p in enumerate(self.parts)]


def _same_part(a: GuitarScore, b: GuitarScore) -> bool:
    notes = lambda gs: [(n.time, n.duration, n.pitch) for n in gs.track.notes]  # noqa: E731
    key = lambda gs: (gs.extra.get("track_name"), gs.track.program, gs.tuning)  # noqa: E731 (names vary with the
    return key(a) == key(b) and notes(a) == notes(b)                               # number of parts read)


def read_user_song(path: str | Path, track: str | None = None, tracks: str = "guitar",
                   any_part: bool = False) -> UserSong:
    """The part `track` names (see `read_user_file`) within every part of the file (`tracks="all"`: drums too), so
    that a command editing it can write the rest of the song back unchanged."""
    read = read_user_parts(path, tracks, any_part)
    chosen_from = stringed(read, path)
    part = chosen_from[0] if track is None else pick_track(chosen_from, track, path, tracks)
    every = read
    if tracks != "all":
        try:
            every = read_user_parts(path, "all")
        except GuitarformerError:  # the guitar parts were read: the song is those
            every = read
    index = next((k for k, p in enumerate(every) if _same_part(p, part)), None)
    if index is None:  # not found among every part (a reader that tells them apart differently): the chosen ones
        every, index = chosen_from, chosen_from.index(part)
    return UserSong([part if k == index else p for k, p in enumerate(every)], index, len(chosen_from))


def write_score(gs: GuitarScore, path: str | Path, synth: Synth | None = None) -> Path:
    """Write `gs` in the format its suffix names (see `write_song`)."""
    return write_song([gs], 0, path, synth)


def write_band(parts: list[GuitarScore], path: str | Path, synth: Synth | None = None) -> Path:
    """A band's parts written by suffix: every part (MIDI, GP5, WAV, as `write_song`), every stringed part's tab one
    after the other (.txt/.tab), each under its name and tuning."""
    path = Path(path)
    if path.suffix.lower() not in (".txt", ".tab"):
        return write_song(parts, 0, path, synth)
    texts = [render_ascii_tab(gs, gs.frets) for gs in parts if not gs.is_drum]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n\n".join(texts))
    except OSError as e:
        raise GuitarformerError(f"cannot write {e.filename or path}: {e.strerror or e}",
                                "choose output paths in a writable folder") from None
    return path


def write_song(parts: list[GuitarScore], edited: int, path: str | Path, synth: Synth | None = None) -> Path:
    """Write a song in the format its suffix names: .mid/.midi and .gp5 every part, drums too (tempos, meters and the
    mark where generated bars begin from part `edited`), .txt/.tab (ASCII tab) part `edited` alone, .wav every part
    (the GM soundfont; `synth` from render.audio.find_synth, found here when not given). Missing folders are created."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".mid", ".midi", ".txt", ".tab", ".gp5", ".wav"):
        raise GuitarformerError(f"cannot write {path}: no writer for {suffix or 'a file without a suffix'}",
                                "name it .mid, .txt (ASCII tab), .gp5 (Guitar Pro 5) or .wav")
    gs = parts[edited]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix in (".mid", ".midi"):
            write_midi(parts, path, timing=gs)
        elif suffix in (".txt", ".tab"):
            write_ascii_tab(gs, path, gs.frets)
        elif suffix == ".gp5":  # marks the bar where generated notes begin, as the MIDI and tab do
            write_gp5_parts([(p, p.frets) for p in parts], path, timing=gs)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                midi = Path(tmp) / "audio.mid"
                write_midi(parts, midi, timing=gs)
                render_wav(midi, path, synth or find_synth())
    except OSError as e:
        raise GuitarformerError(f"cannot write {e.filename or path}: {e.strerror or e}",
                                "choose output paths in a writable folder") from None
    return path
