"""Fretting (tab.fret) and tab output (ASCII, Guitar Pro 5)."""

from pathlib import Path

import guitarpro
import pytest
import symusic

from guitarformer.readers.ascii_tab import read_ascii_tab
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS
from guitarformer.music.score import GuitarScore
from guitarformer.fingering import fret, fret_lowest, UNPLAYABLE
from guitarformer.render.ascii_tab import render_ascii_tab, write_ascii_tab
from guitarformer.render.gp5 import write_gp5

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "guitar"
C_CHORD = [48, 52, 55, 60, 64]  # C3 E3 G3 C4 E4


def _check(notes, frets, tuning=STANDARD_TUNING, capo=0, max_fret=24):
    n = len(tuning)
    for (onset, _, pitch), (s, f) in zip(notes, frets):
        if (s, f) == UNPLAYABLE:
            continue
        assert 1 <= s <= n and 0 <= f <= max_fret - capo
        assert pitch == tuning[n - s] + capo + f
    by_onset = {}
    for (onset, _, _), (s, f) in zip(notes, frets):
        if f >= 0:
            assert s not in by_onset.setdefault(onset, set()), "two notes on one string"
            by_onset[onset].add(s)


def test_open_c_chord():
    notes = [(0, 480, p) for p in C_CHORD]
    frets = fret(notes)
    assert frets == [(5, 3), (4, 2), (3, 0), (2, 1), (1, 0)]


def test_c_major_scale_stays_in_open_position():
    notes = [(i * 240, 240, p) for i, p in enumerate([48, 50, 52, 53, 55, 57, 59, 60])]
    frets = fret(notes)
    _check(notes, frets)
    assert frets == [(5, 3), (4, 0), (4, 2), (4, 3), (3, 0), (3, 2), (2, 0), (2, 1)]


def test_accepts_symusic_notes_and_keeps_input_order():
    track = symusic.Track("g", 25, False)
    for p in reversed(C_CHORD):
        track.notes.append(symusic.Note(0, 480, p, 80))
    assert fret(track.notes) == fret([(0, 480, p) for p in reversed(C_CHORD)])
    assert fret(track.notes)[0] == (1, 0)


def test_chord_strings_distinct_and_pitches_exact():
    notes = [(0, 480, p) for p in (40, 47, 52, 56, 59, 64)] + [(480, 480, p) for p in (45, 52, 57, 61, 64)]
    notes += [(960 + 120 * i, 120, 60 + i) for i in range(24)]
    frets = fret(notes)
    _check(notes, frets)
    assert UNPLAYABLE not in frets


def test_drop_d_and_capo():
    drop = TUNINGS["drop-d"]
    notes = [(0, 480, 38), (0, 480, 45), (0, 480, 50)]
    assert fret(notes, drop) == [(6, 0), (5, 0), (4, 0)]
    _check(notes, fret(notes, drop), drop)
    capo_notes = [(0, 480, p + 2) for p in C_CHORD]  # C shape with capo 2 sounds as D
    frets = fret(capo_notes, capo=2)
    assert frets == [(5, 3), (4, 2), (3, 0), (2, 1), (1, 0)]
    _check(capo_notes, frets, capo=2)
    assert fret([(0, 1, 41)], capo=2) == [UNPLAYABLE]  # below the capo


def test_unplayable_and_overfull_chords():
    frets = fret([(0, 480, 30), (480, 480, 100), (960, 480, 60)])
    assert frets[:2] == [UNPLAYABLE, UNPLAYABLE] and frets[2] != UNPLAYABLE
    # Seven notes at once on six strings: one is dropped, the others get distinct strings.
    notes = [(0, 480, p) for p in (40, 45, 50, 55, 59, 64, 69)]
    frets = fret(notes)
    assert frets.count(UNPLAYABLE) == 1
    _check(notes, frets)
    # Two notes that only fit on the low E string.
    frets = fret([(0, 480, 40), (0, 480, 41)])
    assert frets.count(UNPLAYABLE) == 1


def test_lowest_fret_baseline():
    notes = [(0, 480, p) for p in C_CHORD] + [(480, 480, 64)]
    assert fret_lowest(notes) == [(5, 3), (4, 2), (3, 0), (2, 1), (1, 0), (1, 0)]



