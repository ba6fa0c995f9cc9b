"""Facts about the instrument, defined once: tunings, the fret range, General MIDI programs, ticks."""

from __future__ import annotations

import re

from guitarformer.errors import GuitarformerError

TPQ = 480  # ticks per quarter for every score we build ourselves (Guitar Pro, music21, ASCII tab, corpus)

# MIDI pitches of the open strings, lowest string first.
STANDARD_TUNING: tuple[int, ...] = (40, 45, 50, 55, 59, 64)
TUNINGS: dict[str, tuple[int, ...]] = {
    "standard": STANDARD_TUNING,
    "drop-d": (38, 45, 50, 55, 59, 64),
    "half-step-down": (39, 44, 49, 54, 58, 63),
    "d-standard": (38, 43, 48, 53, 57, 62),
    "drop-c": (36, 43, 48, 53, 57, 62),
    "open-g": (38, 43, 50, 55, 59, 62),
    "open-d": (38, 45, 50, 54, 57, 62),
    "dadgad": (38, 45, 50, 55, 57, 62),
    "seven-string": (35, 40, 45, 50, 55, 59, 64),
}
GUITAR_PROGRAM = 25  # General MIDI: Acoustic Guitar (steel)
# General MIDI Level 1 instrument names, by 0-based program number (a MIDI track is named after its instrument).
GM_PROGRAM_NAMES: tuple[str, ...] = (
    "Acoustic Grand Piano", "Bright Acoustic Piano", "Electric Grand Piano", "Honky-tonk Piano",
    "Electric Piano 1", "Electric Piano 2", "Harpsichord", "Clavinet",
    "Celesta", "Glockenspiel", "Music Box", "Vibraphone", "Marimba", "Xylophone", "Tubular Bells", "Dulcimer",
    "Drawbar Organ", "Percussive Organ", "Rock Organ", "Church Organ", "Reed Organ", "Accordion", "Harmonica",
    "Tango Accordion",
    "Acoustic Guitar (nylon)", "Acoustic Guitar (steel)", "Electric Guitar (jazz)", "Electric Guitar (clean)",
    "Electric Guitar (muted)", "Overdriven Guitar", "Distortion Guitar", "Guitar Harmonics",
    "Acoustic Bass", "Electric Bass (finger)", "Electric Bass (pick)", "Fretless Bass", "Slap Bass 1",
    "Slap Bass 2", "Synth Bass 1", "Synth Bass 2",
    "Violin", "Viola", "Cello", "Contrabass", "Tremolo Strings", "Pizzicato Strings", "Orchestral Harp", "Timpani",
    "String Ensemble 1", "String Ensemble 2", "Synth Strings 1", "Synth Strings 2", "Choir Aahs", "Voice Oohs",
    "Synth Voice", "Orchestra Hit",
    "Trumpet", "Trombone", "Tuba", "Muted Trumpet", "French Horn", "Brass Section", "Synth Brass 1", "Synth Brass 2",
    "Soprano Sax", "Alto Sax", "Tenor Sax", "Baritone Sax", "Oboe", "English Horn", "Bassoon", "Clarinet",
    "Piccolo", "Flute", "Recorder", "Pan Flute", "Blown Bottle", "Shakuhachi", "Whistle", "Ocarina",
    "Lead 1 (square)", "Lead 2 (sawtooth)", "Lead 3 (calliope)", "Lead 4 (chiff)", "Lead 5 (charang)",
    "Lead 6 (voice)", "Lead 7 (fifths)", "Lead 8 (bass + lead)",
    "Pad 1 (new age)", "Pad 2 (warm)", "Pad 3 (polysynth)", "Pad 4 (choir)", "Pad 5 (bowed)", "Pad 6 (metallic)",
    "Pad 7 (halo)", "Pad 8 (sweep)",
    "FX 1 (rain)", "FX 2 (soundtrack)", "FX 3 (crystal)", "FX 4 (atmosphere)", "FX 5 (brightness)",
    "FX 6 (goblins)", "FX 7 (echoes)", "FX 8 (sci-fi)",
    "Sitar", "Banjo", "Shamisen", "Koto", "Kalimba", "Bagpipe", "Fiddle", "Shanai",
    "Tinkle Bell", "Agogo", "Steel Drums", "Woodblock", "Taiko Drum", "Melodic Tom", "Synth Drum", "Reverse Cymbal",
    "Guitar Fret Noise", "Breath Noise", "Seashore", "Bird Tweet", "Telephone Ring", "Helicopter", "Applause",
    "Gunshot",
)
MAX_FRET = 24
# Every pitch the tokenizers cover, end exclusive: E1 (a bass's low E) .. C7 (room above fret 24 of a high E).
TOKEN_PITCH_RANGE = (28, 97)


def playable_range(tuning: tuple[int, ...], capo: int = 0, frets: int = MAX_FRET) -> tuple[int, int]:
    """Lowest and highest pitch a guitar in `tuning` plays: the lowest open string (at the capo) to the highest
    string's last fret (frets count from the nut here; a capo does not add frets)."""
    return min(tuning) + capo, max(tuning) + frets
GUITAR_PROGRAMS = range(24, 32)  # General MIDI guitars, 0-based
BASS_PROGRAMS = range(32, 40)
BASS_TUNING: tuple[int, ...] = (28, 33, 38, 43)  # E1 A1 D2 G2
MUTED_GUITAR_PROGRAM = 28  # General MIDI's Electric Guitar (muted): how MIDI writes a palm-muted part
# Tunings a part that names none (MIDI) is given by its lowest note: the first whose low string reaches it.
LOW_TUNINGS = ("standard", "drop-d", "drop-c", "seven-string")
PITCH_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
LOWEST_OPEN, HIGHEST_OPEN = 20, 90  # open strings a tuning may have (G#0..F#6): 7-8 strings and baritones fit


