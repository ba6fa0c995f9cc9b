"""The tab a guitarist reads: ASCII tab and Guitar Pro 5 out (render.ascii_tab, render.gp5) and `guitarformer tab`."""

from __future__ import annotations

import re
from pathlib import Path

import guitarpro
import pytest
import symusic
from click.testing import CliRunner

from guitarformer.cli import main
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS
from guitarformer.music.score import GuitarScore, Technique
from guitarformer.readers import read_guitar
from guitarformer.readers.ascii_tab import read_ascii_tab
from guitarformer.render.ascii_tab import (describe_unplaced, format_tempo, render_ascii_tab, string_labels,
                                           unplaced_notes, write_ascii_tab)
from guitarformer.render.gp5 import write_gp5
from guitarformer.render.midi import write_midi

T = Technique
LABELS = ("E4", "B3", "G3", "D3", "A2", "E2")


def _score(events, tuning=STANDARD_TUNING, sigs=((0, 4, 4),), tempos=((0, 120.0),), name="riff", program=25,
           techniques=True) -> GuitarScore:
    """events: (tick, duration, string, fret[, Technique]); ticks at 480 per quarter."""
    s = symusic.Score(480)
    track = symusic.Track(name, program, False)
    frets, techs = [], []
    for e in sorted(events, key=lambda e: (e[0], tuning[len(tuning) - e[2]] + e[3])):
        tick, dur, string, fret = e[:4]
        track.notes.append(symusic.Note(tick, dur, tuning[len(tuning) - string] + fret, 90))
        frets.append((string, fret))
        techs.append(e[4] if len(e) > 4 else T())
    s.tracks.append(track)
    for t, num, den in sigs:
        s.time_signatures.append(symusic.TimeSignature(t, num, den))
    for t, qpm in tempos:
        s.tempos.append(symusic.Tempo(t, qpm))
    return GuitarScore(s, tuning=tuning, frets=frets, techniques=techs if techniques else None, name=name)


def _staff(text: str, labels=LABELS) -> list[str]:
    """The string lines of the tab, one system after another (label and first bar line cut off)."""
    return [ln.split("|", 1)[1] for ln in text.splitlines() if ln.split("|", 1)[0].strip() in labels and "|" in ln]


def _line(text: str, label: str) -> str:
    """Every system's line for one string, joined."""
    return "".join(ln.split("|", 1)[1] for ln in text.splitlines() if ln.split("|", 1)[0].strip() == label)


# ---------------------------------------------------------------- techniques


def test_dead_notes_print_as_x_not_as_open_strings():
    muted = [(0, 240, s, 0, T(dead=True)) for s in (4, 5, 6)] + [(240, 240, 5, 3)]
    text = render_ascii_tab(_score(muted))
    for label in ("D3", "A2", "E2"):
        assert _line(text, label).startswith("-x"), text
    assert "0" not in "".join(_staff(text)), text  # a muted strum is not an open chord


def test_dead_strum_from_a_guitar_pro_file_prints_x(tmp_path):
    song = guitarpro.models.Song()
    track = song.tracks[0]
    voice = track.measures[0].voices[0]
    for k in range(4):
        beat = guitarpro.models.Beat(voice, duration=guitarpro.models.Duration(value=4))
        beat.status = guitarpro.models.BeatStatus.normal
        dead = k % 2 == 1
        for string in (4, 5, 6):
            beat.notes.append(guitarpro.models.Note(beat, value=0 if dead else 2 * (string == 5) + 2 * (string == 4),
                                                    string=string, type=guitarpro.NoteType.dead if dead
                                                    else guitarpro.NoteType.normal))
        voice.beats.append(beat)
    track.channel.instrument = 29
    guitarpro.write(song, str(tmp_path / "mute.gp5"))
    (gs,) = read_guitar(tmp_path / "mute.gp5")
    text = render_ascii_tab(gs)
    assert _line(text, "E2").count("x") == 2 and _line(text, "E2").count("0") == 2, text


