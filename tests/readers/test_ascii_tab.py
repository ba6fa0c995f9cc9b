"""ASCII tab reader: fixtures written for this project, plus the classtab corpus when it is checked out."""

from pathlib import Path

import pytest

from guitarformer.readers.ascii_tab import read_ascii_tab
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS
from guitarformer.errors import SkipFile
from guitarformer.music.score import Technique
from guitarformer.readers.ascii_tab import _parse_line
from guitarformer.readers.base import DEAD_NOTE_TICKS, DEAD_NOTE_VELOCITY

FIX = Path(__file__).parents[1] / "fixtures" / "tabs"
CLASSTAB = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "guitar" / "classtab" / "app" / "tabs"


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
    # target (no new note), E12, x is a dead note (written at fret 0).
    # Notes are in onset order, then by string number.
    assert gs.frets == [(5, 3), (5, 5), (4, 2), (4, 4), (4, 5), (4, 7), (4, 5), (5, 5),
                        (5, 3), (6, 0), (5, 5), (5, 5), (6, 12), (4, 0)]
    tech = gs.techniques
    assert len(tech) == len(gs.frets)
    assert tech[5] == Technique(hammer=True) and tech[6] == Technique(hammer=True)  # 5h7p5: both legato
    assert tech[8] == Technique(slide_out="legato") and not tech[10]  # 3/5: the slide leaves the 3
    assert tech[11].bend == ((0, 0), (0.5, 4), (1, 4)) and not tech[11].release  # 5b7: a whole tone up
    assert tech[13] == Technique(dead=True)
    assert [i for i, t in enumerate(tech) if t] == [5, 6, 8, 11, 13]
    bent, dead = gs.track.notes[11], gs.track.notes[13]
    assert any(b.value == 8191 and bent.time < b.time < bent.end for b in gs.track.pitch_bends)
    assert dead.duration <= DEAD_NOTE_TICKS and dead.velocity <= DEAD_NOTE_VELOCITY  # a click, as in GP
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


@pytest.mark.parametrize("labels,text,tuning", [
    # two lines' labels swapped under the text's tuning (a classtab file's "e B D G A D"): the text's order
    ("eBDGAD", "tuning - D A D G B E", (38, 45, 50, 55, 59, 64)),
    ("eBDGAD", "", (26, 33, 43, 50, 59, 64)),  # no text to say otherwise: the labels, as written
    ("EBGDAA", "tuning: A A D G B E", (33, 45, 50, 55, 59, 64)),  # the same order: Dyens' low A stays
    ("eBGDAD", "tuning: E A D G B E", (38, 45, 50, 55, 59, 64)),  # other strings in the text: the labels
])
def test_labels_against_a_text_tuning(tmp_path, labels, text, tuning):
    lines = [text, ""] + [f"{x}|-----------|" for x in labels[:-1]] + [f"{labels[-1]}|---0-------|"]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "t.txt")
    assert gs.tuning == tuning
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


@pytest.mark.slow
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


def _staff(frets_by_line: dict[int, str], width: int = 12) -> list[str]:
    """Six tab lines, high e first; `frets_by_line` puts a fret text at column 2 of line k (0 = high e)."""
    rows = []
    for k in range(6):
        body = "-" * width
        if k in frets_by_line:
            body = "--" + frets_by_line[k] + body[2 + len(frets_by_line[k]):]
        rows.append("|" + body + "|")
    return rows


def test_duet_systems_become_two_parts_with_their_own_tuning(tmp_path):
    """Systems stacking Gtr I over Gtr II (no blank line inside a system) are two parts, not one stream; a
    'Guitar 2 tuning' line applies to guitar 2 only."""
    lines = ["Duo in G", "Guitar 2 tuning: D A D G B E", "", "  Gtr I"]
    lines += _staff({0: "3"}) + ["| Gtr II"] + _staff({5: "0"}) + [""]
    lines += _staff({1: "1"}) + ["|  E  E"] + _staff({5: "2"}) + [""]
    (tmp_path / "duo.txt").write_text("\n".join(lines) + "\n")
    parts = read_ascii_tab(tmp_path / "duo.txt")
    assert len(parts) == 2
    first, second = parts
    assert first.tuning == STANDARD_TUNING and second.tuning == TUNINGS["drop-d"]
    assert first.frets == [(1, 3), (2, 1)] and second.frets == [(6, 0), (6, 2)]
    assert [n.pitch for n in second.track.notes] == [38, 40]
    assert first.extra["parts"] == 2 and second.name.endswith("(guitar 2)")
    for gs in parts:
        _check_frets(gs)


