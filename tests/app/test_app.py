"""guitarformer.app, the commands as functions: requests and their checks, the run a call used, one reader of
user files and one writer by suffix, the splice of a continuation, and the CLI options that reach them. Tiny
untrained runs: what is checked is what the commands do with whatever the model writes."""

from __future__ import annotations

import copy
from pathlib import Path

import guitarpro
import pytest
import symusic
import torch
from click.testing import CliRunner

from guitarformer.app import InfillRequest, Outputs, SampleRequest, TabRequest, infill, load_run
from guitarformer.app import read_user_file, run_info, sample, tab, write_score
from guitarformer.app.prompt import Prompt
from guitarformer.app.splice import continue_part
from guitarformer.cli import main
from guitarformer.config import Config, DataConfig, ModelConfig
from guitarformer.vocab.controls import POS_VALUES
from guitarformer.vocab.tokenization import build_tokenizer
from guitarformer.errors import GuitarformerError
from guitarformer.models import build_model
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.music.song import Song
from guitarformer.render.gp5 import GENERATED_MARK
from guitarformer.studio.forms import sample_form
from guitarformer.runs.checkpoint import save_checkpoint

FIX = Path(__file__).parents[1] / "fixtures"
SONG = FIX / "tabs" / "lyrics_multistaff.txt"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(folder: Path, data: DataConfig, step: int | None = None, best_val: float | None = None) -> Path:
    tok = build_tokenizer(data)
    cfg = Config()
    cfg.data = copy.deepcopy(data)
    cfg.model = ModelConfig(prev_token=False, copy=False,
                            vocab_size=len(tok), block_size=256, n_layer=1, n_head=2, n_embd=32, dropout=0.0,
                            pos="learned")
    cfg.sample.max_new_tokens = 150
    folder.mkdir(parents=True)
    tok.save(folder / "tokenizer.json")
    torch.manual_seed(0)
    state = {"config": cfg.to_dict(), "model": build_model(copy.deepcopy(cfg.model)).state_dict()}
    if step is not None:
        state.update(step=step, best_val=best_val)
    save_checkpoint(folder / "ckpt" / "last.pt", state)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("app-runs")
    return {"remi": _run(root / "remi", DataConfig(tokenizer="REMI"), step=7, best_val=1.25),
            "tab": _run(root / "tab", DataConfig(infill=0.5)),
            "controls": _run(root / "controls", DataConfig(controls=True))}