@pytest.mark.parametrize("events,label,expected", [
    ([(0, 240, 3, 5), (240, 240, 3, 7, T(hammer=True)), (480, 240, 3, 5, T(hammer=True))], "G3", "5h7p5"),
    ([(0, 480, 2, 7, T(bend=((0, 0), (0.5, 4), (1, 4))))], "B3", "7b9"),
    ([(0, 480, 2, 7, T(bend=((0, 0), (0.3, 4), (0.7, 4), (1, 0))))], "B3", "7b9r7"),
    ([(0, 480, 2, 7, T(bend=((0, 2), (1, 2))))], "B3", "7pb8"),
    ([(0, 480, 2, 7, T(bend=((0, 0), (1, 1))))], "B3", "7b7½"),
    ([(0, 240, 3, 5, T(slide_out="legato")), (240, 240, 3, 7)], "G3", "5/7"),
    ([(0, 240, 3, 7, T(slide_out="shift")), (240, 240, 3, 5)], "G3", "7\\5"),
    ([(240, 240, 3, 7, T(slide_in="below"))], "G3", "-/7"),
    ([(0, 480, 3, 7, T(slide_out="down"))], "G3", "7\\-"),
    ([(0, 480, 1, 12, T(vibrato=True))], "E4", "12~"),
    ([(0, 480, 3, 12, T(harmonic="natural"))], "G3", "<12>"),
    ([(0, 480, 3, 5, T(harmonic="pinch"))], "G3", "[5]"),
    ([(0, 480, 4, 5, T(ghost=True))], "D3", "-(5)-"),
    ([(0, 240, 1, 12, T(tap=True)), (240, 240, 1, 5, T(hammer=True))], "E4", "t12p5"),
])
def test_technique_notation(events, label, expected):
    text = render_ascii_tab(_score(events))
    assert expected in _line(text, label), text


def test_marks_never_overlap_the_next_note():
    """A bend and release right before another note on the string widens its column instead of running into it."""
    events = [(0, 120, 2, 7, T(bend=((0, 0), (0.5, 4), (1, 0)))), (120, 120, 2, 10, T(ghost=True)), (240, 240, 2, 8)]
    line = _line(render_ascii_tab(_score(events)), "B3")
    assert re.search(r"7b9r7-+\(10\)-+8", line), line


def test_palm_mute_line_spans_the_muted_notes():
    events = [(k * 240, 240, 6, 0, T(palm_mute=k < 4)) for k in range(6)] + [(1440, 480, 5, 2, T(let_ring=True))]
    text = render_ascii_tab(_score(events))
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("E4|"))
    pm, low = lines[i - 1], lines[i + 5]
    cols = [m.start() for m in re.finditer(r"0", low)]
    assert pm.index("PM") == cols[0] and pm.rstrip().endswith("-") and len(pm.rstrip()) == cols[3] + 1, text
    assert lines[i - 2].index("let ring") == lines[i + 4].index("2", 3), text


def test_techniques_round_trip_through_the_tab_reader(tmp_path):
    events = [(0, 240, 3, 5), (240, 240, 3, 7, T(hammer=True)), (480, 240, 3, 5, T(hammer=True)),
              (720, 240, 2, 7, T(bend=((0, 0), (0.5, 4), (1, 0)))), (960, 240, 1, 5, T(slide_out="legato")),
              (1200, 240, 1, 7, T(vibrato=True)), (1440, 240, 3, 12, T(harmonic="natural")),
              (1920, 240, 6, 0, T(palm_mute=True)), (2160, 240, 6, 0, T(palm_mute=True)),
              (2400, 240, 6, 0, T(dead=True)), (2400, 240, 5, 0, T(dead=True))]
    gs = _score(events)
    write_ascii_tab(gs, tmp_path / "t.txt")
    (back,) = read_ascii_tab(tmp_path / "t.txt")

    def notes(g):  # onset order, then string (marks widen columns, so times shift a little)
        rank = {t: k for k, t in enumerate(sorted({n.time for n in g.track.notes}))}
        return sorted(zip([rank[n.time] for n in g.track.notes], g.frets, g.techniques), key=lambda x: x[:2])

    assert [x[:2] for x in notes(back)] == [x[:2] for x in notes(gs)]
    for (_, _, want), (_, _, got) in zip(notes(gs), notes(back)):
        assert (want.hammer, want.slide_out, want.vibrato, want.harmonic, want.palm_mute, want.dead) == \
               (got.hammer, got.slide_out, got.vibrato, got.harmonic, got.palm_mute, got.dead)
        assert bool(want.bend) == bool(got.bend) and want.release == got.release


