"""The drum key (General MIDI percussion) of a Guitar Pro 6-8 drum note.

GP7 and GP8 name each drum note's articulation, `<InstrumentArticulation>`: an index into its track's
InstrumentSet/Elements/Element/Articulations, whose `<OutputMidiNumber>` is the key (on the files checked the note's
`Midi` property and its Fret hold the same number); a note without one falls back on that `Midi` property. GP6 names
only the kit piece, `Element` and `Variation` properties on the note, and its file holds no table to look them up:
GP6_KIT, for a drum kit track (`<Instrument ref="drmkt"/>`; other GP6 percussion instruments number their elements
otherwise), is what the GP6 and GP5 versions of the same song in the shared test files agree on. Where both
versions disagree or a pair never occurs, the note has no key and is left out (the reader counts it).
"""

from __future__ import annotations

from xml.etree import ElementTree as ET

from guitarformer.music.drums import DRUM_KEYS

# (Element, Variation) -> drum key, each pair checked against the GP5 twin of a GP6 file (conversion/full-song).
# Element 5 is a floor tom the twin writes as 41 or 43 (low or high floor tom) for the same pair: 41 is kept.
GP6_KIT: dict[tuple[int, int], int] = {
    (0, 0): 36, (1, 0): 38, (5, 0): 41, (6, 0): 45, (7, 0): 47, (8, 0): 48, (10, 0): 42, (10, 2): 46, (11, 0): 44,
    (12, 0): 57, (13, 0): 49, (15, 0): 51, (15, 2): 53,
}
NO_KIT = (-1, -1, -1, -1)  # a note's (articulation, Midi, Element, Variation) when it names none of them


def kit_keys(track: ET.Element) -> tuple[list[int], dict[tuple[int, int], int]]:
    """The drum key of each articulation of a GP7/8 track, in the order notes index them (-1 where unreadable), and
    the (Element, Variation) table of a GP6 drum kit track (GP6_KIT; {} for any other track)."""
    instrument = track.find("Instrument")
    elements = GP6_KIT if instrument is not None and instrument.get("ref") == "drmkt" else {}
    keys = []
    for art in track.iterfind("InstrumentSet/Elements/Element/Articulations/Articulation"):
        try:
            keys.append(int((art.findtext("OutputMidiNumber") or "").strip()))
        except ValueError:
            keys.append(-1)
    return keys, elements


def drum_key(kit: tuple[int, int, int, int], track_kit: tuple[list[int], dict]) -> int | None:
    """The General MIDI key of a note naming (articulation, Midi, Element, Variation) on a track whose kit is
    `track_kit` (kit_keys); None when nothing it names gives a key in DRUM_KEYS."""
    articulation, midi, element, variation = kit
    keys, elements = track_kit
    for key in (keys[articulation] if 0 <= articulation < len(keys) else -1, midi,
                elements.get((element, variation), -1)):
        if key in DRUM_KEYS:
            return key
    return None
