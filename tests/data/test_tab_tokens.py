"""Tab-native tokens (TabREMI): each note's string and techniques survive file -> tok.encode -> tok.decode, in
as many tokens per note as REMI."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from pathlib import Path

import json

import miditok
import pytest
import symusic

from guitarformer.config import DataConfig
from guitarformer.vocab.tab_tokens import TabREMI, canonical, lowest_fret_string, technique_of, technique_tokens
from guitarformer.vocab.tokenization import build_tokenizer, decode, decode_guitar, encode, load_tokenizer
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.fingering import fret
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS, pitch_of
from guitarformer.music.score import PLAIN, UNPLAYABLE, GuitarScore, Technique
from guitarformer.readers import read_guitar

FIX = Path(__file__).parents[1] / "fixtures"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "guitar"


@pytest.fixture(scope="module")
def tok() -> TabREMI:
    t = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    assert isinstance(t, TabREMI)
    return t


def fretted(gs: GuitarScore) -> GuitarScore:
    if gs.frets is None:
        gs.frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
    return gs


def round_trip(tok, gs: GuitarScore) -> tuple[GuitarScore, list[int]]:
    """MidiTok's own API: tok.encode(GuitarScore) -> TokSequence, tok.decode(ids) -> GuitarScore."""
    seq = tok.encode(gs)
    seq = seq[0] if isinstance(seq, list) else seq
    back = tok.decode(seq.ids, tuning=gs.tuning, capo=gs.capo)
    return back, list(seq.ids)


def n_notes(tok, ids: list[int]) -> int:
    return sum(tok[int(i)].startswith("Pitch_") for i in ids)


def multiset(gs: GuitarScore) -> Counter:
    techs = gs.techniques or [PLAIN] * len(gs.track.notes)
    return Counter((n.pitch, s, f, canonical(t)) for n, (s, f), t in zip(gs.track.notes, gs.frets, techs))


@pytest.mark.parametrize("name", ["io/drop_d_capo.gp5", "io/drop_d_capo.gp3", "tabs/riff.txt", "tabs/drop_d.txt",
                                  "tabs/seven_string.txt", "io/band.mid", "io/tab_drop_d.musicxml"])
def test_fixture_round_trip_is_exact(tok, name):
    gs = fretted(read_guitar(FIX / name)[0])
    back, ids = round_trip(tok, gs)
    assert tok.tokens_errors(miditok.TokSequence(ids=ids)) == 0
    # the notes are exactly what plain REMI gives (no note lost to a token between Pitch and Duration)
    remi = build_tokenizer(DataConfig(tokenizer="REMI"))
    remi_ids = encode(remi, gs.score)
    plain = decode(remi, remi_ids)
    assert [(n.time, n.duration, n.pitch) for n in back.track.notes] == \
        [(n.time, n.duration, n.pitch) for n in plain.tracks[0].notes]
    assert back.frets is not None and multiset(back) == multiset(gs)
    # no more tokens than REMI's, but for the technique tokens (Velocity is gone: these files have no dynamics)
    techs = sum(len(technique_tokens(t)) for t in gs.techniques or [])
    assert len(ids) - techs <= len(remi_ids) - 2 and n_notes(tok, ids) == n_notes(remi, remi_ids)


def test_the_wrappers_give_what_the_tokenizer_gives(tok):
    """vocab/tokenization.py's encode/decode_guitar (what the rest of the package calls) wrap tok.encode/decode."""
    gs = fretted(read_guitar(FIX / "tabs" / "drop_d.txt")[0])
    back, ids = round_trip(tok, gs)
    wrapped = encode(tok, gs)
    assert wrapped == [tok["BOS_None"], *ids, tok["EOS_None"]]
    again = decode_guitar(tok, wrapped, gs.tuning, gs.capo, program=30, name="x")
    assert again.frets == back.frets and again.techniques == back.techniques and again.track.program == 30