def test_gp5_writes_the_techniques(tmp_path):
    events = [(0, 240, 3, 5), (240, 240, 3, 7, T(hammer=True)),
              (480, 480, 2, 7, T(bend=((0, 0), (0.5, 4), (1, 0)), vibrato=True)),
              (960, 240, 1, 5, T(slide_out="legato")), (1200, 240, 1, 7, T(slide_in="below")),
              (1440, 240, 6, 0, T(palm_mute=True)), (1680, 240, 6, 0, T(dead=True)),
              (1920, 240, 4, 5, T(ghost=True, let_ring=True)), (2160, 240, 3, 12, T(harmonic="natural")),
              (2400, 240, 1, 12, T(tap=True))]
    gs = _score(events)
    assert write_gp5(gs, tmp_path / "t.gp5") == []
    notes = [(b, n) for m in guitarpro.parse(str(tmp_path / "t.gp5")).tracks[0].measures
             for b in m.voices[0].beats for n in b.notes]
    assert len(notes) == len(events)
    (_, hammer_from), _, (_, bend), (_, slide), (_, into), (_, pm), (_, dead), (_, ghost), (_, harm), (tap, _) = notes
    assert hammer_from.effect.hammer  # Guitar Pro marks the note the hammer-on starts from
    assert bend.effect.bend.type == guitarpro.BendType.bendRelease and bend.effect.vibrato
    assert [(p.position, p.value) for p in bend.effect.bend.points] == [(0, 0), (6, 4), (12, 0)]
    assert slide.effect.slides == [guitarpro.SlideType.legatoSlideTo]
    assert into.effect.slides == [guitarpro.SlideType.intoFromBelow]
    assert pm.effect.palmMute and dead.type == guitarpro.NoteType.dead
    assert ghost.effect.ghostNote and ghost.effect.letRing
    assert isinstance(harm.effect.harmonic, guitarpro.NaturalHarmonic)
    assert tap.effect.slapEffect == guitarpro.SlapEffect.tapping
    # and they come back through the Guitar Pro reader
    (back,) = read_guitar(tmp_path / "t.gp5", tracks="all")
    assert [t.dead for t in back.techniques].count(True) == 1 and back.techniques[-1].tap
    assert back.techniques[1].hammer and back.techniques[2].release


# ---------------------------------------------------------------- bars, time signatures, tempo


def test_bars_follow_time_signatures_and_their_changes():
    # 3/8 for two bars, then 2/4: eighth notes throughout
    events = [(k * 240, 240, 1, k % 5) for k in range(10)]
    gs = _score(events, sigs=((0, 3, 8), (1440, 2, 4)))
    text = render_ascii_tab(gs)
    assert "Time: 3/8" in text
    bars = _line(text, "E4").split("|")[:-1]
    assert [len(re.findall(r"\d", b)) for b in bars] == [3, 3, 4], text
    lines = text.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("E4|"))
    third_bar = [m.start() for m in re.finditer(r"\|", lines[k])][2]  # the bar line before bar 3
    assert lines[k - 1].index("2/4") == third_bar + 2, text  # above the bar's first column


def test_gp5_bars_follow_time_signature_changes(tmp_path):
    events = [(k * 240, 240, 1, k % 5) for k in range(10)]
    write_gp5(_score(events, sigs=((0, 3, 8), (1440, 2, 4))), tmp_path / "t.gp5")
    song = guitarpro.parse(str(tmp_path / "t.gp5"))
    assert [(h.timeSignature.numerator, h.timeSignature.denominator.value) for h in song.measureHeaders] == \
           [(3, 8), (3, 8), (2, 4)]


