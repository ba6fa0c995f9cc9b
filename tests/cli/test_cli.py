"""The CLI end to end on the tiny config: prepare -> train -> sample -> a playable guitar MIDI; clear errors."""

import os
import subprocess
import sys
from pathlib import Path

import pretty_midi
import pytest
import symusic


def gf(*args, cwd, env=None, check=True):
    r = subprocess.run([sys.executable, "-m", "guitarformer", *map(str, args)], cwd=cwd, capture_output=True,
                       text=True, env=env or os.environ.copy(), timeout=600)
    if check:
        assert r.returncode == 0, f"{args}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def _write_riffs(folder: Path, n: int = 6):
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        s = symusic.Score(480)
        s.tempos.append(symusic.Tempo(0, 96))
        s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
        tr = symusic.Track(program=29)
        for bar in range(8):
            for i, p in enumerate((40, 43, 45, 47, 50, 52, 55, 57)):
                tr.notes.append(symusic.Note(bar * 1920 + i * 240, 240, p + k + bar % 3, 100))
        s.tracks.append(tr)
        s.dump_midi(str(folder / f"riff{k}.mid"))


def test_help_is_instant_and_lists_commands(tmp_path):
    r = gf("--help", cwd=tmp_path)
    for cmd in ("prepare", "train", "sample", "eval", "info", "tab"):
        assert cmd in r.stdout
    for cmd in ("prepare", "train", "sample", "eval", "info", "tab"):
        out = gf(cmd, "--help", cwd=tmp_path).stdout  # each command's own help, not the group's
        assert out.startswith(f"Usage: python -m guitarformer {cmd} [OPTIONS]"), out
        assert "-h, --help" in out and "Commands:" not in out
    # heavy libraries are not imported for --help
    code = "import sys, guitarformer.cli; print(any(m in sys.modules for m in ('torch', 'miditok', 'music21')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    assert out == "False"


def test_tab_of_a_file_with_its_own_fingering_loads_no_model_libraries(tmp_path):
    """`tab song.gp5` (strings and frets in the file) reads, renders and writes without torch or the tokenizers: they
    are imported where a fingering is computed (fret()'s string model) or a run is loaded (--run)."""
    gp5 = Path(__file__).parents[1] / "fixtures" / "io" / "drop_d_capo.gp5"
    code = ("import sys\nfrom click.testing import CliRunner\nfrom guitarformer.cli import main\n"
            f"r = CliRunner().invoke(main, ['tab', {str(gp5)!r}, '--out', {str(tmp_path / 't.txt')!r}])\n"
            "assert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in ('torch', 'miditok', 'music21') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]" and "E" in (tmp_path / "t.txt").read_text()


def test_prepare_train_sample_end_to_end(tmp_path, cache_root):
    _write_riffs(tmp_path / "tabs")
    (tmp_path / "tabs" / "junk.mid").write_bytes(b"not a midi file")
    r = gf("prepare", tmp_path / "tabs", "--out", tmp_path / "ds", cwd=tmp_path)
    assert "ok 6" in r.stdout and "failed 1" in r.stdout
    assert "files" in gf("info", tmp_path / "ds", cwd=tmp_path).stdout
    gf("train", "--config", "tiny", "--data", tmp_path / "ds", "--max-steps", "12", cwd=tmp_path)
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1
    r = gf("sample", "--out", "riff.mid", "--tab", "riff.txt", "--max-new-tokens", "200", "--seed", "3",
           "--temperature", "0.9", cwd=tmp_path)  # no --run: the newest under ./runs
    midi = pretty_midi.PrettyMIDI(str(tmp_path / "riff.mid"))
    # one guitar part: its track, and a companion of the same instrument where the model wrote bends or vibrato
    assert [i.name for i in midi.instruments[1:]] in ([], [midi.instruments[0].name + " (bends)"])
    assert len({i.program for i in midi.instruments}) == 1
    inst = midi.instruments[0]
    assert 24 <= inst.program <= 31 and not inst.is_drum
    assert inst.notes, "the riff has notes"
    assert all(40 <= n.pitch <= 88 for n in inst.notes)  # standard-tuned 24-fret guitar
    assert (tmp_path / "riff.txt").read_text().count("|") > 6
    # the same seed gives a byte-identical file
    gf("sample", "--out", "again.mid", "--max-new-tokens", "200", "--seed", "3", "--temperature", "0.9",
       cwd=tmp_path)
    assert (tmp_path / "again.mid").read_bytes() == (tmp_path / "riff.mid").read_bytes()


def test_a_dataset_is_found_by_its_name(tmp_path, cache_root, monkeypatch):
    """`info NAME`, `train --data NAME`, `eval --data NAME`: a name that is no folder here is looked up where
    `prepare` writes (data/prepared, its default --out; the cache's datasets, the built-in corpus's)."""
    import shutil

    from click.testing import CliRunner

    from guitarformer.cli import main

    _write_riffs(tmp_path / "in" / "tabs", 3)
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["prepare", "in/tabs"]).exit_code == 0  # into data/prepared/tabs
    shutil.copytree(tmp_path / "data" / "prepared" / "tabs", cache_root / "datasets" / "cached-tabs")
    for name in ("tabs", "cached-tabs"):
        r = CliRunner().invoke(main, ["info", name])
        assert r.exit_code == 0 and "files" in r.output, r.output
    r = CliRunner().invoke(main, ["info", "no-such-set"])
    assert r.exit_code != 0 and "no-such-set does not exist" in r.output
    for cmd in ("train", "eval"):  # their --data takes the same names
        data = next(p for p in main.commands[cmd].params if p.name == "data")
        assert data.callback(None, data, Path("cached-tabs")) == (cache_root / "datasets" / "cached-tabs").resolve()


@pytest.mark.slow
def test_train_on_builtin_corpus_without_data_flag(tmp_path, cache_root):
    gf("train", "--config", "tiny", "--max-steps", "4", "--run-dir", tmp_path / "r", cwd=tmp_path)
    assert (tmp_path / "r" / "ckpt" / "last.pt").is_file()


@pytest.mark.parametrize("args,needle", [
    (("train", "--config", "tiny", "--data", "/no/such/dataset"), "does not exist"),
    (("train", "--config", "tiny", "--set", "model.n_layers=2"), "unknown config key"),
    (("train", "--config", "tiny", "--set", "train.lr=fast"), "not a valid float"),
    (("train", "--config", "nope"), "not found"),
    (("sample", "--out", "x.mid", "--run", "/no/such/run"), "no checkpoint"),
    (("prepare", "/no/such/folder"), "does not exist"),
    (("tab", "/no/such/file.mid"), "does not exist"),
])
def test_bad_input_is_one_clear_line(tmp_path, cache_root, args, needle):
    r = gf(*args, cwd=tmp_path, check=False)
    assert r.returncode != 0
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and "fix:" in r.stderr