def _with_techniques() -> GuitarScore:
    techs = [Technique(bend=((0, 0), (0.5, 4), (1, 0))), Technique(hammer=True), Technique(palm_mute=True),
             Technique(dead=True), Technique(slide_in="below", slide_out="shift"), Technique(harmonic="natural"),
             Technique(vibrato=True, let_ring=True), Technique(ghost=True, tap=True), Technique(bend=((0, 0), (1, 2))),
             PLAIN, Technique(slide_out="down"), Technique(harmonic="pinch", palm_mute=True)]
    score = symusic.Score(480)
    score.tempos.append(symusic.Tempo(0, 120))
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=29)
    frets = []
    for i, _t in enumerate(techs):
        s, f = 1 + i % 6, 2 + i % 5
        tr.notes.append(symusic.Note(i * 240, 240, STANDARD_TUNING[6 - s] + f, 90))
        frets.append((s, f))
    score.tracks.append(tr)
    return GuitarScore(score=score, frets=frets, techniques=techs)


def test_every_technique_round_trips(tok):
    gs = _with_techniques()
    back, ids = round_trip(tok, gs)
    assert tok.tokens_errors(miditok.TokSequence(ids=ids)) == 0
    assert back.techniques == [canonical(t) for t in gs.techniques]
    assert back.techniques[0].release and back.techniques[0].bend[1][1] == 4 and not back.techniques[8].release
    assert multiset(back) == multiset(gs)


def test_technique_tokens_are_canonical():
    for t in _with_techniques().techniques:
        assert technique_tokens(technique_of(technique_tokens(t))) == technique_tokens(t)
    assert technique_tokens(PLAIN) == [] and technique_of([]) == PLAIN


def test_save_load_and_grammar(tok, tmp_path):
    tok.save(tmp_path / "tokenizer.json")
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert isinstance(again, TabREMI) and again.vocab == tok.vocab
    assert not any(t.startswith("Velocity_") for t in again.vocab)  # one velocity: no Velocity tokens
    saved = json.loads((tmp_path / "tokenizer.json").read_text())["config"]["additional_params"]
    assert saved["tab_velocities"].startswith("none") and saved["tab_layout"] == 3
    g = again.tokens_types_graph
    # Layout 3: a note on its lowest-fret string ends at its Duration (or its techniques).
    assert {"String", "Bend", "Tech", "Pitch", "Position", "Bar"} <= g["Duration"]
    assert "Tech" in g["String"] and "Pitch" in g["Tech"] and "Bend" not in g["Tech"]
    two = [tok[t] for t in ("Bar_None", "TimeSig_4/4", "Position_0", "Pitch_60", "Duration_1.0.8", "Pitch_64",
                            "Duration_1.0.8", "String_1")]
    assert tok.tokens_errors(miditok.TokSequence(ids=two)) == 0
    assert tok.tokens_errors(miditok.TokSequence(ids=two[:4] + two[5:])) > 0  # a Pitch without its Duration


def test_a_string_only_off_the_lowest_fret_string(tok):
    """Layout 3 writes a String only for a note its lowest-fret string does not play; decoding gives the others
    that string, in the tuning and capo decoding is told."""
    score = symusic.Score(480)
    score.tempos.append(symusic.Tempo(0, 100))
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=25)
    for k, p in enumerate((45, 50, 55)):  # A2, D3, G3
        tr.notes.append(symusic.Note(k * 480, 480, p, 90))
    score.tracks.append(tr)
    # A2 on the A string (its lowest fret: open), D3 on the A string at fret 5 (not its lowest: D open),
    # G3 on the G string open.
    gs = GuitarScore(score=score, tuning=STANDARD_TUNING, capo=0, frets=[(5, 0), (5, 5), (3, 0)])
    back, ids = round_trip(tok, gs)
    toks = [tok[i] for i in ids]
    assert [t for t in toks if t.startswith("String_")] == ["String_5"]
    assert toks[toks.index("Pitch_50") + 2] == "String_5"
    assert back.frets == [(5, 0), (5, 5), (3, 0)]
    # With a capo on fret 2 the A string cannot sound A2: the same tokens put it on the low E, fret 3 above the capo.
    assert tok.decode(ids, tuning=gs.tuning, capo=2).frets[0] == (6, 3)