def _score(tuning=STANDARD_TUNING, capo=0):
    s = symusic.Score(480)
    t = symusic.Track("riff", 25, False)
    for i, p in enumerate([48, 52, 55, 60, 64, 67, 72, 76]):
        t.notes.append(symusic.Note(i * 240, 240, p + capo, 80))
    for p in C_CHORD:
        t.notes.append(symusic.Note(1920, 960, p + capo, 80))
    for i, p in enumerate([40, 43, 45, 47, 50, 52]):
        t.notes.append(symusic.Note(2880 + i * 480, 480, p + capo, 90))
    s.tracks.append(t)
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    s.tempos.append(symusic.Tempo(0, 100))
    return GuitarScore(s, tuning=tuning, capo=capo, name="riff")


def test_render_shape():
    text = render_ascii_tab(_score(), width=40)
    staff = [ln for ln in text.splitlines() if "|" in ln]
    assert [ln.split("|")[0] for ln in staff[:6]] == ["E4", "B3", "G3", "D3", "A2", "E2"]
    assert all(len(ln) <= 40 for ln in staff)
    assert len(staff) >= 12  # wrapped into at least two staves


@pytest.mark.parametrize("capo", [0, 2])
def test_render_round_trip(tmp_path, capo):
    gs = _score(capo=capo)
    path = tmp_path / "riff.txt"
    write_ascii_tab(gs, path)
    (back,) = read_ascii_tab(path)
    assert back.tuning == gs.tuning and back.capo == capo
    key = lambda n: (n.time, n.pitch)  # noqa: E731
    assert [n.pitch for n in sorted(back.track.notes, key=key)] == [n.pitch for n in sorted(gs.track.notes, key=key)]
    # One tab column per 8th note here, the median bar is one 4/4 bar: onsets come back exactly.
    assert sorted(n.time for n in back.track.notes) == sorted(n.time for n in gs.track.notes)


def test_render_round_trip_drop_d(tmp_path):
    gs = _score(tuning=TUNINGS["drop-d"])
    write_ascii_tab(gs, tmp_path / "d.txt")
    (back,) = read_ascii_tab(tmp_path / "d.txt")
    assert back.tuning == TUNINGS["drop-d"]
    assert sorted(n.pitch for n in back.track.notes) == sorted(n.pitch for n in gs.track.notes)


@pytest.mark.parametrize("tuning,capo", [(STANDARD_TUNING, 0), (TUNINGS["drop-d"], 3), (TUNINGS["seven-string"], 0)])
def test_gp5_round_trip(tmp_path, tuning, capo):
    gs = _score(tuning, capo)
    frets = fret(gs.track.notes, tuning, capo)
    path = tmp_path / "riff.gp5"
    write_gp5(gs, path, frets)
    song = guitarpro.parse(str(path))
    (track,) = song.tracks
    assert track.offset == capo and song.tempo == 100
    assert sorted(s.value for s in track.strings) == sorted(tuning)
    got = []
    for m in track.measures:
        for beat in m.voices[0].beats:
            for note in beat.notes:
                got.append((beat.start - 960, note.string, note.value, note.realValue + capo))
    want = [(n.time * 2, s, f, n.pitch) for n, (s, f) in zip(gs.track.notes, frets)]  # 480 -> 960 per quarter
    assert sorted(got) == sorted(want)


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="shared guitar data not checked out")
def test_real_gp_files_fret_validly():
    files = sorted(DATA.rglob("*.gp5"))[:15]  # alphatab's test scores: every one of them parses
    checked, failures = 0, []
    for f in files:
        try:
            song = guitarpro.parse(str(f))
        except Exception as e:  # counted and reported below, each with its file: none is expected
            failures.append(f"{f.relative_to(DATA)}: {type(e).__name__}: {e}")
            continue
        for track in song.tracks:
            if track.isPercussionTrack or len(track.strings) != 6:
                continue
            tuning = tuple(s.value for s in sorted(track.strings, key=lambda s: -s.number))
            notes = [(b.start, b.duration.time, tuning[6 - n.string] + n.value)
                     for m in track.measures for v in m.voices for b in v.beats for n in b.notes
                     if n.type == guitarpro.NoteType.normal]
            _check(notes, fret(notes, tuning), tuning)
            checked += len(notes)
    assert not failures, f"{len(failures)} of {len(files)} files did not parse:\n" + "\n".join(failures)
    assert checked > 0