def _cli(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


# ---------------------------------------------------------------- outputs: suffixes and distinct paths


@pytest.mark.parametrize("args,needle", [
    (("--out", "a.mid", "--gp", "a.mid"), "--gp"),
    (("--out", "b.mid", "--tab", "b.mid"), "--tab"),
    (("--out", "r.mid", "--tab", "riff.gp5"), "--tab"),
    (("--out", "r.mid", "--gp", "riff.mid"), "--gp"),
    (("--out", "r.mid", "--wav", "riff.mp3"), "--wav"),
    (("--out", "r.txt"), "--out"),
])
def test_sample_outputs_check_their_suffix(runs, tmp_path, args, needle):
    paths = [str(tmp_path / a) if k % 2 else a for k, a in enumerate(args)]
    r = _cli("sample", "--run", runs["remi"], *paths)
    assert r.exit_code == 2 and needle in r.stderr, r.output
    assert not list(tmp_path.iterdir())  # checked before anything is sampled or written


def test_two_outputs_never_share_a_path(tmp_path):
    """Each kind has its own suffixes, so two valid outputs cannot name one file; an option that takes any format
    (`--out`) cannot ask for a kind another option writes."""
    r = _cli("infill", SONG, "--bars", "2", "--out", tmp_path / "x.txt", "--tab", tmp_path / "y.txt")
    assert r.exit_code == 2 and "both ask for an output of one kind (ASCII tab)" in r.stderr
    r = _cli("tab", SONG, "--out", tmp_path / "x.mid")
    assert r.exit_code == 2 and ".gp5" in r.stderr


# ---------------------------------------------------------------- the run a call used


def test_the_summary_names_the_run_step_and_val_loss(runs, tmp_path):
    r = _cli("sample", "--run", runs["remi"], "--out", tmp_path / "r.mid", "--seed", 1, "--bars", 2)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == f"run {runs['remi']} (last.pt, step 7, val loss 1.250)"


def test_run_info_says_which_options_a_run_honours(runs):
    plain = run_info(load_run(runs["remi"]))
    assert plain.kind == "decoder" and plain.step == 7 and plain.val_loss == 1.25 and not plain.can_infill
    assert not plain.options["key"].available and "control" in plain.options["key"].reason
    assert plain.options["time_signature"].available and "3/4" in plain.options["time_signature"].values
    assert plain.options["tuning"].available and "drop-d" in plain.options["tuning"].values
    ctl = run_info(load_run(runs["controls"]))
    assert ctl.options["key"].available and "E:minor" in ctl.options["key"].values
    assert ctl.options["hand_position"].values == list(POS_VALUES)
    assert not ctl.options["style"].available  # a tokenizer without styles learned none
    assert run_info(load_run(runs["tab"])).can_infill


# ---------------------------------------------------------------- sample through the API


def test_api_sample_returns_scores_and_writes_only_what_is_asked(runs, tmp_path):
    loaded = load_run(runs["remi"])
    res = sample(SampleRequest(num_samples=2, bars=2, seed=3), loaded)
    assert len(res.riffs) == 2 and all(r.files == {} for r in res.riffs) and not list(tmp_path.iterdir())
    assert res.lines[0] == loaded.describe() == res.run
    again = sample(SampleRequest(num_samples=2, bars=2, seed=3, outputs=Outputs(midi=tmp_path / "r.mid",
                                                                                 gp=tmp_path / "r.gp5")), loaded)
    assert [r.files for r in again.riffs] == [{"midi": tmp_path / f"r_00{k}.mid", "gp": tmp_path / f"r_00{k}.gp5"}
                                              for k in range(2)]
    assert [[n.pitch for n in r.gs.track.notes] for r in again.riffs] == \
        [[n.pitch for n in r.gs.track.notes] for r in res.riffs]  # writing changes nothing of what is sampled


def test_sample_track_chooses_the_part_to_continue(runs, tmp_path):
    s = symusic.Score(480)
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    for program, pitch in ((25, 52), (27, 64)):
        tr = symusic.Track(name=f"gtr{program}", program=program)
        tr.notes.extend(symusic.Note(bar * 1920, 960, pitch, 90) for bar in range(3))
        s.tracks.append(tr)
    song = tmp_path / "two.mid"
    s.dump_midi(str(song))
    for track, name, other in (("2", "gtr27", "gtr25"), ("gtr25", "gtr25", "gtr27")):
        out = tmp_path / f"c{track}.mid"
        r = _cli("sample", "--run", runs["remi"], "--prompt", song, "--track", track, "--out", out, "--bars", 1)
        assert r.exit_code == 0, r.output
        got = {t.name: t.notes for t in symusic.Score(str(out)).tracks}
        assert set(got) == {"gtr25", "gtr27"}  # the song's other part is written back, in its place
        pitch = 52 if name == "gtr25" else 64
        assert [n.pitch for n in got[name]][:3] == [pitch] * 3 and len(got[name]) > 3  # continued
        assert [(n.time, n.pitch) for n in got[other]] == [(bar * 1920, 116 - pitch) for bar in range(3)]  # as it was
        assert "its other part as it was" in r.output
    r = _cli("sample", "--run", runs["remi"], "--prompt", song, "--track", "9", "--out", tmp_path / "x.mid")
    assert r.exit_code == 2 and "has no track 9" in r.stderr
    r = _cli("sample", "--run", runs["remi"], "--track", "1", "--out", tmp_path / "x.mid")
    assert r.exit_code == 2 and "--prompt" in r.stderr


def test_a_continuation_keeps_at_most_the_bars_asked_for():
    """The model's notes after the prompt are cut at the file's bar line `bars` bars on, whatever it counted."""
    gs = GuitarScore(score=symusic.Score(480), frets=[(5, 0), (5, 2)])
    gs.score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    gs.score.tracks.append(symusic.Track(program=25))
    gs.track.notes.extend([symusic.Note(0, 480, 45, 90), symusic.Note(1920, 480, 47, 90)])
    window = symusic.Score(8)
    window.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    window.tracks.append(symusic.Track(program=25))
    window.tracks[0].notes.extend([symusic.Note(0, 8, 45, 90), symusic.Note(32, 8, 47, 90)])
    dec = window.copy()
    dec.tracks[0].notes.extend(symusic.Note(t, 8, 52, 90) for t in (64, 96, 128))  # bars 3, 4 and 5
    file = Prompt(gs=gs, ids=[], start=0, new_from=3840, bars=2, prompt_bars=2)
    pitches = GuitarScore(score=dec, tuning=gs.tuning)  # a model of pitches alone: fret() fingers its notes
    whole = continue_part(file, pitches, window, gs.tuning, None, 25, None)
    assert whole.new_notes == 3 and whole.new_bars == 3
    one = continue_part(file, pitches, window, gs.tuning, None, 25, None, bars=1)
    assert one.new_notes == 1 and one.new_bars == 1
    assert [(n.time, n.pitch) for n in one.gs.track.notes] == [(0, 45), (1920, 47), (3840, 52)]
    assert one.gs.frets[:2] == [(5, 0), (5, 2)] and one.gs.extra["generated_from_tick"] == 3840
    # A tab-token model's notes keep the strings and techniques it wrote (E3 on the A string's 7th fret, not fret()'s
    # D string), unless a position asks the part fingered again.
    tab = GuitarScore(score=dec, tuning=gs.tuning, frets=[(5, 0), (5, 2), (5, 7), (5, 7), (5, 7)],
                      techniques=[PLAIN, PLAIN, Technique(hammer=True), PLAIN, PLAIN])
    kept = continue_part(file, tab, window, gs.tuning, None, 25, None)
    assert kept.gs.frets == [(5, 0), (5, 2), (5, 7), (5, 7), (5, 7)] != whole.gs.frets
    assert kept.gs.techniques[2] == Technique(hammer=True)
    again = continue_part(file, tab, window, gs.tuning, None, 25, 0)
    assert again.gs.frets[2:] != [(5, 7)] * 3 and not any(again.gs.techniques or [])


# ---------------------------------------------------------------- files in and out


def test_read_user_file_says_what_is_wrong(tmp_path):
    with pytest.raises(GuitarformerError, match="does not exist"):
        read_user_file(tmp_path / "nope.gp5")
    binary = tmp_path / "prog.mid"
    binary.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(200))
    with pytest.raises(GuitarformerError) as e:
        read_user_file(binary)
    assert e.value.fix and "Traceback" not in e.value.problem
    assert read_user_file(FIX / "io" / "band.mid", track="piano", tracks="all").track.program == 0