def test_guitar_sections_become_parts(tmp_path):
    """A 'Gtr II' heading above a run of staves starts guitar 2's section, until 'Gtr I' comes back."""
    lines = ["Trio", "", "Gtr I", ""] + _staff({0: "5"}) + ["", ""] + _staff({0: "7"})
    lines += ["", "Gtr II", ""] + _staff({4: "3"}) + [""] + _staff({4: "2"}) + ["", "Gtr I", ""] + _staff({0: "8"})
    (tmp_path / "sections.txt").write_text("\n".join(lines) + "\n")
    one, two = read_ascii_tab(tmp_path / "sections.txt")
    assert one.frets == [(1, 5), (1, 7), (1, 8)] and two.frets == [(5, 3), (5, 2)]


def test_solo_tab_with_stacked_staves_stays_one_part(tmp_path):
    """Without any mention of several guitars, staves with no blank line between them are one guitar."""
    lines = ["Etude"] + _staff({0: "1"}) + ["  E E"] + _staff({0: "2"}) + [""] + _staff({0: "3"}) + ["  Q"] + _staff({0: "4"})
    (tmp_path / "solo.txt").write_text("\n".join(lines) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "solo.txt")
    assert gs.frets == [(1, 1), (1, 2), (1, 3), (1, 4)]


def test_natural_harmonics_are_marked(tmp_path):
    """'<12>' is a natural harmonic: a note at the written fret's pitch whose technique says so (its string/fret
    names a node to touch, not a fretted pitch); plain frets around it are not."""
    lines = ["|--0--<12>--3--|", "|-------------|", "|--------<7>--|", "|-------------|", "|-------------|", "|-------------|"]
    (tmp_path / "harm.txt").write_text("\n".join(lines) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "harm.txt")
    _check_frets(gs)
    assert gs.frets == [(1, 0), (1, 12), (3, 7), (1, 3)]
    assert [t.harmonic for t in gs.techniques] == ["", "natural", "natural", ""]


def test_title_skips_banners(tmp_path):
    staff = ["|---0---|"] * 6
    (tmp_path / "a.txt").write_text("\n".join(["#----- PLEASE NOTE -----#", "#  private study  #", "",
                                               "|  Lagrima - F. Tarrega  |"] + staff) + "\n")
    assert read_ascii_tab(tmp_path / "a.txt")[0].name == "Lagrima - F. Tarrega"
    (tmp_path / "b.txt").write_text("\n".join(["Some words first", "   Title : Estudio in E minor"] + staff) + "\n")
    assert read_ascii_tab(tmp_path / "b.txt")[0].name == "Estudio in E minor"