def test_costs_vector_round_trip():
    from guitarformer.fingering import DEFAULT_COSTS, FretCosts
    from guitarformer.fingering.costs import N_FROM_FIRST, N_BASE, N_FEATURES

    w = DEFAULT_COSTS.vector()
    assert w.shape == (N_FEATURES,)
    assert FretCosts.from_vector(w) == DEFAULT_COSTS
    with pytest.raises(ValueError):
        FretCosts.from_vector(w[:-1])
    # The first pass: its own weights, none on features computed from a first pass, so fret() runs it once.
    first = DEFAULT_COSTS.first()
    assert first.first_pass is None and not any(first.piece[:N_FROM_FIRST])
    assert any(DEFAULT_COSTS.piece[:N_FROM_FIRST])
    assert list(first.vector()) == pytest.approx(list(DEFAULT_COSTS.first_pass))
    assert list(first.vector()[:N_BASE]) != pytest.approx(list(DEFAULT_COSTS.vector()[:N_BASE]))  # two weight sets


def test_piece_features_come_from_the_first_pass():
    """A pitch played four times: each note's pitch share is the first pass's choice on the OTHER three."""
    from guitarformer.fingering import DEFAULT_COSTS, piece_table
    from guitarformer.fingering.costs import P_PITCH, PIECE0

    notes = [(i * 240, 240, p) for i, p in enumerate([69, 71, 69, 72, 69, 71, 69])]
    first = fret(notes, costs=DEFAULT_COSTS.first())
    table = piece_table(notes)
    assert table.shape == (7, 6, len(DEFAULT_COSTS.piece))
    for i in (0, 2, 4, 6):
        others = [6 - first[j][0] for j in (0, 2, 4, 6) if j != i]
        for s in range(6):
            assert table[i, s, P_PITCH - PIECE0] == pytest.approx(others.count(s) / 3)


def _brute_force_lines():
    import numpy as np

    rng = np.random.default_rng(0)
    for trial in range(5):
        pitches = [int(p) for p in rng.integers(65, 80, size=4)]
        pitches += pitches[:2]  # a repeated phrase, so the piece (second-pass) features are not all zero
        notes = [(i * 240, 240 if trial % 2 else 480, p) for i, p in enumerate(pitches)]  # odd: legato; even: overlapping
        options = [[(6 - s, p - o) for s, o in enumerate(STANDARD_TUNING) if 0 <= p - o <= 24] for p in pitches]
        yield notes, options


@pytest.mark.slow
def test_viterbi_finds_the_cheapest_fingering():
    """Brute force over every fingering of a short line: fret() must return one of minimal cost, where
    cost = weights @ fingering_features(..., piece=piece_table(...)) (second pass, its piece features from the
    first pass). Pitches above the open high E, so every candidate is fretted and the carried hand position is
    exactly the previous onset's; the lazy hand window is path-dependent state the DP only approximates, so it
    is switched off here (the next test covers it)."""
    import dataclasses
    import itertools


    from guitarformer.music.guitar import MAX_FRET
    from guitarformer.fingering import DEFAULT_COSTS, fingering_features, piece_table
    from guitarformer.fingering.costs import N_WIN
    from guitarformer.fingering.viterbi import _piece_table

    costs = dataclasses.replace(DEFAULT_COSTS, window=(0.0,) * N_WIN, nn_weight=0.0)  # hand-made costs only
    assert any(costs.piece)
    w = costs.vector()
    for notes, options in _brute_force_lines():
        piece = piece_table(notes, costs=costs)
        assert piece.any()
        best = min(float(w @ fingering_features(notes, list(path), piece=piece)) for path in itertools.product(*options))
        got = fret(notes, costs=costs)
        _check(notes, got)
        assert float(w @ fingering_features(notes, got, piece=piece)) == pytest.approx(best)
    # The first pass alone (only the pitch-only piece features: one pass) is exact too.
    first = dataclasses.replace(DEFAULT_COSTS.first(), window=(0.0,) * N_WIN, nn_weight=0.0)
    assert any(first.piece)  # the pitch-only piece features
    w = first.vector()
    for notes, options in _brute_force_lines():
        piece = _piece_table(notes, STANDARD_TUNING, 0, MAX_FRET, None)
        best = min(float(w @ fingering_features(notes, list(path), piece=piece)) for path in itertools.product(*options))
        assert float(w @ fingering_features(notes, fret(notes, costs=first), piece=piece)) == pytest.approx(best)


