"""ASCII tab reader: fixtures written for this project, plus the classtab corpus when it is checked out."""

from pathlib import Path

import pytest

from guitarformer.data.ascii_tab import read_ascii_tab
from guitarformer.data.score import STANDARD_TUNING, TUNINGS
from guitarformer.errors import SkipFile

FIX = Path(__file__).parent / "fixtures" / "tabs"
CLASSTAB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "guitar" / "classtab" / "app" / "tabs"


def _check_frets(gs):
    n = len(gs.tuning)
    assert len(gs.frets) == len(gs.track.notes)
    for note, (s, f) in zip(gs.track.notes, gs.frets):
        assert 1 <= s <= n and 0 <= f <= 24
        assert note.pitch == gs.tuning[n - s] + gs.capo + f


def test_riff_notes_and_techniques():
    (gs,) = read_ascii_tab(FIX / "riff.txt")
    assert gs.source_format == "ascii_tab" and gs.tuning == STANDARD_TUNING and gs.capo == 0
    _check_frets(gs)
    # bar 1: A3 A5 D2 D4 D5 h D7 p D5 A5; bar 2: E0+A3, A5 (slide target is a note), A5, b7 is a bend
    # target (no new note), x is dead (skipped), E12.
    # Notes are in onset order, then by string number.
    assert gs.frets == [(5, 3), (5, 5), (4, 2), (4, 4), (4, 5), (4, 7), (4, 5), (5, 5),
                        (5, 3), (6, 0), (5, 5), (5, 5), (6, 12)]
    assert gs.track.notes[0].time == 0
    onsets = [n.time for n in gs.track.notes]
    assert onsets == sorted(onsets)
    # Two equal-width bars: the second bar starts one 4/4 bar (4 * 480 ticks) after the first.
    assert gs.track.notes[8].time == 4 * 480
    assert gs.score.tempos[0].qpm == 100


def test_seven_string():
    (gs,) = read_ascii_tab(FIX / "seven_string.txt")
    assert gs.tuning == TUNINGS["seven-string"]
    _check_frets(gs)
    assert gs.track.notes[0].pitch == 35  # open low B


def test_drop_d_from_labels():
    (gs,) = read_ascii_tab(FIX / "drop_d.txt")
    assert gs.tuning == TUNINGS["drop-d"]
    assert gs.track.notes[0].pitch in (38, 45, 50)
    _check_frets(gs)


def test_low_a_below_a_string(tmp_path):
    """Labels A A D G B E (Dyens' low-A tuning): the bottom A is an octave below the fifth string."""
    lines = ["E|-----------|", "B|-----------|", "G|-----------|", "D|-----------|", "A|---0-------|", "A|-------0---|"]
    (tmp_path / "low_a.txt").write_text("\n".join(lines) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "low_a.txt")
    assert gs.tuning == (33, 45, 50, 55, 59, 64)
    assert sorted(n.pitch for n in gs.track.notes) == [33, 45]
    _check_frets(gs)


@pytest.mark.parametrize("text,tuning", [
    ("Sonata No. 2 in G, Op. 34 no.2 in G", STANDARD_TUNING),  # a title, not a retuned string
    ("Tuning: 6th string to D", TUNINGS["drop-d"]),
    ("(6) = D", TUNINGS["drop-d"]),
])
def test_string_tuning_from_text(tmp_path, text, tuning):
    lines = [text, ""] + ["|-----------|"] * 5 + ["|---0-------|"]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "t.txt")
    assert gs.tuning == tuning
    _check_frets(gs)


def test_multistaff_with_lyrics_and_capo():
    (gs,) = read_ascii_tab(FIX / "lyrics_multistaff.txt")
    assert gs.capo == 2 and gs.extra["staves"] == 2
    _check_frets(gs)
    # Staff two continues after staff one's two bars; lyrics and chord names add no notes.
    assert len(gs.track.notes) == 12 + 10 + 12 + 5
    assert max(n.time for n in gs.track.notes) >= 3 * 4 * 480


@pytest.mark.parametrize("name", ["bass.txt", "chords.txt"])
def test_not_guitar_is_skipped(name):
    with pytest.raises(SkipFile):
        read_ascii_tab(FIX / name)


@pytest.mark.skipif(not CLASSTAB.is_dir(), reason="shared classtab corpus not checked out")
def test_classtab_ok_rate():
    files = sorted(CLASSTAB.glob("*.txt"))[::10]  # every 10th file keeps the test quick
    ok = 0
    for f in files:
        try:
            for gs in read_ascii_tab(f):
                _check_frets(gs)
            ok += 1
        except SkipFile:
            pass
    assert ok / len(files) >= 0.95