def test_gp5_marks_the_bar_where_generated_notes_begin_among_the_bars_written(tmp_path):
    from guitarformer.render.gp5 import GENERATED_MARK, write_gp5_parts

    gs = _score([(k * 480, 480, 1, k % 5) for k in range(16)])  # four 4/4 bars
    gs.extra["generated_from_tick"] = 2 * 1920 + 480  # inside bar 3

    def markers(name: str, bars=None) -> list[str | None]:
        write_gp5_parts([(gs, None)], tmp_path / name, bars)
        return [h.marker.title if h.marker else None for h in guitarpro.parse(str(tmp_path / name)).measureHeaders]

    assert markers("all.gp5") == [None, None, GENERATED_MARK, None]
    assert markers("late.gp5", (2, 4)) == [None, GENERATED_MARK, None]  # bar 3 is the second written
    assert markers("early.gp5", (1, 2)) == [None, None]  # the bar is not written: no marker
    del gs.extra["generated_from_tick"]
    assert markers("none.gp5") == [None] * 4


def test_gp5_keeps_tempo_changes_and_every_part(tmp_path):
    from guitarformer.render.gp5 import write_gp5_parts

    rhythm = _score([(k * 480, 480, 5, 3) for k in range(12)], tempos=((0, 165.0), (1920, 120.2)),
                    name="song [Rhythm]")
    lead = _score([(k * 240, 240, 1, k % 5) for k in range(24)], tempos=((0, 165.0), (1920, 120.2)),
                  name="song [Lead]")
    lead.extra["track_name"] = "Lead"
    write_gp5_parts([(rhythm, None), (lead, None)], tmp_path / "song.gp5")
    song = guitarpro.parse(str(tmp_path / "song.gp5"))
    assert song.title == "song" and [t.name for t in song.tracks] == ["song [Rhythm]", "Lead"]
    assert len({t.channel.channel for t in song.tracks}) == 2
    tempos = [(m.number, b.effect.mixTableChange.tempo.value) for m in song.tracks[0].measures
              for b in m.voices[0].beats if b.effect.mixTableChange and b.effect.mixTableChange.tempo]
    assert song.tempo == 165 and tempos == [(2, 120)]
    back = read_guitar(tmp_path / "song.gp5")
    assert [len(gs.track.notes) for gs in back] == [12, 24]
    assert "tempo 120" in render_ascii_tab(back[0])


def test_gp5_holds_names_in_any_script_and_names_it_cannot_read(tmp_path):
    """PyGuitarPro writes names in cp1252: a MIDI track name in another script, or with bytes its reader could not
    decode (U+FFFD), made `tab --out x.gp5` crash with a UnicodeEncodeError. What cp1252 holds stays."""
    from guitarformer.render.gp5 import write_gp5_parts

    names = ["Café Rhythm", "Гитара", "\ufffd\ufffd\ufffd (\ufffd", "Lead \u266a"]
    parts = []
    for k, name in enumerate(names):
        gs = _score([(j * 480, 480, 5, 3) for j in range(4)], name=f"Песня [{name}]")
        gs.extra["track_name"] = name
        parts.append((gs, None))
    write_gp5_parts(parts, tmp_path / "names.gp5")
    song = guitarpro.parse(str(tmp_path / "names.gp5"))
    assert song.title == "" and [t.name for t in song.tracks] == ["Café Rhythm", "Guitar", "Guitar", "Lead ?"]