@pytest.mark.slow
def test_viterbi_with_hand_window_is_near_the_cheapest():
    """With the default costs (hand window on), the decoded fingering costs no more than the cheapest of the
    first pass's and the lowest-fret fingerings, and is within a small margin of the brute-force minimum."""
    import dataclasses
    import itertools

    from guitarformer.fingering import DEFAULT_COSTS, fingering_features, piece_table

    costs = dataclasses.replace(DEFAULT_COSTS, nn_weight=0.0)  # hand-made costs only
    w = costs.vector()
    for notes, options in _brute_force_lines():
        piece = piece_table(notes, costs=costs)
        cost = lambda path: float(w @ fingering_features(notes, list(path), piece=piece))  # noqa: E731
        best = min(cost(path) for path in itertools.product(*options))
        got = cost(fret(notes, costs=costs))
        assert got <= min(cost(fret_lowest(notes)), cost(fret(notes, costs=costs.first()))) + 1e-9
        assert got <= best + 1.0


def test_fingering_features_count_what_they_say():
    from guitarformer.fingering import fingering_features
    from guitarformer.fingering.costs import FRET0, MOVE0, SAME, SLIDE, STRING0

    notes = [(0, 240, 64 + 5), (240, 240, 64 + 7)]  # A4 then B4, both on the high E string at frets 5, 7
    f = fingering_features(notes, [(1, 5), (1, 7)])
    assert f[FRET0 + 5] == 1 and f[FRET0 + 7] == 1 and f[STRING0 + 0] == 2
    assert f[MOVE0 + 2] == 1  # hand (lowest fretted fret) moved 5 -> 7
    assert f[SAME] == 1 and f[SLIDE] == 2


def test_custom_costs_change_the_choice():
    from guitarformer.fingering import DEFAULT_COSTS, FretCosts

    w = DEFAULT_COSTS.vector().copy()
    w[:25] = [0.0] + [10.0] * 24  # frets cost a lot: open strings wherever possible
    assert fret([(0, 480, 59)], costs=FretCosts.from_vector(w)) == [(2, 0)]
    w[:25] = [50.0] + [0.0] * 24  # open strings cost a lot
    assert fret([(0, 480, 59)], costs=FretCosts.from_vector(w))[0][1] > 0


def test_learned_string_model_loads_and_is_deterministic():
    """The shipped string model (guitarformer/string_model.pt) loads with weights_only=True, is small, gives the
    same costs twice, works for 6 and 7 strings with a capo, and fret() with it stays valid."""
    import numpy as np
    import torch

    from guitarformer.fingering import string_model
    from guitarformer.fingering import DEFAULT_COSTS

    assert DEFAULT_COSTS.nn_weight > 0
    assert string_model.WEIGHTS.is_file()
    torch.load(string_model.WEIGHTS, weights_only=True)
    model = string_model.load()
    assert model is not None and sum(p.numel() for p in model.parameters()) <= 200_000
    notes = [(i * 120, 120, 45 + (i * 7) % 30) for i in range(60)] + [(7200, 480, p) for p in C_CHORD]
    for tuning, capo in ((STANDARD_TUNING, 0), (TUNINGS["drop-d"], 3), (TUNINGS["seven-string"], 0)):
        n = len(tuning)
        a = string_model.string_costs(notes, tuning, capo)
        b = string_model.string_costs(list(reversed(notes)), tuning, capo)[::-1]
        assert a.shape == (len(notes), n + 1) and np.array_equal(a, b)  # input order does not matter
        assert (a >= 0).all() and (a[:, n] == 0).all()
        # probabilities over the strings that can play each note sum to 1
        for (_, _, p), row in zip(notes, a):
            ok = [0 <= p - capo - tuning[s] <= 24 - capo for s in range(n)]
            assert np.exp(-row[:n][ok]).sum() == pytest.approx(1.0, abs=1e-3)
        frets = fret(notes, tuning, capo)
        _check(notes, frets, tuning, capo)
        assert frets == fret(notes, tuning, capo)
        assert UNPLAYABLE not in frets