def test_write_score_picks_the_writer_by_suffix_and_marks_generated_bars(tmp_path):
    gs = read_user_file(SONG)
    gs.extra["generated_from_tick"] = 2 * 1920  # bar 3 of the 4/4 song
    for name in ("s.mid", "s.txt", "s.tab", "s.gp5"):
        assert write_score(gs, tmp_path / "deep" / name).stat().st_size > 0
    assert "[generated from here]" in (tmp_path / "deep" / "s.txt").read_text()
    markers = [h.marker.title if h.marker else None for h in guitarpro.parse(str(tmp_path / "deep" / "s.gp5"))
               .measureHeaders]
    assert markers == [None, None, GENERATED_MARK, None]
    with pytest.raises(GuitarformerError, match="no writer for .mp3"):
        write_score(gs, tmp_path / "s.mp3")


def test_a_continuation_of_a_tab_keeps_the_strings_the_model_wrote(runs, monkeypatch):
    """`sample --prompt` with a tab-token run: the new bars carry the strings and techniques of the model's tokens
    (decode_guitar), the prompt's notes the file's own, and fret() is not asked to finger anything."""
    import importlib

    app_sample = importlib.import_module("guitarformer.app.sample")  # the module: the package exports `sample`
    app_splice = importlib.import_module("guitarformer.app.splice")

    seen, fingered = {}, []
    real_continue, real_finger = app_splice.continue_part, app_splice.finger_score

    def spy_continue(file, dec, window, *args):
        seen.update(dec=dec, window=window)
        return real_continue(file, dec, window, *args)

    monkeypatch.setattr(app_sample, "continue_part", spy_continue)
    monkeypatch.setattr(app_splice, "finger_score", lambda *a, **k: fingered.append(a) or real_finger(*a, **k))
    song = read_user_file(SONG)
    riff = sample(SampleRequest(prompt=SONG, bars=2, seed=4), load_run(runs["tab"])).riffs[0]
    n, w = riff.new_notes, len(seen["window"].tracks[0].notes)
    assert n > 0 and seen["dec"].frets is not None and not fingered
    notes = list(riff.gs.track.notes)
    assert riff.gs.frets[:len(song.frets)] == song.frets  # the file's own fingering, as written
    assert [m.pitch for m in notes[-n:]] == [m.pitch for m in list(seen["dec"].track.notes)[w:w + n]]
    assert riff.gs.frets[-n:] == seen["dec"].frets[w:w + n]


def test_tab_api_gives_the_text_the_cli_prints():
    res = tab(TabRequest(file=FIX / "tabs" / "riff.txt", width=60))
    r = _cli("tab", FIX / "tabs" / "riff.txt", "--width", 60)
    assert r.exit_code == 0 and res.text == r.stdout and len(res.parts) == 1 and res.parts[0].frets