def test_versions_of_a_piece_become_parts_with_their_own_tuning_and_capo(tmp_path):
    """classtab publishes several arrangements in one text: a header listing '1st version', '2nd version - drop D
    tuning, capo 2', then each version after a line of asterisks. Each is its own part; version 2's tuning and capo
    are its own, not version 1's."""
    stars = "*" * 40
    lines = ["Romance - anon", "1st version - by A, in Em", "2nd version - by B, in Dm, drop D tuning, capo 2", stars, ""]
    lines += _staff({0: "0"}) + [""] + _staff({5: "3"}) + ["", stars, stars, ""] + _staff({5: "0"}) + [""] + _staff({0: "1"})
    (tmp_path / "versions.txt").write_text("\n".join(lines) + "\n")
    one, two = read_ascii_tab(tmp_path / "versions.txt")
    assert one.tuning == STANDARD_TUNING and one.capo == 0 and one.frets == [(1, 0), (6, 3)]
    assert two.tuning == TUNINGS["drop-d"] and two.capo == 2 and two.frets == [(6, 0), (1, 1)]
    assert [n.pitch for n in two.track.notes] == [38 + 2, 64 + 2 + 1]
    assert one.name.endswith("(version 1)") and two.extra["versions"] == 2
    for gs in (one, two):
        _check_frets(gs)
    # A tuning in the shared header applies to every version; "Version 2.0" is a revision, not a second version.
    shared = ["Study", "1st version - by A", "2nd version - by B, capo 2", "both in drop D tuning", stars, ""]
    shared += _staff({5: "0"}) + ["", stars, stars, ""] + _staff({5: "2"})
    (tmp_path / "shared.txt").write_text("\n".join(shared) + "\n")
    one, two = read_ascii_tab(tmp_path / "shared.txt")
    assert one.tuning == two.tuning == TUNINGS["drop-d"] and (one.capo, two.capo) == (0, 2)
    revised = ["Study", "Version 2.0 (corrected)", "Tuning: drop D", stars] + _staff({5: "0"}) + [stars, stars] + _staff({5: "2"})
    (tmp_path / "revised.txt").write_text("\n".join(revised) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "revised.txt")
    assert gs.tuning == TUNINGS["drop-d"] and gs.frets == [(6, 0), (6, 2)]
    # The same text without the version list is one part, read as before (the asterisks are just text).
    (tmp_path / "one.txt").write_text("\n".join([ln for ln in lines if "version" not in ln]) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "one.txt")
    assert gs.frets == [(1, 0), (6, 3), (6, 0), (1, 1)]


def test_held_notes_last_to_the_end_of_their_equals_signs(tmp_path):
    """classtab's '=' after a fret is "note held": the note lasts to the column after the last '=' (across a bar
    line too), not just to the next onset; a note without '=' still lasts to the next onset."""
    lines = ["|--0===--|------|", "|------1-|------|", *["|--------|------|"] * 3, "|--3=====|==----|"]
    (tmp_path / "held.txt").write_text("\n".join(lines) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "held.txt")
    _check_frets(gs)
    notes = {(s, f): n for (s, f), n in zip(gs.frets, gs.track.notes)}
    e, b, low = notes[1, 0], notes[2, 1], notes[6, 3]
    assert e.time == low.time and b.time > e.time
    assert e.end == b.time  # "0===": held 4 columns, which is where the B string's 1 comes in
    assert low.end > e.end and low.end > b.end  # "3=====|==": held past the bar line, beyond the next onset


@pytest.mark.parametrize("body,expected", [
    ("--7b9r7--", {2: {"bend": ((0, 0), (1 / 3, 4), (2 / 3, 0), (1, 0))}}),  # bend and release: one note
    ("--7b-----", {2: {"bend": ((0, 0), (0.5, 4), (1, 4))}}),  # no target: a whole tone
    ("--5~~~---", {2: {"vibrato": True}}),
    ("--/5--\\7-", {3: {"slide_in": "below"}, 7: {"slide_in": "above"}}),
    ("--5/---7\\--", {2: {"slide_out": "up"}, 7: {"slide_out": "down"}}),
    ("--5/-|7--", {2: {"slide_out": "legato"}}),  # to the next fret, over a bar line
    ("--5s7----", {2: {"slide_out": "legato"}}),
    ("--x--x|", {2: {"dead": True}, 5: {"dead": True}}),
    ("--2x-----", {}),  # "2x" (play twice) is no dead note
    ("--(5)h7--", {6: {"hammer": True}}),  # the bracketed fret is skipped; the hammer still lands on the 7
])
def test_technique_marks(body, expected):
    _, _, found = _parse_line(body)
    found = {c: {k: (tuple((round(p, 4), a) for p, a in v) if k == "bend" else v) for k, v in f.items()}
             for c, f in found.items()}
    want = {c: {k: (tuple((round(p, 4), a) for p, a in v) if k == "bend" else v) for k, v in f.items()}
            for c, f in expected.items()}
    assert found == want