@pytest.mark.slow
def test_learned_term_enters_the_viterbi_exactly():
    """With the learned term on (hand window off), fret()'s second pass minimises the hand-made cost plus
    nn_weight * -log p(string) of every note, by brute force over short lines."""
    import dataclasses
    import itertools

    from guitarformer.fingering import string_model
    from guitarformer.fingering import DEFAULT_COSTS, fingering_features, piece_table
    from guitarformer.fingering.costs import N_WIN

    costs = dataclasses.replace(DEFAULT_COSTS, window=(0.0,) * N_WIN, nn_weight=2.0)
    w = costs.vector()
    changed = False
    for notes, options in _brute_force_lines():
        piece = piece_table(notes, costs=costs)
        nn = 2.0 * string_model.string_costs(notes, STANDARD_TUNING)

        def cost(path):
            return float(w @ fingering_features(notes, list(path), piece=piece)) + sum(
                nn[i, 6 - s] for i, (s, _) in enumerate(path))

        best = min(cost(path) for path in itertools.product(*options))
        got = fret(notes, costs=costs)
        _check(notes, got)
        assert cost(got) == pytest.approx(best)
        changed |= got != fret(notes, costs=dataclasses.replace(costs, nn_weight=0.0))
    assert changed  # the term does change some choice


def test_fret_falls_back_without_the_weights(monkeypatch, tmp_path):
    import dataclasses

    from guitarformer.fingering import string_model
    from guitarformer.fingering import DEFAULT_COSTS

    notes = [(i * 120, 120, 45 + (i * 5) % 27) for i in range(40)]
    monkeypatch.setattr(string_model, "WEIGHTS", tmp_path / "missing.pt")
    string_model.load.cache_clear()
    try:
        assert string_model.load() is None and string_model.string_costs(notes, STANDARD_TUNING) is None
        assert fret(notes) == fret(notes, costs=dataclasses.replace(DEFAULT_COSTS, nn_weight=0.0))
    finally:
        monkeypatch.undo()
        string_model.load.cache_clear()


def test_position_moves_a_scale_up_the_neck():
    """position=N fingers a line with the hand at fret N where the notes allow; None leaves the fitted choice."""
    notes = [(i * 240, 240, p) for i, p in enumerate([57, 59, 60, 62, 64, 65, 67, 69, 71, 72])]  # A3 .. C5
    assert fret(notes, position=None) == fret(notes)
    for pos in (0, 2, 5, 7, 9):
        frets = fret(notes, position=pos)
        _check(notes, frets)
        for (_, _, pitch), (s, f) in zip(notes, frets):
            def away(x):  # frets outside the window (position 0: frets 1-4); an open string: 0 up to position 4, 1 above
                lo = max(pos, 1)
                return int(pos > 4) if x == 0 else max(lo - x, 0, x - lo - 3)

            assert away(f) == min(away(pitch - o) for o in STANDARD_TUNING if pitch >= o), (pos, pitch, frets)
    # a note outside every window of the position still gets its nearest fingering, never dropped
    far = [(0, 240, 40), (240, 240, 88)]  # low open E and E6 (high E at fret 24)
    assert fret(far, position=7) == [(6, 0), (1, 24)]


def test_tab_cli_position(tmp_path):
    from click.testing import CliRunner

    from guitarformer.cli import main
    from guitarformer.render.midi import write_midi

    score = symusic.Score(480)
    track = symusic.Track("g", 25, False)
    for i, p in enumerate([57, 59, 60, 62, 64, 65, 67, 69]):
        track.notes.append(symusic.Note(i * 240, 240, p, 80))
    score.tracks.append(track)
    path = write_midi(GuitarScore(score=score), tmp_path / "line.mid")
    r = CliRunner().invoke(main, ["tab", str(path), "--position", "7"])
    assert r.exit_code == 0, r.output
    frets = [int(x) for ln in r.output.splitlines() if ln[:3] in {"E4|", "B3|", "G3|", "D3|", "A2|", "E2|"}
             for x in __import__("re").findall(r"\d+", ln[3:])]
    assert len(frets) == 8 and all(7 <= f <= 10 for f in frets), r.output
    r = CliRunner().invoke(main, ["tab", str(path), "--position", "30"])
    assert r.exit_code == 2 and "--position" in r.output