def test_layout_2_is_still_read_and_writes_every_string(tmp_path):
    """A run of layout 2 (the shipped model's) keeps working: its tokenizer writes a String per note and
    tokens_errors counts a note without one."""
    two = build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=2))
    two.save(tmp_path / "tokenizer.json")
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert again.config.additional_params["tab_layout"] == 2 and again.vocab == two.vocab
    gs = fretted(read_guitar(FIX / "tabs" / "riff.txt")[0])
    _, ids = round_trip(again, gs)
    assert sum(again[i].startswith("String_") for i in ids) == n_notes(again, ids)
    assert multiset(again.decode(ids, tuning=gs.tuning, capo=gs.capo)) == multiset(gs)
    assert again.tokens_types_graph["Duration"] - {"EOS", "PAD", "MASK"} == {"String"}
    bad = [again[t] for t in ("Bar_None", "TimeSig_4/4", "Position_0", "Pitch_60", "Duration_1.0.8", "Pitch_64",
                              "Duration_1.0.8", "String_1")]
    assert again.tokens_errors(miditok.TokSequence(ids=bad)) > 0  # a note without its String
    assert again.tokens_errors(miditok.TokSequence(ids=bad[:5] + [again["String_2"]] + bad[5:])) == 0
    three = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    assert len(round_trip(three, gs)[1]) < len(ids)  # the riff's notes mostly sit on their lowest-fret strings


def test_velocity_only_with_dynamics():
    loud = build_tokenizer(DataConfig(tokenizer="TabREMI"), dynamics=True)
    gs = fretted(read_guitar(FIX / "tabs" / "riff.txt")[0])
    back, ids = round_trip(loud, gs)
    toks = [loud[i] for i in ids]
    k = toks.index(next(t for t in toks if t.startswith("Pitch_")))
    string = back.frets[0][0]
    written = string != lowest_fret_string(gs.tuning, gs.capo, back.track.notes[0].pitch)
    assert toks[k + 1].startswith("Velocity_") and toks[k + 2].startswith("Duration_")
    assert (toks[k + 3] == f"String_{string}") == written
    assert multiset(back) == multiset(gs)
    assert loud.config.additional_params["tab_velocities"].startswith("kept")


def test_an_older_layout_is_refused_with_the_fix(tok, tmp_path):
    tok.save(tmp_path / "tokenizer.json")
    data = json.loads((tmp_path / "tokenizer.json").read_text())
    del data["config"]["additional_params"]["tab_layout"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(GuitarformerError, match="prepare"):
        load_tokenizer(tmp_path / "tokenizer.json")


def _line(tuning: tuple[int, ...], capo: int) -> GuitarScore:
    """Every string of the tuning, open then at frets 3 and 12, one note per beat."""
    score = symusic.Score(480)
    score.tempos.append(symusic.Tempo(0, 100))
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=25)
    frets = []
    for k, (s, f) in enumerate((s, f) for f in (0, 3, 12) for s in range(len(tuning), 0, -1)):
        tr.notes.append(symusic.Note(k * 480, 480, pitch_of(s, f, tuning, capo), 90))
        frets.append((s, f))
    score.tracks.append(tr)
    return GuitarScore(score=score, tuning=tuning, capo=capo, frets=frets,
                       techniques=[Technique(hammer=f == 3) for _, f in frets])


@pytest.mark.parametrize("tuning, capo", [(TUNINGS["standard"], 0), (TUNINGS["drop-d"], 2), (TUNINGS["open-g"], 5),
                                          (TUNINGS["dadgad"], 0), (TUNINGS["seven-string"], 0),
                                          ((28, 33, 38, 43), 0), ((28, 33, 38, 43, 48), 1),
                                          ((30, 35, 40, 45, 50, 55, 59, 64), 0)])
def test_every_tuning_from_four_to_eight_strings(tok, tuning, capo):
    gs = _line(tuning, capo)
    back, ids = round_trip(tok, gs)
    assert tok.tokens_errors(miditok.TokSequence(ids=ids)) == 0
    assert back.frets == gs.frets and back.techniques == gs.techniques


def test_frets_past_the_24th_come_back_as_written(tok):
    """Human tabs write frets past the 24 the sampler plays (27 on the high E); decoding keeps them."""
    gs = _line(STANDARD_TUNING, 0)
    gs.track.notes.append(symusic.Note(40 * 480, 480, 64 + 27, 90))
    gs.frets.append((1, 27))
    gs.techniques.append(PLAIN)
    back, _ = round_trip(tok, gs)
    assert back.frets[-1] == (1, 27) and back.frets == gs.frets


def test_more_strings_than_the_tokenizer_holds_is_a_skipped_file(tok):
    nine = (26, 30, 35, 40, 45, 50, 55, 59, 64)
    gs = _line(nine[1:], 0)
    gs.tuning = nine
    with pytest.raises(SkipFile, match="9-string"):
        tok.encode(gs)