def test_a_three_eight_tab_with_a_pickup_keeps_its_bars(tmp_path):
    """A 3/8 tab with a one-eighth pickup: the reader takes the stated time signature and ends the pickup on a bar
    line, so the tab written back has the same bars (each full bar starts with its first note)."""
    text = ("Waltz\ntime sig: 3/8\n\n"
            "e|-0---|-5---5---5---|-9---7---5---|-4---2---0---|\n"
            "B|-----|-------------|-------------|-------------|\n"
            "G|-----|-6---6---6---|-------------|-------------|\n"
            "D|-----|-------------|-------------|-------------|\n"
            "A|-----|-0-----------|-0-----------|-0-----------|\n"
            "E|-----|-------------|-------------|-------------|\n")
    (tmp_path / "w.txt").write_text(text)
    (gs,) = read_ascii_tab(tmp_path / "w.txt")
    assert [(t.numerator, t.denominator) for t in gs.score.time_signatures] == [(3, 8)]
    assert gs.track.notes[0].time == 480  # the pickup: the last eighth of bar 1
    out = render_ascii_tab(gs)
    bars = _line(out, "E4").split("|")[:-1]
    assert len(bars) == 4 and all(b.startswith("-") and b[1].isdigit() for b in bars[1:]), out
    assert bars[0].rstrip("-").endswith("0") and bars[0].count("0") == 1


def test_classtab_waltz_in_three_eight(shared_guitar):
    """Giuliani's waltz (3/8, a pickup, a repeat with another pickup): almost every bar's first column holds a
    note, which a tab re-barred in 4/4 or shifted by the pickup does not have."""
    path = shared_guitar / "classtab/app/tabs/giuliani_op021_twelve_waltzes_11_in_a.txt"
    (gs,) = read_guitar(path)
    text = render_ascii_tab(gs)
    assert "Time: 3/8" in text and "Tempo: 80 bpm" in text  # "160 bpm (eighth beats)" in the text
    columns = list(zip(*[_line(text, label).split("|")[:-1] for label in LABELS]))
    downbeats = [any(bar[1].isdigit() for bar in col) for col in columns[1:]]
    assert len(columns) >= 20 and sum(downbeats) >= 0.9 * len(downbeats), text
    assert all(len(ln) <= 80 for ln in text.splitlines())


def test_tempo_is_written_as_a_musician_writes_it():
    assert [format_tempo(x) for x in (121.29, 90.0001, 97.4999, 97.5, 120.0, 60.26, 99.96)] == \
           ["121", "90", "97.5", "97.5", "120", "60", "100"]


def test_tempo_header_shows_the_tempo_in_force(tmp_path):
    """A MIDI file whose first tempo events are 90 then 80, both at tick 0, plays at 80."""
    gs = _score([(0, 480, 1, 0), (480, 480, 1, 3)], tempos=((0, 90.0), (0, 80.0), (1920, 121.29)))
    write_midi(gs, tmp_path / "t.mid")
    (back,) = read_guitar(tmp_path / "t.mid")
    text = render_ascii_tab(back)
    assert "Tempo: 80 bpm" in text, text
    assert "Tempo: 90" not in text


# ---------------------------------------------------------------- string labels


@pytest.mark.parametrize("name,labels", [
    ("standard", ["E4", "B3", "G3", "D3", "A2", "E2"]),
    ("drop-d", ["E4", "B3", "G3", "D3", "A2", "D2"]),
    ("seven-string", ["E4", "B3", "G3", "D3", "A2", "E2", "B1"]),
    ("dadgad", ["D4", "A3", "G3", "D3", "A2", "D2"]),
    ("open-g", ["D4", "B3", "G3", "D3", "G2", "D2"]),
])
def test_string_labels_tell_every_string_apart(tmp_path, name, labels):
    tuning = TUNINGS[name]
    assert string_labels(tuning) == labels and len(set(labels)) == len(labels)
    gs = _score([(0, 480, s, 2) for s in range(1, len(tuning) + 1)], tuning=tuning)
    text = render_ascii_tab(gs)
    assert [ln.split("|")[0] for ln in text.splitlines() if "|" in ln] == labels
    write_ascii_tab(gs, tmp_path / "t.txt")
    (back,) = read_ascii_tab(tmp_path / "t.txt")
    assert back.tuning == tuning
    assert sorted(n.pitch for n in back.track.notes) == sorted(n.pitch for n in gs.track.notes)


# ---------------------------------------------------------------- width, grids, folding, titles


def _eighths_and_a_run() -> GuitarScore:
    """Eight bars of eighth notes and one bar of 32nd notes (bar 5)."""
    events = [(b * 1920 + k * 240, 240, 2, (b + k) % 4) for b in range(8) if b != 4 for k in range(8)]
    events += [(4 * 1920 + k * 60, 60, 1, k % 4) for k in range(32)]
    return _score(events)