def tuning_for_lowest(pitch: int) -> tuple[int, ...]:
    """The tuning a guitar part whose lowest note is `pitch` is played in, when its file names none: standard
    where it reaches, else drop D, drop C, then a 7-string; a part lower than a 7-string's B stays in standard
    (its lowest notes then lie off the neck, as before)."""
    for name in LOW_TUNINGS:
        if min(TUNINGS[name]) <= pitch:
            return TUNINGS[name]
    return STANDARD_TUNING


def fret_of(pitch: int, string: int, tuning: tuple[int, ...], capo: int = 0) -> int:
    """Fret (from the capo, 0 = open) that plays `pitch` on `string` (1 = the highest string, as tabs number
    them); -1 when the string is out of range or the pitch lies below it."""
    n = len(tuning)
    if not 1 <= string <= n:
        return -1
    f = pitch - tuning[n - string] - capo
    return f if f >= 0 else -1


def pitch_of(string: int, fret: int, tuning: tuple[int, ...], capo: int = 0) -> int:
    """MIDI pitch of `fret` (from the capo) on `string` (1 = the highest string)."""
    return tuning[len(tuning) - string] + capo + fret


def program_name(program: int, is_drum: bool = False) -> str:
    """The General MIDI name of a 0-based program ("Distortion Guitar" for 30); "Drums" for a drum track."""
    return "Drums" if is_drum else GM_PROGRAM_NAMES[program] if 0 <= program < 128 else f"Program {program}"


def pitch_name(pitch: int) -> str:
    """'E2' for MIDI 40 (scientific pitch notation, C4 = 60)."""
    return f"{PITCH_NAMES[pitch % 12]}{pitch // 12 - 1}"


def parse_tuning(spec: str) -> tuple[int, ...]:
    """A tuning: a name (`tuning_lines()` lists them) or the open strings low to high, as MIDI numbers or note
    names, separated by commas or spaces: "38,45,50,55,59,64", "38 45 50 55 59 64", "D2 A2 D3 G3 B3 E4".
    Note names without octaves ("D A D G B E", "DADGBE") climb from the lowest string, which sits at B1..A#2."""
    key = spec.strip().lower().replace("_", "-").replace(" ", "-")
    if key in TUNINGS:
        return TUNINGS[key]
    examples = "38,45,50,55,59,64, D2 A2 D3 G3 B3 E4 or D A D G B E"
    parts = [p for p in re.split(r"[,;\s]+", spec.strip()) if p]
    if len(parts) == 1:  # "DADGBE", "EbAbDbGbBbEb": note names run together (all lower case: b is the note)
        word = parts[0].upper() if parts[0].islower() else parts[0]
        if re.fullmatch(r"(?:[A-G][#b]?){2,}", word):
            parts = re.findall(r"[A-G][#b]?", word)
    notes = _open_strings(parts)
    if notes is None:
        raise GuitarformerError(f"unknown tuning {spec!r}",
                                f"use a name ({', '.join(TUNINGS)}) or the open strings low to high, e.g. {examples}")
    if not 4 <= len(notes) <= 8:
        raise GuitarformerError(f"tuning {spec!r} has {len(notes)} string{'s' if len(notes) != 1 else ''}: "
                                "a guitar tuning needs 4-8", f"give every open string, low to high, e.g. {examples}")
    wild = [n for n in notes if not LOWEST_OPEN <= n <= HIGHEST_OPEN]
    if wild:
        raise GuitarformerError(f"tuning {spec!r}: open string {wild[0]} ({pitch_name(wild[0])}) is outside "
                                f"{LOWEST_OPEN}..{HIGHEST_OPEN} ({pitch_name(LOWEST_OPEN)}..{pitch_name(HIGHEST_OPEN)})",
                                "give MIDI numbers (E2 = 40) or note names with octaves (E2), low to high")
    return tuple(sorted(notes))


def tuning_lines() -> list[str]:
    """One line per named tuning: its name, open strings low to high as notes and as MIDI numbers."""
    width = max(map(len, TUNINGS))
    return [f"{name:<{width}}  {' '.join(pitch_name(p) for p in notes):<24} {','.join(map(str, notes))}"
            for name, notes in TUNINGS.items()]


def _open_strings(parts: list[str]) -> list[int] | None:
    """MIDI pitches of the open strings written as numbers, or note names with or without octaves; None when a
    part is neither (or names mix both forms)."""
    if not parts:
        return None
    if all(re.fullmatch(r"\d{1,3}", p) for p in parts):
        return [int(p) for p in parts]
    named = [re.fullmatch(r"([A-Ga-g])([#b]?)(-?\d)?", p) for p in parts]
    if not all(named) or len({m.group(3) is None for m in named}) > 1:
        return None
    classes = [(PITCH_NAMES.index(m.group(1).upper()) + {"#": 1, "b": -1, "": 0}[m.group(2)]) % 12 for m in named]
    if named[0].group(3) is not None:  # E2: pitch class + 12 * (octave + 1); Cb4 and B#3 cross the octave
        return [12 * (int(m.group(3)) + 1) + c + {"B#": 12, "Cb": -12}.get(m.group(1).upper() + m.group(2), 0)
                for m, c in zip(named, classes)]
    notes = [35 + (classes[0] - 35) % 12]  # the lowest string: B1 (35) .. A#2 (46)
    for c in classes[1:]:  # each next string: the nearest pitch of its class above the previous string
        notes.append(notes[-1] + ((c - notes[-1]) % 12 or 12))
    return notes