def test_infill_api_takes_a_score_and_returns_it_filled(runs, tmp_path):
    loaded = load_run(runs["tab"])
    gs = read_user_file(SONG)
    res = infill(InfillRequest(song=gs, bars=(2, 3), seed=1, outputs=Outputs(tab=tmp_path / "f.txt")), loaded)
    assert res.files == {"tab": tmp_path / "f.txt"} and res.lines[0] == loaded.describe()
    assert res.score.extra["generated_from_tick"] == 1920
    assert len(res.score.frets) == len(res.score.track.notes) == len(res.score.techniques)
    with pytest.raises(GuitarformerError, match="has 4 bars"):
        infill(InfillRequest(song=read_user_file(SONG), bars=(5, 6)), loaded)


def test_infill_api_takes_a_song_and_fills_the_part_named(runs, tmp_path):
    """A Song in memory: `track` names the part among its stringed ones (as `--track` with --tracks all); every other
    part comes back as it was, in its place; none named: the first guitar, with a warning when there are several."""
    loaded = load_run(runs["tab"])
    guitar = read_user_file(SONG)
    drums = copy.deepcopy(guitar)
    drums.score.tracks[0].is_drum = True
    second = copy.deepcopy(guitar)
    song = Song([drums, guitar, second], name="band")
    res = infill(InfillRequest(song=song, bars=(2, 3), track="2", tracks="all", seed=1,
                               outputs=Outputs(gp=tmp_path / "f.gp5")), loaded)
    assert res.parts[:2] == [drums, guitar] and res.parts[2] is res.score and res.score is not second
    assert len(guitarpro.parse(str(tmp_path / "f.gp5")).tracks) == 3 and "the 2 other parts" in res.lines[-1]
    res = infill(InfillRequest(song=song, bars=(2, 3), seed=1), loaded)
    assert res.parts[1] is res.score and res.warnings == ["band has 2 parts: filling the first (choose another with "
                                                          "--track)"]
    with pytest.raises(GuitarformerError, match="band has no track 3"):
        infill(InfillRequest(song=song, bars=(2, 3), track="3", tracks="all"), loaded)


def test_program_names_a_guitar_sound_only(tmp_path):
    """--program changes no note: a program other than a General MIDI guitar is refused before anything loads."""
    with pytest.raises(GuitarformerError, match="--program 40") as e:
        sample(SampleRequest(outputs=Outputs(midi=tmp_path / "r.mid"), program=40))
    assert "24-31" in e.value.fix and not (tmp_path / "r.mid").exists()


def test_shipped_model_info_lists_what_its_training_data_held():
    """run_info offers the values the shipped model learned (chords, drop D, palm mutes; no other technique, no
    seven-string: too few pieces), not its vocabulary."""
    info = run_info(load_run())
    assert info.options["polyphony"].values == ["single", "dyads", "chords"]
    assert info.options["tuning"].values == ["standard", "drop-d"]
    assert info.options["palm_mute"].values == ["none", "most"] and info.options["techniques"].values == ["none"]
    assert {"rock", "classical", "jig"} <= set(info.options["style"].values)
    assert "5/4" not in info.options["time_signature"].values and "6/8" in info.options["time_signature"].values
    assert info.options["hand_position"].values == list(POS_VALUES)  # held by the sampler: every position


def test_studio_form_takes_the_guard_and_bar_schedules():
    info = run_info(load_run())
    form = sample_form({"guard": False, "hand_position": "1-2:0,3-4:7", "density": "1-2:low,3-4:high"}, info)
    assert form.options == {"guard": False, "hand_position": "1-2:0,3-4:7", "density": "1-2:low,3-4:high"}
    assert sample_form({"hand_position": "7"}, info).options == {"hand_position": 7}
    with pytest.raises(GuitarformerError, match="guard must be true or false"):
        sample_form({"guard": "no"}, info)


def test_the_app_layer_leaves_music21_unimported(tmp_path):
    """music21 takes a fifth of a second to import: the app layer (sample, tab, infill from a MIDI or Guitar Pro file,
    the run's loading) must not wait for it; a MusicXML/ABC file, or building the built-in corpus, imports it."""
    import subprocess
    import sys

    code = ("import sys, guitarformer.app, guitarformer.cli, guitarformer.data.corpus, guitarformer.readers\n"
            "print('music21' in sys.modules)\n"
            "guitarformer.readers.from_music21\n"
            "print('music21' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