@pytest.mark.parametrize("width", [30, 40, 60, 80, 120])
def test_width_is_honoured(width):
    text = render_ascii_tab(_eighths_and_a_run(), width=width)
    assert all(len(ln) <= width for ln in text.splitlines() if "|" in ln), text
    assert sum(len(re.findall(r"\d", ln)) for ln in _staff(text)) == 7 * 8 + 32  # nothing lost to the wrapping


def test_grid_is_chosen_per_bar():
    text = render_ascii_tab(_eighths_and_a_run(), width=80)
    assert "One column = 1/8 note" in text and "[1/32]" in text
    widths = [len(b) for ln in _staff(text)[:1] for b in ln.split("|")[:-1]]
    assert widths[0] == 17, text  # eight eighths, one dash before each fret and after it: not a 1/32 grid
    assert max(len(ln) for ln in text.splitlines()) <= 80


def test_leading_empty_bars_fold_and_the_title_prints_once(tmp_path):
    gs = _score([(35 * 1920 + k * 480, 480, 3, k) for k in range(4)], name="late entry")
    text = render_ascii_tab(gs)
    assert "[bars 1-35: rest]" in text and text.count("late entry") == 1
    assert len(_staff(text)) == 6 and text.splitlines()[text.splitlines().index("[bars 1-35: rest]") + 2] == "36"
    write_midi(gs, tmp_path / "late.mid")
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "late.mid")])
    assert r.exit_code == 0 and r.output.count("late") == 1 and "[bars 1-35: rest]" in r.output, r.output


def test_pop_midi_guitar_entering_late_is_folded(shared_guitar):
    path = shared_guitar / "miditok/tests/MIDIs_multitrack/Funkytown.mid"
    (gs,) = read_guitar(path)
    text = render_ascii_tab(gs)
    assert "[bars 1-34: rest]" in text and all(len(ln) <= 80 for ln in text.splitlines())


@pytest.mark.parametrize("width", ["0", "-5", "10"])
def test_cli_rejects_nonsense_widths(tmp_path, width):
    write_midi(_score([(0, 480, 1, 0)]), tmp_path / "a.mid")
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "a.mid"), "--width", width])
    assert r.exit_code == 2 and "--width" in r.output and "20" in r.output, r.output


# ---------------------------------------------------------------- notes that cannot be placed


def test_notes_below_the_tuning_are_reported(tmp_path):
    gs = _score([(0, 480, 6, 0), (1920, 480, 6, 0), (3840, 480, 4, 2)])  # E2 twice, then E3
    gs.tuning = (45, 50, 55, 59, 64, 69)  # A2 at the bottom: no E2
    from guitarformer.fingering import fret

    frets = fret(gs.track.notes, gs.tuning)
    missing = unplaced_notes(gs, frets)
    assert [(u.bar, u.reason) for u in missing] == [(1, "below"), (2, "below")]
    assert describe_unplaced(missing, gs.tuning) == \
        "2 notes could not be placed on this tuning: bars 1, 2 (E2 below the lowest string, A2)"
    assert "Not shown: 2 notes could not be placed" in render_ascii_tab(gs, frets)
    write_midi(_score([(0, 480, 6, 0), (1920, 480, 6, 0), (3840, 480, 4, 2)]), tmp_path / "low.mid")
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "low.mid"), "--tuning", "45,50,55,59,64,69"])
    assert r.exit_code == 0
    assert "warning: 2 notes could not be placed on this tuning: bars 1, 2 (E2 below" in r.stderr


def test_chords_wider_than_the_tuning_are_reported(tmp_path):
    chord = [48, 52, 55, 60, 64]  # C major, five notes
    s = symusic.Score(480)
    track = symusic.Track("g", 25, False)
    for bar in range(3):
        track.notes.extend(symusic.Note(bar * 1920, 1920, p, 80) for p in chord)
    s.tracks.append(track)
    write_midi(GuitarScore(s), tmp_path / "chords.mid")
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "chords.mid"), "--tuning", "43,48,52,57"])
    assert r.exit_code == 0, r.output
    assert "warning: 3 notes could not be placed on this tuning: bars 1-3 (E4 in chords of more notes than the 4 " \
           "strings)" in r.stderr


