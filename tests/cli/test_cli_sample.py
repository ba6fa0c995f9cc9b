"""The `sample` command as a user meets it: prompts continued whole, new bars marked, the token budget, riffs that
do not depend on the batch, instrument names, tunings, option checks and output folders. A tiny untrained model
(seconds on a CPU): what is checked is what the command does with whatever the model writes."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import symusic
import torch
from click.testing import CliRunner
from helpers.tiny_runs import untrained_run

from guitarformer.cli import main
from guitarformer.config import Config, DataConfig
from guitarformer.vocab.tokenization import build_tokenizer, decode
from guitarformer.errors import GuitarformerError
from guitarformer.compose import riffs as riffs_mod
from guitarformer.app import Outputs, SampleRequest
from guitarformer.app import sample as app_sample
from guitarformer.app.prompt import TOKENS_PER_BAR, data_tokens_per_bar, read_prompt, tokens_per_bar
from guitarformer.app.sample import MAX_AUTO_TOKENS
from guitarformer.generation.decode.sampling import sample_next
from guitarformer.music.guitar import TUNINGS, parse_tuning, tuning_lines
from guitarformer.music.score import GuitarScore
from guitarformer.render.midi import write_midi

BLOCK = 96
PROMPT_BARS = 24


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(DataConfig(tokenizer="REMI"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tok):
    return untrained_run(tmp_path_factory.mktemp("run"), tok, BLOCK, max_new_tokens=120)


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory) -> Path:
    """24 bars of 3/4 at 165 BPM for a clean electric guitar (program 27), a track with no name."""
    s = symusic.Score(480)
    s.tempos.append(symusic.Tempo(0, 165))
    s.time_signatures.append(symusic.TimeSignature(0, 3, 4))
    tr = symusic.Track(program=27)
    for bar in range(PROMPT_BARS):
        t = bar * 3 * 480
        tr.notes.append(symusic.Note(t, 480, 45 + bar % 5, 90))
        for beat, p in enumerate((57, 60, 64)):
            tr.notes.append(symusic.Note(t + beat * 480, 240, p + bar % 3, 80))
    s.tracks.append(tr)
    path = tmp_path_factory.mktemp("prompt") / "waltz.mid"
    s.dump_midi(str(path))
    return path


def sample(*args):
    r = CliRunner().invoke(main, ["sample", *map(str, args)], catch_exceptions=False)
    return r


def bar_line(score, n: int) -> int:
    """Tick where bar n begins (bars follow the score's time signatures, 4/4 before any)."""
    tick, lines = 0, [0]
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures)
    num, den = 4, 4
    while len(lines) <= n:
        for t, a, b in sigs:
            if t <= tick:
                num, den = a, b
        tick += score.ticks_per_quarter * 4 * num // den
        lines.append(tick)
    return lines[n]


# ---------------------------------------------------------------- prompts


