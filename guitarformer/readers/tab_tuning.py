"""A tab's tuning from its text (ascii_tab.py): a staff's line labels ("e B G D A E", "D2"), or a tuning line ("tuning:
D A D G B E", "drop D", "6=D"), as MIDI pitches of the open strings, lowest first."""

from __future__ import annotations

import re

from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS

_PC = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}
_NOTE_NAME = r"[A-Ga-g](?:#|b)?"


def pitch_class(name: str) -> int:
    pc = _PC[name[0].upper()]
    accidental = name[1:].rstrip("0123456789")
    if accidental in ("#", "♯"):
        pc += 1
    elif accidental in ("b", "♭"):
        pc -= 1
    return pc % 12


def label_pitch(name: str) -> int | None:
    """The open string's MIDI pitch from a label with an octave ("E4" 64, "D2" 38, as guitarformer writes them)."""
    if not name[-1].isdigit():
        return None
    return 12 * (int(name[-1]) + 1) + pitch_class(name)


def tuning_from_classes(pcs_low_first: list[int]) -> tuple[int, ...]:
    """Octave for each open string: the pitch of that class nearest the reference tuning's string."""
    ref = TUNINGS["seven-string"] if len(pcs_low_first) == 7 else STANDARD_TUNING
    out = []
    for pc, r in zip(pcs_low_first, ref):
        cands = [p for p in range(r - 8, r + 9) if p % 12 == pc]
        out.append(min(cands, key=lambda p: (abs(p - r), p)))
    # Guitar open strings rise from the lowest string up: a string at or above the one above it is an octave
    # lower ("A A D G B E" is Dyens' low A, A1, not two equal A2 strings).
    for i in range(len(out) - 2, -1, -1):
        while out[i] >= out[i + 1]:
            out[i] -= 12
    return tuple(out)


def labelled_tuning(pcs_low_first: list[int], stated: tuple[int, ...] | None) -> tuple[int, ...]:
    """The tuning a staff's line labels name (pitch classes, lowest string first), unless the text names the same
    strings in another order and the labels' order would drop a string below the text's lowest: two lines'
    labels swapped ("e B D G A D" under "tuning - D A D G B E" would read D1 A1 G2 D3 B3 E4)."""
    tuning = tuning_from_classes(pcs_low_first)
    if (stated is not None and len(stated) == len(tuning) and min(tuning) < min(stated)
            and sorted(p % 12 for p in stated) == sorted(pcs_low_first)):
        return stated
    return tuning


def text_tuning(text: str, n: int) -> tuple[int, ...] | None:
    """Tuning from free text: 'tuning: D A D G B E', 'drop D', '6=D' / '6th string to D'."""
    m = re.search(rf"tuning[^A-Ga-g\n]*((?:{_NOTE_NAME}[ \t,/-]*){{{n}}})(?![A-Za-z])", text, re.I)
    if m:
        pcs = [pitch_class(x) for x in re.findall(_NOTE_NAME, m.group(1))]
        fwd, rev = tuning_from_classes(pcs), tuning_from_classes(pcs[::-1])
        base = TUNINGS["seven-string"] if n == 7 else STANDARD_TUNING
        dist = lambda t: sum(abs(a - b) for a, b in zip(t, base))  # noqa: E731
        return fwd if dist(fwd) <= dist(rev) else rev
    tuning = list(TUNINGS["seven-string"] if n == 7 else STANDARD_TUNING)
    changed = False
    if re.search(r"\bdrop(?:ped)?[\s-]*d\b", text, re.I):
        tuning[0], changed = tuning[0] - 2, True
    # "6=D", "(6) = D", "6th string to D" / "6 string in D"; "to"/"in" only after the word string, so that
    # "op. 34 no. 2 in G" is not read as the 2nd string tuned to G.
    retuned = rf"(?:\(|\b)([1-7])(?:st|nd|rd|th)?\)?\s*(?:=|->|string\s*(?:=|to|->|in))\s*({_NOTE_NAME})(?![A-Za-z])"
    for num, name in re.findall(retuned, text):
        k = n - int(num)  # string number -> index from the lowest
        if 0 <= k < n:
            pc = pitch_class(name)
            cands = [p for p in range(tuning[k] - 6, tuning[k] + 6) if p % 12 == pc]
            if cands:
                near = [*STANDARD_TUNING, 64][min(k, 5)]
                tuning[k], changed = min(cands, key=lambda p: abs(p - near if n == 6 else 0)), True
    return tuple(tuning) if changed else None