# ---------------------------------------------------------------- the tab command's output and tracks


def test_tab_out_writes_text_or_guitar_pro_and_rejects_other_suffixes(tmp_path):
    write_midi(_score([(k * 480, 480, 2, k) for k in range(8)]), tmp_path / "a.mid")
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "a.mid"), "--out", str(tmp_path / "out" / "a.txt")])
    assert r.exit_code == 0 and "wrote" in r.output
    assert (tmp_path / "out" / "a.txt").read_text().count("B3|") == 1
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "a.mid"), "--out", str(tmp_path / "a.gp5")])
    assert r.exit_code == 0, r.output
    (back,) = read_guitar(tmp_path / "a.gp5")
    assert [n.pitch for n in back.track.notes] == [59 + k for k in range(8)]
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "a.mid"), "--out", str(tmp_path / "a.pdf")])
    assert r.exit_code == 2 and ".txt" in r.output and ".gp5" in r.output and not (tmp_path / "a.pdf").exists()


def _band(path: Path) -> Path:
    s = symusic.Score(480)
    for name, program, pitch in (("Rhythm", 29, 52), ("Lead", 30, 76), ("Keys", 0, 60)):
        track = symusic.Track(name, program, False)
        track.notes.extend(symusic.Note(k * 480, 480, pitch + k, 80) for k in range(4))
        s.tracks.append(track)
    s.tempos.append(symusic.Tempo(0, 120))
    s.dump_midi(str(path))
    return path


def test_tab_track_selection(tmp_path):
    path = _band(tmp_path / "band.mid")

    def run(*args):
        return CliRunner().invoke(main, ["tab", str(path), *args])

    both = run()
    assert both.exit_code == 0 and "[Rhythm]" in both.output and "[Lead]" in both.output
    lead = run("--track", "lead")
    assert lead.exit_code == 0 and "[Lead]" in lead.output and "[Rhythm]" not in lead.output
    assert run("--track", "2").output == lead.output
    missing = run("--track", "Keys")
    assert missing.exit_code == 2 and "'Rhythm'" in missing.output and "--tracks all" in missing.output
    keys = run("--tracks", "all", "--track", "Keys")
    assert keys.exit_code == 0 and "[Keys]" in keys.output


def test_skip_messages_suggest_options_tab_has(tmp_path):
    """A file without a guitar track says to use --tracks all; with tab, that option exists and works."""
    s = symusic.Score(480)
    track = symusic.Track("Piano", 0, False)
    track.notes.extend(symusic.Note(k * 480, 480, 60 + k, 80) for k in range(4))
    s.tracks.append(track)
    s.tracks.append(track.copy())
    s.dump_midi(str(tmp_path / "piano.mid"))
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "piano.mid")])
    assert r.exit_code == 2 and "--tracks all" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "piano.mid"), "--tracks", "all"])
    assert r.exit_code == 0 and r.output.count("E4|") == 2


def test_tab_bars_selects_an_excerpt(tmp_path):
    gs = _score([(b * 1920, 1920, 1, b) for b in range(10)])
    text = render_ascii_tab(gs, bars=(4, 6))
    assert _line(text, "E4").count("|") == 3 and re.findall(r"\d", _line(text, "E4")) == ["3", "4", "5"]
    assert text.splitlines()[5].startswith("4")  # numbered as in the whole piece
    write_midi(gs, tmp_path / "a.mid")
    r = CliRunner().invoke(main, ["tab", str(tmp_path / "a.mid"), "--bars", "20-22"])
    assert r.exit_code == 2 and "10 bars" in r.output


# ---------------------------------------------------------------- the committed examples