def test_distorted_guitar_program_plays_power_chords_as_rock_shapes():
    """A distorted guitar (General MIDI 29-30) gets its own fitted costs: every two-note fifth of a riff is a
    power-chord shape on adjacent strings (the fifth on the next string up, two frets higher, or open root
    + fret 2), where the default costs (fit mostly on classical tab) reach for open strings across a gap."""
    from guitarformer.fingering import costs_for_program, DEFAULT_COSTS, DISTORTED_COSTS

    assert costs_for_program(30) is DISTORTED_COSTS and costs_for_program(29) is DISTORTED_COSTS
    assert costs_for_program(25) is DEFAULT_COSTS and costs_for_program(None) is DEFAULT_COSTS
    E5, D5, C5, A5, G5 = (52, 59), (50, 57), (48, 55), (45, 52), (43, 50)
    notes = [(k * 240, 240, p) for k, ch in enumerate([E5, D5, C5, D5, A5, A5, G5, G5]) for p in ch]
    rock = fret(notes, program=30)
    assert rock == fret(notes, costs=DISTORTED_COSTS) and fret(notes, program=25) == fret(notes)
    for k in range(0, len(notes), 2):
        (s_root, f_root), (s_fifth, f_fifth) = rock[k], rock[k + 1]
        assert s_fifth == s_root - 1 and f_fifth == f_root + 2, (k, rock)
    default = fret(notes)
    assert any(default[k][0] - default[k + 1][0] != 1 for k in range(0, len(notes), 2))


def test_sampled_and_tabbed_tracks_are_fingered_by_their_program():
    from guitarformer.fingering import finger_score
    from guitarformer.fingering import DISTORTED_COSTS

    score = symusic.Score(480)
    track = symusic.Track("riff", 30, False)
    for k, (root, fifth) in enumerate([(52, 59), (50, 57), (48, 55), (45, 52)]):
        track.notes.extend([symusic.Note(k * 240, 240, root, 100), symusic.Note(k * 240, 240, fifth, 100)])
    score.tracks.append(track)
    gs = GuitarScore(score=score, tuning=STANDARD_TUNING)
    assert finger_score(gs).frets == fret(list(track.notes), costs=DISTORTED_COSTS) != fret(list(track.notes))


def test_tab_cli_fingers_by_program(tmp_path):
    """`guitarformer tab` fingers a track by its own program (a distortion-guitar MIDI gets the rock costs);
    --program N re-fingers as program N."""
    from click.testing import CliRunner

    from guitarformer.cli import main
    from guitarformer.render.midi import write_midi
    from guitarformer.fingering import DISTORTED_COSTS
    from guitarformer.render.ascii_tab import render_ascii_tab

    def riff(program):
        score = symusic.Score(480)
        track = symusic.Track("g", program, False)
        for k, (root, fifth) in enumerate([(52, 59), (50, 57), (48, 55), (50, 57)]):
            track.notes.extend([symusic.Note(k * 480, 480, root, 100), symusic.Note(k * 480, 480, fifth, 100)])
        score.tracks.append(track)
        return GuitarScore(score=score, tuning=STANDARD_TUNING)

    steel, dist = riff(25), riff(30)
    write_midi(steel, tmp_path / "steel.mid", program=25)
    write_midi(dist, tmp_path / "dist.mid", program=30)
    def staff(text):  # the tab lines only (the header names the track)
        return [ln for ln in text.splitlines() if ln[:3] in {"E4|", "B3|", "G3|", "D3|", "A2|", "E2|"}]

    rock = staff(render_ascii_tab(dist, fret(list(dist.track.notes), costs=DISTORTED_COSTS)))
    plain = staff(render_ascii_tab(steel, fret(list(steel.track.notes))))
    assert rock != plain
    out = {}
    for name, args in (("steel", ["steel.mid"]), ("dist", ["dist.mid"]), ("steel30", ["steel.mid", "--program", "30"])):
        r = CliRunner().invoke(main, ["tab", str(tmp_path / args[0]), *args[1:]])
        assert r.exit_code == 0, r.output
        out[name] = staff(r.output)
    assert out["dist"] == out["steel30"] == rock and out["steel"] == plain


def test_loading_the_string_model_leaves_the_global_rng_alone():
    """fret() inside a training run (the TensorBoard riff) must not move torch's RNG: resume would drift."""
    import torch

    from guitarformer.fingering import string_model

    string_model.load.cache_clear()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert string_model.load() is not None
    assert torch.equal(torch.rand(3), expected)