def test_bpe_on_tab_tokens(tmp_path):
    tok = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    parts = [fretted(read_guitar(FIX / n)[0]) for n in ("tabs/riff.txt", "tabs/drop_d.txt", "io/drop_d_capo.gp5")]
    seqs = [encode(tok, gs) for gs in parts]
    from guitarformer.data.prepare import train_bpe

    split = {"train": [list(s) for s in seqs * 4]}
    train_bpe(tok, split, len(tok) + 20)
    assert tok.is_trained
    for gs in parts:
        back, ids = round_trip(tok, gs)
        assert any(i >= len(tok.vocab) for i in ids)  # merged tokens
        assert multiset(back) == multiset(gs)


def test_tuning_decides_the_frets(tok):
    gs = fretted(read_guitar(FIX / "tabs" / "drop_d.txt")[0])
    assert gs.tuning == TUNINGS["drop-d"]
    back, ids = round_trip(tok, gs)
    assert back.frets == [f for _, f in sorted(zip([(n.time, n.pitch) for n in gs.track.notes], gs.frets))] or \
        Counter(back.frets) == Counter(gs.frets)
    # a tuning whose strings cannot hold the pitches leaves the fingering to fret()
    low = tok.decode(ids, tuning=tuple(p + 30 for p in gs.tuning))
    assert low.frets is None and len(low.track.notes) == len(back.track.notes)


def test_unplayable_notes_stay_unplayable(tok):
    gs = fretted(read_guitar(FIX / "tabs" / "riff.txt")[0])
    gs.score.tracks[0].notes.append(symusic.Note(0, 240, 30, 90))  # F#1: below a guitar's low E
    gs.track.notes.sort(key=lambda n: (n.time, n.pitch))
    gs.frets, gs.techniques = fret(gs.track.notes, gs.tuning), None
    assert UNPLAYABLE in gs.frets
    back, ids = round_trip(tok, gs)
    assert tok.tokens_errors(miditok.TokSequence(ids=ids)) == 0
    assert multiset(back) == multiset(gs)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/guitar is absent")
def test_round_trip_over_real_tabs(tok):
    """At least 99.9% of notes come back with their string, fret and technique over real GP and ASCII tabs."""
    files = sorted(p for p in SHARED.rglob("*") if p.suffix.lower() in (".gp3", ".gp4", ".gp5", ".txt")
                   and "classtab" not in p.parts[:-3])
    files += sorted((SHARED / "classtab" / "app" / "tabs").glob("*.txt"))
    random.Random(0).shuffle(files)
    total = same = parts = 0
    unread: dict[str, str] = {}
    for f in files[:150]:
        try:
            read = read_guitar(f)
        except SkipFile:  # readable, not a guitar part: no notes to compare
            continue
        except Exception as e:  # counted and reported: a reader failing here is a finding, not noise
            unread[f.name] = f"{type(e).__name__}: {e}"
            continue
        for gs in read:
            if not gs.frets or len(gs.track.notes) < 2:
                continue
            parts += 1
            back, _ = round_trip(tok, gs)
            want = multiset(dataclasses.replace(gs))
            got = multiset(back) if back.frets is not None else Counter()
            total += sum(want.values())
            same += sum((want & got).values())
    assert parts > 20 and total > 1000
    print(f"tab tokens round trip: {same}/{total} notes ({same / total:.2%}) in {parts} parts; "
          f"{len(unread)} files failed to read: {unread}")
    assert len(unread) <= 3, unread
    assert same / total >= 0.999, f"{same}/{total} notes kept string, fret and technique"