def test_palm_mute_line_marks_the_notes_under_it(tmp_path):
    """A 'PM----' line right above a staff palm-mutes the notes in the columns it spans (shorter, softer in MIDI);
    a legend line of words ("PM = palm muting") marks nothing."""
    lines = ["PM = palm muting", "", "   PM-----", "e|-----------|", "B|-----------|", "G|-----------|", "D|-----------|",
             "A|-----------|", "E|--0--0--0--|"]
    (tmp_path / "pm.txt").write_text("\n".join(lines) + "\n")
    (gs,) = read_ascii_tab(tmp_path / "pm.txt")
    assert [t.palm_mute for t in gs.techniques] == [True, True, False]
    assert gs.track.notes[0].duration < gs.track.notes[2].duration
    assert gs.track.notes[0].velocity < gs.track.notes[2].velocity


@pytest.mark.parametrize("body, frets", [
    ("--3232--", [3, 2, 3, 2]),  # a run without dashes: one-digit frets (was 3, 23, 2: a D#6 on the high E)
    ("--12--3-", [12, 3]),  # two digits standing alone: a fret the guitar has
    ("--1012--", [1, 0, 1, 2]),  # four digits: four frets, not a guess at 10, 12
    ("--32--", [3, 2]),  # no 32nd fret
    ("--7b9r7-", [7]),  # a bend's target and release are not notes
])
def test_multi_digit_frets_only_where_plausible(body, frets):
    notes, _, _ = _parse_line(body)
    assert [f for _, f, _ in notes] == frets


def test_lines_that_start_with_a_fret_a_repeat_dot_or_ring_on(tmp_path):
    """Classtab writes string lines that start with the first column's fret after the label and a space ("G 2---"), or
    with a repeat's dots after the label ("E*--3-"), and lets notes ring with "~~~~": all string lines (eight shared
    classtab tabs lost staves or were refused as "bass/mandolin/ukulele tab" for them). A label and a number without
    the dashes of a tab line ("A 2 bar intro") is still text."""
    text = ("Moon\n\nA 2 bar intro, then the tune\n\n"
            "E ----0-3-|0-------|\n"
            "B --3-----|----3---|\n"
            "G 2-------|2-------|\n"
            "D --------|--------|\n"
            "A --------|--------|\n"
            "E --------|3-------|\n\n"
            "E*--------------|\n"
            "B*--1-----------|\n"
            "G*--------------|\n"
            "D*0~~~~~~~~-----|\n"
            "A*--------------|\n"
            "E*--------------|\n")
    (tmp_path / "moon.txt").write_text(text)
    (gs,) = read_ascii_tab(tmp_path / "moon.txt")
    assert gs.tuning == STANDARD_TUNING
    onsets = {}
    for n, (s, f) in zip(gs.track.notes, gs.frets):
        onsets.setdefault(n.time, []).append((s, f))
    assert [sorted(v) for _, v in sorted(onsets.items())] == [[(3, 2)], [(2, 3)], [(1, 0)], [(1, 3)],
                                                             [(1, 0), (3, 2), (6, 3)], [(2, 3)], [(4, 0)], [(2, 1)]]


def test_a_windows_text_whose_dashes_are_em_dashes(tmp_path):
    """An older tab in cp1252 whose filler is the em dash byte (0x97): not UTF-8, so it is read as Windows text and
    its dashes count (classtab's robles_el_condor_pasa was refused as text without a tab staff)."""
    lines = ["e|\x97\x970\x97\x97|", "B|\x97\x97\x97\x971|", "G|\x97\x97\x97\x97\x97|", "D|\x97\x97\x97\x97\x97|",
             "A|\x97\x97\x97\x97\x97|", "E|3\x97\x97\x97\x97|"]
    (tmp_path / "condor.txt").write_bytes(("Caf\xe9 tab\n\n" + "\n".join(lines) + "\n").encode("latin-1"))
    (gs,) = read_ascii_tab(tmp_path / "condor.txt")
    assert sorted(gs.frets) == [(1, 0), (2, 1), (6, 3)]