def test_prompt_window_opens_as_a_piece_does_and_fits_the_context(tok, prompt_file):
    p = read_prompt(tok, prompt_file, BLOCK // 2 - 1)
    names = [str(tok[i]) for i in p.ids]
    assert names[:3] == ["BOS_None", "Bar_None", "TimeSig_3/4"], names[:6]
    tempo = next(float(n.split("_")[1]) for n in names if n.startswith("Tempo_"))
    assert abs(tempo - 165) / 165 < 0.03  # the prompt's tempo, not the default
    assert len(p.ids) <= BLOCK // 2 - 1 and 0 < p.start < p.new_from  # only the last bars fit
    assert p.start % (3 * 480) == 0 and p.new_from == PROMPT_BARS * 3 * 480  # whole bars, new ones after the last
    assert p.prompt_bars == PROMPT_BARS and p.bars == (p.new_from - p.start) // (3 * 480)
    window = decode(tok, p.ids)
    tail = [n.pitch for n in p.gs.track.notes if n.time >= p.start]
    assert [n.pitch for n in window.tracks[0].notes] == tail  # the window is the end of the prompt
    assert tokens_per_bar(tok, Config(), p) == pytest.approx((len(p.ids) - 1) / p.bars)


def test_a_prompt_that_ends_in_empty_bars_is_continued_after_its_last_note(tok, run_dir, prompt_file, tmp_path):
    """A song that closes with empty bars and tempo changes in them (Guitar Pro files often do): the window stops
    at the bar of its last note, so the model writes the bars after it; the file's closing tempo changes give way to
    the new bars. (The window used to end in the empty bars, which the model went on after, past --bars: every
    riff came out empty.)"""
    s = symusic.Score(str(prompt_file))
    end = PROMPT_BARS * 3 * 480
    s.tempos.extend(symusic.Tempo(end + k * 3 * 480, 165 - 20 * k) for k in range(1, 6))  # a ritardando, no notes
    s.time_signatures.append(symusic.TimeSignature(end + 3 * 3 * 480, 4, 4))
    path = tmp_path / "ending.mid"
    s.dump_midi(str(path))
    p = read_prompt(tok, path, BLOCK // 2 - 1)
    assert p.new_from == end and decode(tok, p.ids).end() <= end - p.start  # nothing past the last note's bar
    assert read_prompt(tok, prompt_file, BLOCK // 2 - 1).ids == p.ids  # the window of the file without its ending
    out = tmp_path / "cont.mid"
    r = sample("--run", run_dir, "--prompt", path, "--out", out, "--bars", 2, "--seed", 2)
    assert r.exit_code == 0, r.output
    got = symusic.Score(str(out))
    assert [round(t.qpm) for t in got.tempos] == [165]  # the ritardando belonged to the file's ending
    assert (end + 3 * 3 * 480, 4, 4) not in [(ts.time, ts.numerator, ts.denominator) for ts in got.time_signatures]
    assert any(n.time >= end for n in got.tracks[0].notes)


def test_prompt_continues_the_whole_file_in_its_tempo_meter_and_program(run_dir, prompt_file, tmp_path):
    out = tmp_path / "cont.mid"
    r = sample("--run", run_dir, "--prompt", prompt_file, "--out", out, "--bars", 2, "--seed", 2,
               "--tab", tmp_path / "cont.txt")
    assert r.exit_code == 0, r.output
    assert f"{PROMPT_BARS} from the prompt" in r.stdout
    src, got = symusic.Score(str(prompt_file)), symusic.Score(str(out))
    assert [round(t.qpm, 3) for t in got.tempos] == [165.0]  # a 165 BPM song continues at 165
    assert (got.time_signatures[0].time, got.time_signatures[0].numerator, got.time_signatures[0].denominator) == \
        (0, 3, 4)
    (track,) = got.tracks
    assert track.program == 27 and track.name == "Electric Guitar (clean)"
    new_from = PROMPT_BARS * 3 * 480
    assert [(m.time, m.text) for m in got.markers] == [(new_from, "generated")]
    mine = [(n.time, n.duration, n.pitch) for n in src.tracks[0].notes]
    notes = [(n.time, n.duration, n.pitch) for n in track.notes]
    assert notes[:len(mine)] == mine  # every prompt note, as written: not only the last 256 tokens
    new = notes[len(mine):]
    assert new and all(t >= new_from for t, _, _ in new)
    assert max(t + d for t, d, _ in new) <= bar_line(got, PROMPT_BARS + 2)  # --bars counts new bars


def test_prompt_tempo_option_applies_to_the_new_bars(run_dir, prompt_file, tmp_path):
    out = tmp_path / "fast.mid"
    r = sample("--run", run_dir, "--prompt", prompt_file, "--out", out, "--bars", 1, "--seed", 2, "--tempo", 90)
    assert r.exit_code == 0, r.output
    got = symusic.Score(str(out))
    assert [(t.time, round(t.qpm, 3)) for t in got.tempos] == [(0, 165.0), (PROMPT_BARS * 3 * 480, 90.0)]


def test_riff_ids_prompt_marks_where_the_new_bars_begin(run_dir, tok):
    from guitarformer.runs import load_run

    loaded = load_run(run_dir, None, "cpu")

    model, tok2, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    prompt = [tok2["BOS_None"], tok2["Bar_None"], tok2["TimeSig_4/4"], tok2["Position_0"], tok2["Pitch_52"],
              tok2["Velocity_63"], tok2["Duration_1.0.8"]]
    params = riffs_mod.SamplingParams(60, top_p=0.95, max_bars=1)
    (r,) = riffs_mod.generate_riffs(model, tok2, cfg, params, riffs_mod.Draws(1, 1), riffs_mod.RiffSpec(prompt=prompt))
    assert r.gs.extra["generated_from_tick"] == 4 * r.gs.score.ticks_per_quarter  # the bar after the prompt's
    assert all(n.time >= 4 * r.gs.score.ticks_per_quarter for n in r.gs.track.notes[1:])


# ---------------------------------------------------------------- the token budget


def test_bars_raise_the_token_budget(run_dir, tmp_path, monkeypatch):
    seen = []
    real = riffs_mod.generate
    monkeypatch.setattr(riffs_mod, "generate", lambda *a, **k: seen.append(a[2].max_new_tokens) or real(*a, **k))
    r = sample("--run", run_dir, "--out", tmp_path / "long.mid", "--bars", 40, "--seed", 1)
    assert r.exit_code == 0, r.output
    assert seen[0] >= 40 * TOKENS_PER_BAR  # not the run's 120 tokens (about 4 bars)
    assert seen[0] <= MAX_AUTO_TOKENS
    seen.clear()
    r = sample("--run", run_dir, "--out", tmp_path / "short.mid", "--bars", 40, "--max-new-tokens", 25, "--seed", 0)
    assert seen == [25]  # a budget given by hand is kept...
    assert r.exit_code == 0
    assert "of 40 bars: the token budget (25) ran out; raise --max-new-tokens" in r.stderr  # ...and its cut said
    assert "ran out" not in r.stdout


def test_tokens_per_bar_from_the_runs_data(tiny_dataset, tiny_cfg):
    import json

    import numpy as np

    from guitarformer.vocab.tokenization import bar_ids, load_tokenizer

    tok = load_tokenizer(tiny_dataset / "tokenizer.json")
    cfg = copy.deepcopy(tiny_cfg)
    cfg.data.dataset = str(tiny_dataset)
    est = data_tokens_per_bar(tok, cfg.data.dataset)
    dtype = json.loads((tiny_dataset / "meta.json").read_text())["dtype"]
    ids = np.fromfile(tiny_dataset / "train.bin", dtype=dtype)
    exact = len(ids) / np.isin(ids, bar_ids(tok)).sum()  # REMI: one Bar token a bar
    assert est == pytest.approx(exact, rel=0.1)
    # a riff's budget takes at least a dense bar's tokens (a fiddle bar's average cut rock riffs short)
    assert tokens_per_bar(tok, cfg) == max(est, TOKENS_PER_BAR)
    cfg.data.dataset = str(tiny_dataset / "gone")
    assert tokens_per_bar(tok, cfg) == TOKENS_PER_BAR


def test_an_empty_riff_is_an_error_not_an_empty_file(run_dir, tmp_path):
    out = tmp_path / "e.mid"
    r = sample("--run", run_dir, "--out", out, "--max-new-tokens", 1)
    assert r.exit_code != 0
    assert "empty" in r.stderr and "token budget (1) ran out" in r.stderr and "--max-new-tokens" in r.stderr
    assert not out.exists()


# ---------------------------------------------------------------- reproducible riffs


def test_riff_k_depends_only_on_seed_and_k(run_dir, tmp_path):
    common = ("--run", run_dir, "--seed", 2, "--bars", 2, "--temperature", 1.3)
    runs = {"one": (1, None), "four": (4, None), "pairs": (4, 2), "big_batch": (2, 8)}
    for name, (n, bs) in runs.items():
        extra = ("--batch-size", bs) if bs else ()
        r = sample(*common, "--out", tmp_path / name / "riff.mid", "--num-samples", n, *extra)
        assert r.exit_code == 0, r.output

    def riff(name, k, n):
        p = tmp_path / name / ("riff.mid" if n == 1 else f"riff_{k:03d}.mid")
        return p.read_bytes()

    assert riff("one", 0, 1) == riff("four", 0, 4) == riff("pairs", 0, 4) == riff("big_batch", 0, 2)
    for k in range(1, 4):
        assert riff("four", k, 4) == riff("pairs", k, 4)
    assert riff("four", 1, 4) == riff("big_batch", 1, 2)
    assert len({riff("four", k, 4) for k in range(4)}) == 4  # and they are four different riffs


def test_riff_ids_do_not_depend_on_the_batch(run_dir):
    from guitarformer.runs import load_run

    loaded = load_run(run_dir, None, "cpu")

    model, tok, cfg = loaded.model, loaded.tokenizer, loaded.cfg
    params = riffs_mod.SamplingParams(150, top_p=0.95, max_bars=2)
    alone = riffs_mod.generate_riffs(model, tok, cfg, params, riffs_mod.Draws(1, 4))
    batch = riffs_mod.generate_riffs(model, tok, cfg, params, riffs_mod.Draws(6, 4))
    assert alone[0].ids == batch[0].ids  # no end-token padding from the batch's longest riff
    assert all(r.ids.count(tok["EOS_None"]) <= 1 for r in batch)


def test_sample_next_with_one_generator_per_row_draws_each_row_alone():
    torch.manual_seed(0)
    logits = torch.randn(3, 50)
    gens = [torch.Generator().manual_seed(s) for s in (5, 6, 7)]
    together = sample_next(logits, 1.0, None, 0.9, gens)
    alone = [sample_next(logits[i:i + 1], 1.0, None, 0.9, [torch.Generator().manual_seed(s)])
             for i, s in enumerate((5, 6, 7))]
    assert together.tolist() == [int(a) for a in alone]
    with pytest.raises(ValueError):
        sample_next(logits, 1.0, None, None, gens[:2])


# ---------------------------------------------------------------- what the files say


def test_midi_tracks_are_named_after_their_instrument(tmp_path):
    s = symusic.Score(480)
    s.tempos.append(symusic.Tempo(0, 120))
    for program, name in ((30, "Acoustic Grand Piano"), (25, ""), (26, "Lead")):
        tr = symusic.Track(name=name, program=program)
        tr.notes.append(symusic.Note(0, 480, 52, 90))
        s.tracks.append(tr)
    parts = [GuitarScore(score=symusic.Score(480)) for _ in range(3)]
    for part, tr in zip(parts, s.tracks):
        part.score.tracks.append(tr.copy())
    write_midi(parts, tmp_path / "n.mid")
    got = [t.name for t in symusic.Score(str(tmp_path / "n.mid")).tracks]
    assert got == ["Distortion Guitar", "Acoustic Guitar (steel)", "Lead"]  # a name of its own stays


def test_sampled_track_is_named_after_the_program(run_dir, tmp_path):
    r = sample("--run", run_dir, "--out", tmp_path / "d.mid", "--program", 30, "--seed", 1)
    assert r.exit_code == 0, r.output
    assert symusic.Score(str(tmp_path / "d.mid")).tracks[0].name == "Distortion Guitar"


# ---------------------------------------------------------------- tunings and options


@pytest.mark.parametrize("spec,want", [
    ("38 45 50 55 59 64", TUNINGS["drop-d"]),
    ("38,45,50,55,59,64", TUNINGS["drop-d"]),
    ("38, 45, 50, 55, 59, 64", TUNINGS["drop-d"]),
    ("D2 A2 D3 G3 B3 E4", TUNINGS["drop-d"]),
    ("D A D G A D", TUNINGS["dadgad"]),
    ("DADGAD", TUNINGS["dadgad"]),
    ("Eb Ab Db Gb Bb Eb", TUNINGS["half-step-down"]),
    ("B E A D G B E", TUNINGS["seven-string"]),
    ("Drop D", TUNINGS["drop-d"]),
])
def test_tunings_as_numbers_or_notes_with_commas_or_spaces(spec, want):
    assert parse_tuning(spec) == want


def test_wrong_tunings_say_what_is_wrong():
    with pytest.raises(GuitarformerError, match="3 strings: a guitar tuning needs 4-8"):
        parse_tuning("40,45,50")
    with pytest.raises(GuitarformerError, match="unknown tuning"):
        parse_tuning("banjo")
    with pytest.raises(GuitarformerError, match="outside"):
        parse_tuning("1 2 3 4 5 6")


def test_tuning_list_prints_every_name_with_its_notes():
    r = CliRunner().invoke(main, ["sample", "--tuning", "list"])  # no --out needed
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == tuning_lines()
    for name in TUNINGS:
        assert name in r.stdout
    assert "D2 A2 D3 G3 B3 E4" in r.stdout and "38,45,50,55,59,64" in r.stdout


def test_help_states_every_default():
    text = " ".join(CliRunner().invoke(main, ["sample", "--help"], terminal_width=400).stdout.split())
    for needle in ("the run's sample.temperature", "the run's sample.top_k", "the run's sample.top_p",
                   "1 = off", "0 = off", "the prompt's, else the model's choice", "the run's sample.max_new_tokens",
                   "default: newest under ./runs", "[default: auto]", "default: the prompt's, else standard"):
        assert needle in text, needle


@pytest.mark.parametrize("args,needle", [
    (("--top-p", "0"), "--top-p"),
    (("--seed", "99999999999999999999"), "--seed"),
    (("--seed", "-1"), "--seed"),
    (("--temperature", "nan"), "--temperature"),
    (("--temperature", "inf"), "--temperature"),
    (("--tempo", "nan"), "--tempo"),
    (("--bars", "0"), "--bars"),
    (("--num-samples", "0"), "--num-samples"),
    (("--batch-size", "0"), "--batch-size"),
    (("--max-new-tokens", "0"), "--max-new-tokens"),
    (("--max-new-tokens", "10000000000"), "--max-new-tokens"),
    (("--top-k", "-1"), "--top-k"),
    (("--position", "20"), "--position"),
    (("--guidance", "-1"), "--guidance"),
    (("--guidance", "nan"), "--guidance"),
])
def test_numbers_are_checked_at_the_command_line(run_dir, tmp_path, args, needle):
    r = CliRunner().invoke(main, ["sample", "--run", str(run_dir), "--out", str(tmp_path / "x.mid"), *args])
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert needle in r.output and "Traceback" not in r.output
    assert not (tmp_path / "x.mid").exists()


def test_python_api_checks_the_same_numbers(run_dir, tmp_path):
    for kw in ({"seed": 2**64}, {"top_p": 0.0}, {"bars": 0}, {"temperature": math.nan}, {"guidance": -1.0},
               {"guidance": math.inf}):
        with pytest.raises(GuitarformerError):
            app_sample(SampleRequest.of(outputs=Outputs(midi=tmp_path / "x.mid"), run=run_dir, **kw))


def test_missing_folders_for_every_output_are_created(run_dir, tmp_path):
    r = sample("--run", run_dir, "--out", tmp_path / "a" / "r.mid", "--tab", tmp_path / "b" / "c" / "r.txt",
               "--gp", tmp_path / "d" / "e" / "r.gp5", "--seed", 1)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "b" / "c" / "r.txt").read_text().count("|") > 6
    assert (tmp_path / "d" / "e" / "r.gp5").stat().st_size > 0


def test_an_output_path_that_is_a_folder_fails_before_sampling(run_dir, tmp_path):
    (tmp_path / "tabs").mkdir()
    r = sample("--run", run_dir, "--out", tmp_path / "r.mid", "--tab", tmp_path / "tabs")
    assert r.exit_code == 2 and "--tab" in r.stderr and "is a folder" in r.stderr
    assert not (tmp_path / "r.mid").exists()


def test_unreadable_prompt_is_one_clear_line(run_dir, tmp_path):
    bad = tmp_path / "prog.txt"
    bad.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(200))
    r = sample("--run", run_dir, "--out", tmp_path / "r.mid", "--prompt", bad)
    assert r.exit_code == 2 and "binary file, not text" in r.stderr and "SkipFile" not in r.stderr