def test_prepare_with_tab_tokens_says_where_each_fingering_came_from(tmp_path):
    """Sources with a fingering keep the human one; the others get fret()'s; the manifest says which."""
    import json
    import shutil

    from guitarformer.data.dataset import TokenSplit
    from guitarformer.data.prepare import PrepareOptions, prepare

    src = tmp_path / "in"
    src.mkdir()
    for name in ("io/drop_d_capo.gp5", "io/band.mid", "tabs/riff.txt", "tabs/drop_d.txt"):
        shutil.copy(FIX / name, src / Path(name).name)
    out = tmp_path / "ds"
    meta = prepare([src], out, DataConfig(tokenizer="TabREMI"), options=PrepareOptions(workers=1, progress=False))
    lines = {Path(d["path"]).name: d for d in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    ok = {k: v for k, v in lines.items() if v["status"] == "ok"}
    assert {k: v["fingering"] for k, v in ok.items()} == {
        "drop_d_capo.gp5": "source", "band.mid": "fret()", "riff.txt": "source", "drop_d.txt": "source"}
    tok = load_tokenizer(out / "tokenizer.json")
    assert isinstance(tok, TabREMI) and meta["tokenizer"] == "TabREMI"
    names = [tok[int(i)] for split in ("train", "val", "test") if meta["tokens"].get(split)
             for k in range(TokenSplit(out, split).num_sequences) for i in TokenSplit(out, split).sequence(k)]
    strings, notes = sum(t.startswith("String_") for t in names), sum(t.startswith("Pitch_") for t in names)
    assert 0 < strings < notes  # the human fingerings leave the lowest-fret string now and then


@pytest.mark.slow
def test_tab_model_samples_its_own_strings_and_techniques(tmp_path):
    """A run trained on tab tokens writes riffs whose fingering comes from the tokens it sampled (fret() only
    for a note its sampled string cannot play), through sample --tab/--gp and with a prompt."""
    import copy
    import shutil

    import torch
    from click.testing import CliRunner

    from guitarformer.cli import main
    from guitarformer.config import load_config
    from guitarformer.data.prepare import PrepareOptions, prepare
    from guitarformer.compose.riffs import Draws, generate_riffs
    from guitarformer.generation.decode.sampling import SamplingParams
    from guitarformer.runs import load_run
    from guitarformer.training.loop import train

    src = tmp_path / "in"
    src.mkdir()
    for name in ("io/drop_d_capo.gp5", "io/drop_d_capo.gp4", "tabs/riff.txt", "tabs/drop_d.txt", "tabs/chords.txt",
                 "tabs/seven_string.txt", "io/band.mid"):
        shutil.copy(FIX / name, src / Path(name).name)
    prepare([src], tmp_path / "ds", DataConfig(tokenizer="TabREMI"), options=PrepareOptions(workers=1, progress=False))
    cfg = copy.deepcopy(load_config("tiny", ["train.max_steps=30"]))
    cfg.data.dataset = str(tmp_path / "ds")
    train(cfg, run_dir=tmp_path / "run", progress=False)
    loaded = load_run(tmp_path / "run")
    model, tok, rcfg = loaded.model, loaded.tokenizer, loaded.cfg
    assert isinstance(tok, TabREMI)
    torch.manual_seed(0)
    checked = 0
    for riff in generate_riffs(model, tok, rcfg, SamplingParams(64, top_p=0.95), Draws(6, 1)):
        played = decode_guitar(tok, riff.ids, riff.gs.tuning)
        if played.frets is None or not riff.gs.track.notes:
            continue
        kept = [a for a, b in zip(riff.gs.frets, played.frets) if b != UNPLAYABLE]
        assert kept == [b for b in played.frets if b != UNPLAYABLE]  # the model's own strings and frets
        checked += len(kept)
    assert checked > 0
    r = CliRunner().invoke(main, ["sample", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "s" / "r.mid"),
                                  "--tab", str(tmp_path / "s" / "r.txt"), "--gp", str(tmp_path / "s" / "r.gp5"),
                                  "--max-new-tokens", "64", "--seed", "2"])
    assert r.exit_code in (0, 2), r.output  # 2: a random tiny model may write no note (said, not a traceback)
    assert "Traceback" not in r.output
    r = CliRunner().invoke(main, ["sample", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "p" / "r.mid"),
                                  "--prompt", str(FIX / "tabs" / "riff.txt"), "--bars", "2", "--tab",
                                  str(tmp_path / "p" / "r.txt")])
    assert r.exit_code in (0, 2) and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("layout", [3, 2])