def _example_commands() -> list[list[str]]:
    """The `guitarformer tab ...` commands docs/examples/README.md gives for its files, as argument lists."""
    import shlex

    readme = Path(__file__).resolve().parents[2] / "docs" / "examples" / "README.md"
    return [shlex.split(cmd)[1:] for cmd in re.findall(r"`(guitarformer tab [^`]+)`", readme.read_text())]


@pytest.mark.parametrize("args", _example_commands(), ids=lambda a: Path(a[a.index("--out") + 1]).name)
def test_committed_examples_are_what_the_commands_write(args, tmp_path, monkeypatch):
    """Each example under docs/examples is exactly what its command writes today (regenerate them with the
    README's commands when the tab output changes on purpose)."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    if not Path(args[1]).is_file():
        pytest.skip(f"{args[1]} is absent (../shared/data/guitar is not checked out)")
    k = args.index("--out")
    committed = root / args[k + 1]
    r = CliRunner().invoke(main, [*args[:k + 1], str(tmp_path / committed.name), *args[k + 2:]])
    assert r.exit_code == 0, r.output
    assert (tmp_path / committed.name).read_text() == committed.read_text()


def test_generated_bars_are_marked_in_the_tab():
    """A continued prompt: the bar where the model's notes begin says so above it."""
    from guitarformer.readers import read_guitar

    gs = read_guitar(Path(__file__).parents[1] / "fixtures" / "tabs" / "riff.txt")[0]
    plain = render_ascii_tab(gs)
    assert "generated" not in plain
    gs.extra["generated_from_tick"] = 4 * gs.score.ticks_per_quarter  # bar 2 in 4/4
    marked = render_ascii_tab(gs)
    assert marked.count("[generated from here]") == 1
    line = next(x for x in marked.splitlines() if "[generated from here]" in x)
    top = marked.splitlines()[marked.splitlines().index(line) + 1]
    assert line.index("[generated") > top.index("|") + 1  # above the second bar, not the first


def test_tab_lists_tunings():
    from click.testing import CliRunner

    from guitarformer.cli import main

    r = CliRunner().invoke(main, ["tab", "--tuning", "list"])
    assert r.exit_code == 0 and "drop-d" in r.output and "D2 A2 D3 G3 B3 E4" in r.output


def test_midi_bends_and_vibrato_become_pitch_bend_curves(tmp_path):
    """A full-step bend and release peaks at +2 semitones and comes back; vibrato wobbles both ways; the plain note
    stays on its own track, unbent (MIDI bends a whole channel)."""
    from guitarformer.render.midi import BEND_RANGE, write_midi

    score = symusic.Score(480)
    track = symusic.Track(program=29)
    for time, pitch in ((0, 64), (480, 67), (960, 69)):
        track.notes.append(symusic.Note(time, 480, pitch, 90))
    score.tracks.append(track)
    techs = [Technique(), Technique(bend=((0.0, 0.0), (0.5, 4.0), (1.0, 0.0))), Technique(vibrato=True)]
    back = symusic.Score(str(write_midi(GuitarScore(score, frets=[(1, 0), (1, 3), (1, 5)], techniques=techs),
                                        tmp_path / "bend.mid")))
    plain, bent = back.tracks
    assert [n.pitch for n in plain.notes] == [64] and len(plain.pitch_bends) == 0
    assert [n.pitch for n in bent.notes] == [67, 69] and bent.program == 29
    in_bend = [b.value for b in bent.pitch_bends if 480 <= b.time < 960]
    assert max(in_bend) == round(8191 * 2 / BEND_RANGE) and in_bend[0] == 0
    in_vibrato = [b.value for b in bent.pitch_bends if 960 <= b.time < 1440]
    assert max(in_vibrato) > 0 > min(in_vibrato) and bent.pitch_bends[-1].value == 0
    assert {(c.number, c.value) for c in bent.controls} >= {(101, 0), (100, 0), (6, BEND_RANGE)}
    (again,) = read_guitar(tmp_path / "bend.mid")  # one part reads back as one part, every note in it
    assert [(n.time, n.pitch) for n in again.track.notes] == [(0, 64), (480, 67), (960, 69)]
