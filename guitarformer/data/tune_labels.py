"""What an ABC tune's header says about it: its type (the built-in corpus's style) and its key (``K:``).

Types come from the ``R:`` (rhythm) field, else from the title ("Abitha Muggins' Favorite -- Reel"), through one
table of spellings (`TUNE_TYPES`), and in a book printed section by section, from the typed tunes around it
(`section_types`); a tune none of these types has none. Keys come from music21's
reading of ``K:``, mode included ("A:dorian"); as a Key control value ("E:minor", vocab/controls.py) a mode keeps its
tonic and is major or minor by its third (dorian, phrygian, aeolian, locrian: minor; ionian, lydian, mixolydian:
major), which is what a key estimate from the notes finds for such a tune.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

from guitarformer.music.guitar import PITCH_NAMES

# Spelling in R: or the title -> type. Longest spellings are tried first ("slip jig" before "jig").
# Related dances share a type where the corpus has too few of one to learn it alone: clogs are hornpipes in
# Ryan's Mammoth, planxties, laments and songs are slow airs in O'Neill's, highland flings are flings.
TUNE_TYPES: dict[str, str] = {
    "reel": "reel", "double jig": "jig", "single jig": "jig", "jig": "jig", "slip jig": "slip-jig",
    "slipjig": "slip-jig", "hop jig": "slip-jig", "hornpipe": "hornpipe", "clog": "hornpipe",
    "strathspey": "strathspey", "highland fling": "fling", "fling": "fling",
    "polka": "polka", "waltz": "waltz", "air": "air", "planxty": "air", "lament": "air", "song": "air",
    "march": "march", "quickstep": "march", "set dance": "set-dance", "slide": "slide",
    "walkaround": "walkaround", "walk around": "walkaround", "schottische": "schottische",
    "mazurka": "mazurka",
}
_TYPE_RE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, TUNE_TYPES), key=len, reverse=True)) + r")s?\b", re.I)
_MINOR_MODES = {"minor", "aeolian", "dorian", "phrygian", "locrian"}
_MAJOR_MODES = {"major", "ionian", "lydian", "mixolydian"}


@dataclass(frozen=True)
class TuneHeader:
    """The header fields of one ABC tune that the corpus keeps (None where absent)."""

    number: str | None
    title: str | None
    rhythm: str | None


def read_headers(abc_text: str) -> list[TuneHeader]:
    """Each tune's X:, first T: and R: fields, in file order (a tune starts at an ``X:`` line)."""
    out: list[TuneHeader] = []
    for chunk in re.split(r"(?m)^X:", abc_text)[1:]:
        number = chunk.split("\n", 1)[0].strip() or None
        fields: dict[str, str] = {}
        for line in chunk.split("\n")[1:]:
            m = re.match(r"([A-Za-z]):\s*(.*)", line)
            if m and m.group(1) not in fields:
                fields[m.group(1)] = m.group(2).strip()
            if m and m.group(1) == "K":  # K: closes the header
                break
        out.append(TuneHeader(number, fields.get("T") or None, fields.get("R") or None))
    return out


def header_of(headers: list[TuneHeader], index: int, number: str | None, tunes: int) -> TuneHeader | None:
    """The header of the `index`-th of `tunes` tunes music21 read from a file: by position when music21 read as
    many tunes as the file has, else by its X: number."""
    if len(headers) == tunes and 0 <= index < len(headers):
        return headers[index]
    return next((h for h in headers if number is not None and h.number == str(number)), None)


def tune_type(rhythm: str | None, title: str | None) -> str | None:
    """A tune's type from its R: field, else its title; None when neither names one of `TUNE_TYPES`. The last
    spelling in the text wins: titles end with their type ("42d Highland Regiment Strathspey")."""
    for text in (rhythm, title):
        found = _TYPE_RE.findall(text or "")
        if found:
            return TUNE_TYPES[found[-1].lower()]
    return None


def section_types(numbered: list[tuple[int | None, str | None]]) -> list[str | None]:
    """Types for the tunes of a book that prints its tunes grouped by type (O'Neill's: airs, then jigs, slip jigs,
    reels, hornpipes), given (X: number, type or None) per tune: a tune without a type takes the type of the
    nearest typed tunes before and after it by number (the same number counts as both: some books number a tune
    twice) where the two agree (it sits inside that type's section);
    a tune at a boundary between sections, or without a number, keeps None."""
    typed = sorted((n, t) for n, t in numbered if n is not None and t)
    numbers = [n for n, _ in typed]
    out: list[str | None] = []
    for n, t in numbered:
        if t or n is None:
            out.append(t)
            continue
        lo, hi = bisect_right(numbers, n), bisect_left(numbers, n)  # typed tunes numbered <= n, and >= n
        below = typed[lo - 1][1] if lo > 0 else None
        above = typed[hi][1] if hi < len(typed) else None
        out.append(below if below is not None and below == above else None)
    return out


def key_label(m21score) -> str | None:
    """The tune's K: as "tonic:mode" ("A:dorian", "F#:minor"; sharps, as PITCH_NAMES), from the first key music21
    read; None for a tune without one (K:none, or a signature without a tonic)."""
    from music21 import key, pitch  # here: music21 takes a fifth of a second to import, and only the corpus needs it

    for k in m21score.recurse().getElementsByClass(key.Key):
        return f"{PITCH_NAMES[pitch.Pitch(k.tonic.name).pitchClass]}:{k.mode}"
    return None


def key_control(label: str | None) -> str | None:
    """A K: label as a Key control value: "A:dorian" -> "A:minor", "G:mixolydian" -> "G:major"; None for none."""
    if not label:
        return None
    tonic, _, mode = label.partition(":")
    if mode in _MINOR_MODES:
        return f"{tonic}:minor"
    if mode in _MAJOR_MODES:
        return f"{tonic}:major"
    return None


def read_abc_headers(path: str | Path) -> list[TuneHeader]:
    """`read_headers` of an ABC file (Latin-1, which reads any byte, as the collections' older files need)."""
    return read_headers(Path(path).read_text(encoding="latin-1"))