def test_constraint_allows_only_strings_that_can_play_the_note(layout):
    """After a note's Duration the next token names a string that can play its pitch in the tuning (and capo): layout
    2 a String first; layout 3 a String only for a string other than the lowest-fret one, which the note takes by
    going on without a String (a Bend here, or the next Pitch), allowed where that string can play it."""
    import torch

    from guitarformer.generation.constraint.guitar import GuitarConstraint

    tok = build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=layout))
    head = [tok["BOS_None"], tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"]]
    note = [tok["Duration_1.0.8"]]
    cases = [(STANDARD_TUNING, 0, 40, {6}), (STANDARD_TUNING, 0, 64, {1, 2, 3, 4, 5, 6}), (STANDARD_TUNING, 0, 65, {1, 2, 3, 4, 5}),
             (TUNINGS["drop-d"], 0, 38, {6}), (STANDARD_TUNING, 2, 42, {6}), (STANDARD_TUNING, 0, 90, set())]
    for tuning, capo, pitch, want in cases:
        c = GuitarConstraint(tok, tuning, capo=capo)
        ids = torch.tensor([head + [tok[f"Pitch_{pitch}"]] + note])
        c.start(ids)
        allowed = c.mask(ids[:, -1])[0]
        got = {s for s in range(1, 9) if allowed[tok[f"String_{s}"]]}
        if not want:
            continue
        if layout == 2:
            assert got == want, (tuning, capo, pitch, got)
            assert not allowed[tok["Pitch_60"]] and not allowed[tok["Bend_1"]]  # the grammar: a String first
        else:
            low = lowest_fret_string(tuning, capo, pitch)
            assert low in want and got == want - {low}, (tuning, capo, pitch, got)
            assert allowed[tok["Bend_1"]] and allowed[tok["Pitch_60"]]  # on its lowest-fret string


def test_constrained_tab_sampling_writes_only_playable_strings(tok):
    import torch

    from guitarformer.generation.constraint.guitar import GuitarConstraint
    from guitarformer.generation.decode.engine import StopTokens, generate
    from guitarformer.generation.decode.sampling import SamplingParams
    from guitarformer.models import build_model

    torch.manual_seed(0)
    model = build_model(dict(kind="decoder", vocab_size=len(tok), block_size=128, n_layer=1, n_head=2, n_embd=32,
                             dropout=0.0))
    start = torch.tensor([[tok["BOS_None"]]] * 4)
    out = generate(model, start, SamplingParams(120), generator=torch.Generator().manual_seed(0),
                   constraint=GuitarConstraint(tok, TUNINGS["drop-d"]), stops=StopTokens(eos_id=tok["EOS_None"]))
    notes = 0
    for row in out.tolist():
        gs = decode_guitar(tok, row, TUNINGS["drop-d"])
        if gs.frets is not None:
            notes += len(gs.frets)
            assert UNPLAYABLE not in gs.frets
        assert tok.tokens_errors(miditok.TokSequence(ids=[i for i in row[1:] if i != tok["EOS_None"]])) == 0
    assert notes > 0


def test_transposition_moves_the_hand_not_the_string(tok):
    """Augmenting tab tokens shifts pitches with their strings kept, so no fret may leave the neck: a line at
    fret 3 on the A string and fret 22 on the B string can move down 3 and up 2 semitones, never further
    (the pitch range alone would allow -5..+5). Layout 3 writes the moved line as `encode` does: the A-string note,
    on its pitch's lowest-fret string up to a shift of +1, gets a String_5 from +2 on (D3 is the open D string);
    layout 2 keeps a String on both notes."""
    import numpy as np
    import torch

    from guitarformer.data.dataset import PitchShifter
    from guitarformer.vocab.tab_tokens import decode_tab

    def line(shift: int) -> GuitarScore:
        score = symusic.Score(480)
        track = symusic.Track(program=25)
        for time, pitch in ((0, 48), (480, 81)):
            track.notes.append(symusic.Note(time, 480, pitch + shift, 90))
        score.tracks.append(track)
        return GuitarScore(score, frets=[(5, 3 + shift), (2, 22 + shift)])

    two = build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=2))
    for t in (tok, two):
        ids = encode(t, line(0))
        shifter = PitchShifter(t, 5)
        seen = set()
        for seed in range(60):
            out = shifter(np.array(ids), torch.Generator().manual_seed(seed)).tolist()
            pitches = [int(t[i].split("_")[1]) for i in out if t[i].startswith("Pitch_")]
            s = pitches[0] - 48
            seen.add(s)
            assert pitches[1] - 81 == s  # one shift for the whole window
            assert out == encode(t, line(s))
            _, strings, _ = decode_tab(t, out[1:-1], (STANDARD_TUNING, 0))
            assert strings == [5, 2]
            written = [t[i] for i in out if t[i].startswith("String_")]
            assert written == (["String_5", "String_2"] if t is two or s >= 2 else ["String_2"])
        assert seen == set(range(-3, 3))
