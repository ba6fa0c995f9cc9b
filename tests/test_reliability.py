"""Reliability: what real users do to a toolkit — fuzzed files, killed and interrupted runs, hostile checkpoints,
bad command lines, full disks. See docs/RELIABILITY.md for what is covered and how.

Subprocesses are used where the process itself is what is tested (signals, SIGKILL, worker pools, stderr free of
tracebacks); click's CliRunner runs the cheaper command-line checks in-process.
"""

from __future__ import annotations

import errno
import io
import json
import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import symusic
import torch
from click.testing import CliRunner

from guitarformer.runs.checkpoint import load_checkpoint, save_checkpoint
from guitarformer.errors import GuitarformerError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


# ---------------------------------------------------------------- helpers


def _env(cache_root: Path, **extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env.update(GUITARFORMER_CACHE=str(cache_root), CI="1", PYTHONPATH=str(ROOT), **extra)
    return env


def gf(*args, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "guitarformer", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=timeout)


def cli(*args) -> "click.testing.Result":  # noqa: F821
    """The CLI in-process (one process, one torch import): exit code, stdout and stderr as a user sees them."""
    from guitarformer.cli import main

    return CliRunner().invoke(main, [str(a) for a in args])


def assert_clear_error(r, needle: str) -> None:
    """Non-zero exit, one `error:` line naming the problem, a `fix:` line, and no traceback."""
    assert r.exit_code != 0, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    err = r.stderr
    assert "Traceback" not in err, err
    assert err.count("error:") == 1 and "fix:" in err, err
    assert needle in err, err


def write_riffs(folder: Path, n: int, bars: int = 8) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        s = symusic.Score(480)
        s.tempos.append(symusic.Tempo(0, 96))
        s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
        tr = symusic.Track(program=29)
        for bar in range(bars):
            for i, p in enumerate((40, 43, 45, 47, 50, 52, 55, 57)):
                tr.notes.append(symusic.Note(bar * 1920 + i * 240, 240, p + k % 12 + bar % 3, 100))
        s.tracks.append(tr)
        out.append(folder / f"riff{k}.mid")
        s.dump_midi(str(out[-1]))
    return out


def _vlq(n: int) -> bytes:
    out = [n & 0x7F]
    n >>= 7
    while n:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(reversed(out))


def far_apart_midi(jumps: int = 2) -> bytes:
    """A few hundred bytes of valid MIDI whose notes are 2^28 ticks apart: millions of Bar tokens if believed."""
    ev = b"\x00\xc0\x19\x00\x90\x40\x64" + _vlq(240) + b"\x80\x40\x00"
    for _ in range(jumps):
        ev += _vlq((1 << 28) - 1) + b"\x90\x40\x64" + _vlq(240) + b"\x80\x40\x00"
    ev += b"\x00\xff\x2f\x00"
    return b"MThd" + (6).to_bytes(4, "big") + b"\x00\x00\x00\x01\x01\xe0" + b"MTrk" + len(ev).to_bytes(4, "big") + ev


def mutations(data: bytes, rng: random.Random) -> dict[str, bytes]:
    """Truncations, bit flips, a zeroed block and a doubled tail of one file's bytes."""
    n = len(data)
    out = {}
    for i, frac in enumerate((0.02, 0.3, 0.7, 0.97)):
        out[f"trunc{i}"] = data[: max(1, int(n * frac))]
    for i in range(4):
        b = bytearray(data)
        for _ in range(rng.choice((1, 4, 32))):
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        out[f"flip{i}"] = bytes(b)
    a = rng.randrange(n)
    out["zeros"] = data[:a] + bytes(min(256, n - a)) + data[a + 256:]
    out["dup"] = data + data[n // 2:]
    return out


class Proc:
    """A subprocess whose stdout is read line by line in a thread, so waiting for a marker cannot hang the test."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]):
        self.p = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)  # its own process group, as a terminal's foreground job
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        self.err = ""
        threading.Thread(target=self._pump, daemon=True).start()
        self._err_thread = threading.Thread(target=self._pump_err, daemon=True)
        self._err_thread.start()

    def _pump(self):
        for line in self.p.stdout:
            self.out.append(line)
            self.lines.put(line)

    def _pump_err(self):
        self.err = self.p.stderr.read()

    def wait_for(self, marker: str, timeout: float = 120) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.p.poll() is not None and self.lines.empty():
                    break
                continue
            if marker in line:
                return line
        self.kill()
        raise AssertionError(f"never saw {marker!r}; stdout:\n{''.join(self.out)}\nstderr:\n{self.err}")

    def signal_group(self, sig: int) -> None:
        os.killpg(self.p.pid, sig)

    def kill(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait(30)

    def finish(self, timeout: float = 120) -> int:
        rc = self.p.wait(timeout)
        self._err_thread.join(10)
        return rc


def python_proc(code: str, *args, cwd: Path, env: dict[str, str]) -> Proc:
    script = cwd / f"driver_{abs(hash(code)) % 10**8}.py"
    script.write_text(textwrap.dedent(code))
    return Proc([sys.executable, str(script), *map(str, args)], cwd, env)


# ---------------------------------------------------------------- shared fixtures


@pytest.fixture(scope="module")
def riff_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("riffs")
    write_riffs(d, 6)
    return d


@pytest.fixture(scope="module")
def rel_dataset(cache_root, riff_dir, tmp_path_factory) -> Path:
    from guitarformer.data.prepare import prepare

    out = tmp_path_factory.mktemp("rel") / "ds"
    meta = prepare([riff_dir], out, workers=1, progress=False)
    assert meta["status"].get("ok") == 6
    return out


@pytest.fixture(scope="module")
def rel_run(rel_dataset, tiny_cfg, tmp_path_factory) -> Path:
    import copy

    from guitarformer.training.loop import train

    cfg = copy.deepcopy(tiny_cfg)
    cfg.data.dataset = str(rel_dataset)
    cfg.train.max_steps = 10
    cfg.train.eval_interval = 5
    run = tmp_path_factory.mktemp("relruns") / "run"
    train(cfg, run_dir=run, progress=False)
    return run


# ---------------------------------------------------------------- fuzzed input


def test_prepare_survives_fuzzed_files(tmp_path, cache_root):
    """Every mutated MIDI/GP3/GP4/GP5/tab file gets a manifest line with a reason; prepare exits 0, no traceback."""
    rng = random.Random(8)
    sources = [FIXTURES / "io" / n for n in ("band.mid", "riff_piano_program.mid", "drop_d_capo.gp3",
                                             "drop_d_capo.gp4", "drop_d_capo.gp5")]
    sources += sorted((FIXTURES / "tabs").glob("*.txt"))
    sources += write_riffs(tmp_path / "gen", 1)
    fuzz = tmp_path / "fuzz"
    fuzz.mkdir()
    for src in sources:
        for name, data in mutations(src.read_bytes(), rng).items():
            (fuzz / f"{src.stem}_{name}{src.suffix}").write_bytes(data)
    gp5, mid, tab = (FIXTURES / "io" / "drop_d_capo.gp5").read_bytes(), sources[0].read_bytes(), sources[5].read_bytes()
    odd = {
        "empty.mid": b"", "empty.gp5": b"", "empty.txt": b"",
        "gp5_named.mid": gp5, "midi_named.gp4": mid, "tab_named.gp3": tab, "midi_named.txt": mid,
        "random.mid": rng.randbytes(3000), "random.gp5": rng.randbytes(3000), "random.txt": rng.randbytes(3000),
        "header_only.mid": mid[:14], "far_apart.mid": far_apart_midi(3),
        # an enormous single staff: 6 lines of 60,000 columns
        "wide.txt": "".join(f"{s}|" + "-3-5-" * 12_000 + "|\n" for s in "eBGDAE").encode(),
    }
    for name, data in odd.items():
        (fuzz / name).write_bytes(data)
    with open(fuzz / "huge.mid", "wb") as f:  # 80 MB, sparse: over the size limit
        f.truncate(80 << 20)
    inputs = sorted(p.name for p in fuzz.iterdir())

    r = gf("prepare", fuzz, "--out", tmp_path / "ds", "--workers", "2", cwd=tmp_path, env=_env(cache_root))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = [json.loads(x) for x in (tmp_path / "ds" / "manifest.jsonl").read_text().splitlines()]
    assert sorted(Path(d["path"]).name for d in lines) == inputs
    for d in lines:
        assert d["status"] in ("ok", "skipped", "failed"), d
        if d["status"] != "ok":
            assert isinstance(d["reason"], str) and d["reason"].strip(), d
    by = {Path(d["path"]).name: d for d in lines}
    assert "too large" in by["huge.mid"]["reason"]
    assert "implausible length" in by["far_apart.mid"]["reason"]
    assert by["empty.gp5"]["status"] == "skipped" and "empty" in by["empty.gp5"]["reason"]
    assert sum(d["status"] == "ok" for d in lines) > 10  # mutations that leave music readable are kept
    assert (tmp_path / "ds" / "meta.json").is_file()


def test_process_never_raises_on_random_mutations(tmp_path, cache_root):
    """A few hundred random mutations through the per-file worker function, in-process: a record, never an exception."""
    from guitarformer.config import DataConfig
    from guitarformer.data import prepare as P
    from guitarformer.data.tokenization import build_tokenizer

    build_tokenizer(DataConfig()).save(tmp_path / "tok.json")
    P._init_worker(str(tmp_path / "tok.json"), {"timeout": 10})
    sources = [FIXTURES / "io" / n for n in ("band.mid", "drop_d_capo.gp3", "drop_d_capo.gp4", "drop_d_capo.gp5")]
    sources += sorted((FIXTURES / "tabs").glob("*.txt"))
    rng = random.Random(1234)
    seen = set()
    for i in range(300):
        src = sources[i % len(sources)]
        data = bytearray(src.read_bytes())
        if rng.random() < 0.3:
            data = data[: rng.randrange(1, len(data))]
        else:
            for _ in range(rng.randint(1, 24)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        p = tmp_path / f"m{i % 7}{src.suffix}"
        p.write_bytes(bytes(data))
        rec, seqs = P._process(str(p))
        assert rec["status"] in ("ok", "skipped", "failed")
        assert (rec["status"] == "ok") == bool(seqs) and (rec["status"] == "ok" or rec["reason"])
        seen.add(rec["status"])
    assert seen == {"ok", "skipped", "failed"}


_SPIN_DRIVER = """
    import sys, time, resource
    from pathlib import Path
    import guitarformer.data.prepare as gio  # prepare's own name for the reader
    from guitarformer.data.prepare import prepare

    real = gio.read_guitar

    def reader(path, **kw):
        name = Path(path).name
        if name.startswith("spin"):      # pure-Python busy loop
            while True:
                pass
        if name.startswith("swallow"):   # a reader whose own `except Exception` would eat a timeout
            while True:
                try:
                    time.sleep(0.01)
                except Exception:
                    pass
        if name.startswith("hog"):       # asks for 3 GiB: the worker's memory cap must refuse it
            if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
                raise ValueError("no memory cap in this worker")
            b = bytearray(3 << 30)
            return real(path, **kw)
        return real(path, **kw)

    gio.read_guitar = reader
    workers = int(sys.argv[3])
    t0 = time.time()
    meta = prepare([sys.argv[1]], sys.argv[2], workers=workers, timeout=1, progress=False)
    print("SECONDS", round(time.time() - t0, 1), flush=True)
"""


@pytest.mark.parametrize("workers", [2, 1])
def test_per_file_timeout_and_memory_cap(tmp_path, cache_root, workers):
    """A reader that spins (even one swallowing exceptions) is stopped by the per-file timeout, with two workers and
    with one; a worker that asks for too much memory gets MemoryError, not the machine."""
    folder = tmp_path / "in"
    riffs = write_riffs(folder, 2)
    for name in ("spin.mid", "swallow.mid", "hog.mid"):
        (folder / name).write_bytes(riffs[0].read_bytes() + name.encode())  # distinct content: not deduplicated
    p = python_proc(_SPIN_DRIVER, folder, tmp_path / "ds", workers, cwd=tmp_path,
                    env=_env(cache_root, GUITARFORMER_WORKER_MEM_MB="1024"))
    try:
        rc = p.finish(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("prepare hung on a spinning reader")
    assert rc == 0, p.err
    lines = {Path(d["path"]).name: d for d in map(json.loads, (tmp_path / "ds" / "manifest.jsonl").read_text().splitlines())}
    assert lines["spin.mid"]["reason"] == "timed out after 1s"
    assert lines["swallow.mid"]["reason"] == "timed out after 1s"
    assert lines["riff0.mid"]["status"] == lines["riff1.mid"]["status"] == "ok"
    assert lines["hog.mid"]["reason"] == "ran out of memory reading the file", lines["hog.mid"]


_CRASH_DRIVER = """
    import os, signal, sys
    from pathlib import Path
    import guitarformer.data.prepare as gio  # prepare's own name for the reader
    from guitarformer.data.prepare import prepare

    real = gio.read_guitar

    def reader(path, **kw):
        name = Path(path).name
        if name.startswith("segv"):    # a native parser faulting: the worker process dies outright
            os.kill(os.getpid(), signal.SIGSEGV)
        if name.startswith("abort"):   # ... or exits under the pool's feet
            os._exit(3)
        return real(path, **kw)

    gio.read_guitar = reader
    prepare([sys.argv[1]], sys.argv[2], workers=int(sys.argv[3]), progress=False)
"""


@pytest.mark.parametrize("workers", [2, 1])
def test_a_reader_that_kills_its_worker_is_recorded_and_the_rest_prepared(tmp_path, cache_root, workers):
    """A file that crashes the worker process (segfault, hard exit) breaks the process pool: prepare finds the
    file, records it as failed with a reason and prepares every other file. With one worker too: that worker is
    a child process as well."""
    folder = tmp_path / "in"
    riffs = write_riffs(folder, 12)
    for name in ("segv.mid", "abort.mid"):
        (folder / name).write_bytes(riffs[0].read_bytes() + name.encode())  # distinct content: not deduplicated
    p = python_proc(_CRASH_DRIVER, folder, tmp_path / "ds", workers, cwd=tmp_path, env=_env(cache_root))
    rc = p.finish(timeout=120)
    assert rc == 0, p.err
    lines = {Path(d["path"]).name: d for d in map(json.loads, (tmp_path / "ds" / "manifest.jsonl").read_text().splitlines())}
    assert len(lines) == 14
    for name in ("segv.mid", "abort.mid"):
        assert lines[name]["status"] == "failed" and "crashed" in lines[name]["reason"], lines[name]
    assert all(d["status"] == "ok" for n, d in lines.items() if n.startswith("riff")), lines
    assert "Traceback" not in p.err


def test_fuzz_sweep_over_shared_files(tmp_path, cache_root, shared_guitar):
    """Real files from ../shared/data/guitar (read in place), mutated in memory into tmp files; bounded to ~60 s."""
    rng = random.Random(2024)
    pool: dict[str, list[Path]] = {}
    for p in sorted(shared_guitar.rglob("*")):
        if p.is_file() and p.suffix.lower() in (".mid", ".gp3", ".gp4", ".gp5", ".txt") and p.stat().st_size < (2 << 20):
            pool.setdefault(p.suffix.lower(), []).append(p)
    out = tmp_path / "mut"
    out.mkdir()
    n = 0
    for ext, files in sorted(pool.items()):
        for src in rng.sample(files, min(6, len(files))):
            data = src.read_bytes()
            if not data:
                continue
            for name, mutated in list(mutations(data, rng).items())[::2]:  # 5 of the 10 mutations each
                (out / f"{n:03d}_{name}{ext}").write_bytes(mutated)
                n += 1
    if not n:
        pytest.skip("no MIDI/GP/tab files in the shared folder")
    code = ("import sys; from guitarformer.data.prepare import prepare; "
            "prepare([sys.argv[1]], sys.argv[2], workers=2, timeout=10, progress=False)")
    r = subprocess.run([sys.executable, "-c", code, str(out), str(tmp_path / "ds")], capture_output=True, text=True,
                       env=_env(cache_root), timeout=300, cwd=tmp_path)  # a hang guard, not a speed test
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = [json.loads(x) for x in (tmp_path / "ds" / "manifest.jsonl").read_text().splitlines()]
    assert len(lines) == n
    assert all(d["status"] == "ok" or d["reason"] for d in lines)


# ---------------------------------------------------------------- killed and interrupted training


_SLOW_SAVE_DRIVER = """
    import io, sys, time, torch

    real, calls, target = torch.save, 0, int(sys.argv[1])

    def save(obj, f, *a, **k):
        global calls
        calls += 1
        if calls == target:  # a torn temp file on disk, then hang inside save_checkpoint until killed
            buf = io.BytesIO()
            real(obj, buf, *a, **k)
            f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
            f.flush()
            print("IN_SAVE", calls, f.name, flush=True)
            time.sleep(600)
        return real(obj, f, *a, **k)

    torch.save = save
    from guitarformer.cli import main
    main(sys.argv[2:], prog_name="guitarformer")
"""


def _train_args(dataset: Path, run: Path, *extra) -> list[str]:
    return ["train", "--config", "tiny", "--data", str(dataset), "--run-dir", str(run), "--device", "cpu", *extra]


def test_sigkill_during_checkpoint_write_keeps_last_and_resumes(tmp_path, cache_root, rel_dataset):
    run = tmp_path / "run"
    # saves: step 5 last.pt (1) + best.pt (2), step 10 last.pt (3) <- killed half-way through writing it
    p = python_proc(_SLOW_SAVE_DRIVER, 3, *_train_args(rel_dataset, run, "--max-steps", "30",
                                                      "--set", "train.eval_interval=5"), cwd=tmp_path,
                    env=_env(cache_root))
    line = p.wait_for("IN_SAVE")
    assert "last.pt" in line
    p.kill()
    assert list((run / "ckpt").glob(".last.pt.tmp-*")), "the torn temp file is what a kill mid-write leaves"
    state = load_checkpoint(run / "ckpt" / "last.pt")
    assert state["step"] == 5
    r = gf("train", "--resume", run, cwd=tmp_path, env=_env(cache_root))
    assert r.returncode == 0, r.stderr
    assert "resumed at step 5" in r.stdout
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == 30
    assert not list((run / "ckpt").glob(".*.tmp-*")), "the next save removes a killed writer's temp file"


def test_sigkill_at_a_random_moment_then_resume(tmp_path, cache_root, rel_dataset):
    run = tmp_path / "run"
    rng = random.Random(int(os.environ.get("GF_KILL_SEED", "7")))
    p = Proc([sys.executable, "-m", "guitarformer", *_train_args(rel_dataset, run, "--max-steps", "100000",
                                                                  "--set", "train.eval_interval=3")],
             tmp_path, _env(cache_root))
    p.wait_for("params, vocab")
    time.sleep(rng.uniform(0.3, 2.5))
    p.kill()
    state = load_checkpoint(run / "ckpt" / "last.pt")  # whatever moment it died, last.pt is whole
    step = state["step"]
    assert step > 0 and step % 3 == 0
    r = gf("train", "--resume", run, "--max-steps", step + 4, cwd=tmp_path, env=_env(cache_root))
    assert r.returncode == 0, r.stderr
    assert f"resumed at step {step}" in r.stdout
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == step + 4


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_a_checkpoint_before_exit(tmp_path, cache_root, rel_dataset, sig):
    """SIGTERM (a scheduler) or Ctrl-C (SIGINT to the process group) mid-training: a checkpoint at the step it stopped."""
    run = tmp_path / "run"
    p = Proc([sys.executable, "-m", "guitarformer", *_train_args(rel_dataset, run, "--max-steps", "100000",
                                                                  "--set", "train.eval_interval=100000")],
             tmp_path, _env(cache_root))
    p.wait_for("params, vocab")
    time.sleep(1.0)
    assert not (run / "ckpt" / "last.pt").exists()  # no periodic checkpoint yet: the one we find is the signal's
    p.signal_group(sig)
    rc = p.finish(timeout=60)
    out = "".join(p.out)
    assert rc == 128 + int(sig), p.err  # non-zero: a scheduler can tell an interrupted run from a finished one
    assert "Traceback" not in p.err and "--resume" in p.err
    assert f"stopped by signal {signal.Signals(sig).name}" in out
    step = load_checkpoint(run / "ckpt" / "last.pt")["step"]
    assert step > 0
    assert json.loads((run / "summary.json").read_text())["step"] == step
    r = cli("train", "--resume", run, "--max-steps", step + 3)  # resume from a kill: the SIGKILL tests, in a process
    assert r.exit_code == 0 and f"resumed at step {step}" in r.stdout, r.output
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == step + 3


# ---------------------------------------------------------------- interrupted prepare


_SLOW_PREPARE_DRIVER = """
    import sys, time
    import guitarformer.data.prepare as gio  # prepare's own name for the reader

    real = gio.read_guitar

    def slow(path, **kw):
        print("READING", path, flush=True)
        time.sleep(0.4)
        return real(path, **kw)

    gio.read_guitar = slow
    from guitarformer.cli import main
    main(sys.argv[1:], prog_name="guitarformer")
"""


@pytest.mark.parametrize("workers", ["2", "1"])
def test_ctrl_c_during_prepare_leaves_no_complete_looking_dataset(tmp_path, cache_root, riff_dir, workers):
    from guitarformer.data.prepare import prepare

    ds = tmp_path / "ds"
    prepare([riff_dir], ds, workers=1, progress=False)  # a complete dataset is there before the new run
    assert (ds / "meta.json").is_file()
    more = tmp_path / "more"
    write_riffs(more, 24)
    p = python_proc(_SLOW_PREPARE_DRIVER, "prepare", more, "--out", ds, "--workers", workers, cwd=tmp_path,
                    env=_env(cache_root))
    p.wait_for("READING")
    time.sleep(0.5)
    p.signal_group(signal.SIGINT)  # what Ctrl-C does: the whole foreground process group
    rc = p.finish(timeout=90)
    assert rc == 130, (rc, p.err)
    assert "Traceback" not in p.err and "interrupted" in p.err, p.err
    assert not (ds / "meta.json").exists()
    assert not list(ds.glob("*.tmp"))
    r = cli("train", "--config", "tiny", "--data", ds)
    assert_clear_error(r, "incomplete")


# ---------------------------------------------------------------- hostile and damaged checkpoints


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo pwned > {self.marker}",))


def _fake_run_with(run_src: Path, dst: Path, ckpt_bytes: bytes | None = None, state=None) -> Path:
    (dst / "ckpt").mkdir(parents=True)
    (dst / "tokenizer.json").write_bytes((run_src / "tokenizer.json").read_bytes())
    (dst / "config.yaml").write_bytes((run_src / "config.yaml").read_bytes())
    ck = dst / "ckpt" / "last.pt"
    if state is not None:
        torch.save(state, ck)
    else:
        ck.write_bytes(ckpt_bytes)
    return ck


def test_hostile_checkpoint_is_refused_by_sample_and_resume(tmp_path, cache_root, rel_run):
    marker = tmp_path / "pwned"
    ck = _fake_run_with(rel_run, tmp_path / "evil", state={"model": _Evil(marker), "config": {}, "step": 1})
    r = cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid")
    assert_clear_error(r, "refusing to load")
    r = cli("train", "--resume", tmp_path / "evil")
    assert_clear_error(r, "refusing to load")
    assert not marker.exists(), "the payload ran"
    assert not (tmp_path / "x.mid").exists()


def test_hostile_checkpoint_in_a_subprocess(tmp_path, cache_root, rel_run):
    """The same through a real process: one line on stderr, exit 2, and the payload never ran."""
    marker = tmp_path / "pwned"
    ck = _fake_run_with(rel_run, tmp_path / "evil", state={"model": _Evil(marker), "config": {}})
    r = gf("sample", "--checkpoint", ck, "--out", "x.mid", cwd=tmp_path, env=_env(cache_root))
    assert r.returncode == 2
    assert r.stderr.startswith("error: refusing to load") and "Traceback" not in r.stderr, r.stderr
    assert len([x for x in r.stderr.splitlines() if x.strip()]) == 2  # error: + fix:
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["truncated", "bitflips", "random", "empty", "text", "list_model", "no_config"])
def test_damaged_checkpoint_is_one_clear_line(tmp_path, cache_root, rel_run, kind):
    good = (rel_run / "ckpt" / "last.pt").read_bytes()
    rng = random.Random(kind)
    if kind == "truncated":
        data = good[: len(good) // 3]
    elif kind == "bitflips":  # in the zip directory at the end, where flips are fatal
        b = bytearray(good)
        for _ in range(16):
            b[len(b) - 1 - rng.randrange(200)] ^= 0xFF
        data = bytes(b)
    elif kind == "random":
        data = rng.randbytes(4096)
    elif kind == "empty":
        data = b""
    elif kind == "text":
        data = b"these are not the weights you are looking for\n"
    if kind == "list_model":
        ck = _fake_run_with(rel_run, tmp_path / "r", state={"model": [1, 2, 3], "config": {}})
    elif kind == "no_config":
        ck = _fake_run_with(rel_run, tmp_path / "r", state={"model": {"w": torch.ones(1)}})
    else:
        ck = _fake_run_with(rel_run, tmp_path / "r", ckpt_bytes=data)
    needle = "not a guitarformer checkpoint" if kind in ("list_model", "no_config") else "unreadable or damaged"
    assert_clear_error(cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid"), needle)
    assert_clear_error(cli("train", "--resume", tmp_path / "r"), needle)


def test_resume_from_a_checkpoint_that_does_not_match_its_config(tmp_path, cache_root, rel_run):
    state = load_checkpoint(rel_run / "ckpt" / "last.pt")
    state["config"]["model"]["n_embd"] = 48  # weights are 32 wide
    ck = _fake_run_with(rel_run, tmp_path / "r", state=state)
    assert_clear_error(cli("train", "--resume", tmp_path / "r"), "does not match")
    assert_clear_error(cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid"), "does not match")


def test_sample_out_under_a_file_is_a_clear_line(tmp_path, cache_root, rel_run):
    (tmp_path / "afile").write_text("x")
    assert_clear_error(cli("sample", "--run", rel_run, "--out", tmp_path / "afile" / "x.mid", "--bars", "1"),
                       "cannot create the folder")


# ---------------------------------------------------------------- bad command lines


def test_empty_and_junk_datasets(tmp_path, cache_root):
    (tmp_path / "empty").mkdir()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("Verse: play it slow\nChorus: G C D\n")
    (junk / "scan.pdf").write_bytes(b"%PDF-1.4")
    (junk / "drums.mid").write_bytes((FIXTURES / "io" / "drums_only.mid").read_bytes())
    for name in ("empty", "junk"):
        r = cli("prepare", tmp_path / name, "--out", tmp_path / f"ds_{name}", "--workers", "1")
        assert_clear_error(r, "gave usable guitar music")  # the manifest is still written, with every reason
        assert "ok 0" in r.stdout
        assert_clear_error(cli("train", "--config", "tiny", "--data", tmp_path / f"ds_{name}"), "no training tokens")
    reasons = {Path(d["path"]).name: d["reason"]
               for d in map(json.loads, (tmp_path / "ds_junk" / "manifest.jsonl").read_text().splitlines())}
    assert "unsupported file type" in reasons["scan.pdf"]
    assert "no 6- or 7-line tab staff" in reasons["notes.txt"]
    assert "no guitar track" in reasons["drums.mid"]


def test_bad_config_files_and_overrides(tmp_path, cache_root):
    cases = {
        "model:\n  n_layerz: 2\n": "unknown config key model.n_layerz",
        "model:\n  n_layer: [1, 2]\n": "is not a valid int",
        "train:\n  lr: fast\n": "is not a valid float",
        "model: {n_layer: 2\n": "not valid YAML",
        "- 1\n- 2\n": "must be a mapping",
        "nosuchsection:\n  a: 1\n": "nosuchsection",
    }
    for i, (text, needle) in enumerate(cases.items()):
        f = tmp_path / f"c{i}.yaml"
        f.write_text(text)
        r = cli("train", "--config", f)
        assert r.exit_code == 2 and "Traceback" not in r.stderr and needle in r.stderr, (text, r.stderr)
    for flag, needle in (("nodot", "bad override"), ("model.n_layer", "bad override"),
                         ("model.n_layer=two", "not a valid int"), ("train.nope=1", "unknown config key")):
        assert_clear_error(cli("train", "--config", "tiny", "--set", flag), needle)


def test_missing_paths_and_runs_without_checkpoints(tmp_path, cache_root):
    (tmp_path / "norun").mkdir()
    (tmp_path / "afile").write_text("x")
    assert_clear_error(cli("sample", "--run", tmp_path / "norun", "--out", tmp_path / "x.mid"), "no checkpoint")
    assert_clear_error(cli("eval", "--run", tmp_path / "norun"), "no checkpoint")
    assert_clear_error(cli("train", "--resume", tmp_path / "norun"), "no checkpoint to resume")
    assert_clear_error(cli("sample", "--checkpoint", tmp_path / "nope.pt", "--out", tmp_path / "x.mid"), "does not exist")
    assert_clear_error(cli("train", "--config", "tiny", "--data", tmp_path / "afile"), "does not exist")
    assert_clear_error(cli("info", tmp_path / "norun"), "incomplete")
    assert_clear_error(cli("tab", tmp_path / "afile"), "")


def test_run_dir_under_a_file_is_a_clear_line(tmp_path, cache_root, rel_dataset):
    (tmp_path / "afile").write_text("x")
    r = cli(*_train_args(rel_dataset, tmp_path / "afile" / "run", "--max-steps", "2"))
    assert_clear_error(r, "cannot write the run directory")


def test_prompt_that_is_not_music(tmp_path, cache_root, rel_run):
    prose = tmp_path / "notes.txt"
    prose.write_text("Play the riff twice, then the chorus.\n")
    garbage = tmp_path / "garbage.mid"
    garbage.write_bytes(random.Random(3).randbytes(2000))
    pdf = tmp_path / "scan.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    for prompt, needle in ((prose, "not readable music"), (garbage, "not readable music"), (pdf, "not readable music"),
                           (tmp_path / "missing.mid", "does not exist")):
        r = cli("sample", "--run", rel_run, "--out", tmp_path / "x.mid", "--prompt", prompt, "--device", "cpu")
        assert_clear_error(r, needle)
    assert not (tmp_path / "x.mid").exists()


def test_debug_flag_shows_the_traceback(tmp_path, cache_root):
    from guitarformer.cli import main

    r = CliRunner().invoke(main, ["--debug", "train", "--resume", str(tmp_path)])
    assert isinstance(r.exception, GuitarformerError)  # re-raised for the traceback


# ---------------------------------------------------------------- disk full, permission denied


def _state(v: float) -> dict:
    return {"model": {"w": torch.full((64, 64), v)}, "config": {}, "step": int(v)}


def test_disk_full_during_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    import guitarformer.runs.checkpoint as ckmod

    p = tmp_path / "ckpt" / "last.pt"
    save_checkpoint(p, _state(1))
    real_open = open

    class FullDisk(io.FileIO):
        written = 0

        def write(self, b):
            FullDisk.written += len(b)
            if FullDisk.written > 4096:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(b)

    monkeypatch.setattr(ckmod, "open", lambda f, mode="r", *a, **k: FullDisk(f, "wb") if "w" in mode
                        else real_open(f, mode, *a, **k), raising=False)
    with pytest.raises(GuitarformerError, match="previous checkpoint there is intact") as e:
        save_checkpoint(p, _state(2))
    assert "--resume" in e.value.fix
    monkeypatch.undo()
    assert load_checkpoint(p)["step"] == 1
    assert [x.name for x in p.parent.iterdir()] == ["last.pt"]  # no temp file left behind


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_rename_failure_keeps_previous_checkpoint(tmp_path, monkeypatch, err):
    import guitarformer.runs.checkpoint as ckmod

    p = tmp_path / "last.pt"
    save_checkpoint(p, _state(1))

    def fail(src, dst):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(ckmod.os, "replace", fail)
    with pytest.raises(GuitarformerError, match=f"{os.strerror(err)}; the previous checkpoint there is intact"):
        save_checkpoint(p, _state(2))
    monkeypatch.undo()
    assert load_checkpoint(p)["step"] == 1 and [x.name for x in tmp_path.iterdir()] == ["last.pt"]


def test_first_save_failing_says_there_is_no_earlier_checkpoint(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(GuitarformerError, match="no earlier checkpoint exists there"):
        save_checkpoint(tmp_path / "afile" / "ckpt" / "last.pt", _state(1))


def test_disk_full_mid_training_is_one_clear_line(tmp_path, cache_root, rel_dataset, monkeypatch):
    """The CLI: the second checkpoint write fails; the message says the previous one survives; resume works."""
    import guitarformer.runs.checkpoint as ckmod

    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) >= 3:  # step 5's last.pt and best.pt succeed, step 10's last.pt finds the disk full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(ckmod.os, "replace", replace)
    run = tmp_path / "run"
    r = cli(*_train_args(rel_dataset, run, "--max-steps", "20", "--set", "train.eval_interval=5"))
    assert_clear_error(r, "No space left on device; the previous checkpoint there is intact")
    monkeypatch.undo()
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == 5
    r = cli("train", "--resume", run)
    assert r.exit_code == 0, r.output
    assert load_checkpoint(run / "ckpt" / "last.pt")["step"] == 20


def test_flipped_bit_inside_the_weights_is_one_clear_line(tmp_path, cache_root, rel_run):
    """PyTorch does not check its records' CRCs: a changed byte inside a weight tensor used to load silently. The
    checksum save_checkpoint writes catches it; a checkpoint without one (older runs) still loads."""
    state = load_checkpoint(rel_run / "ckpt" / "last.pt")
    name, w = max(state["model"].items(), key=lambda kv: kv[1].numel())
    marker = torch.arange(w.numel(), dtype=torch.float32).reshape(w.shape).to(w.dtype) + 0.5
    state["model"][name] = marker
    ck = _fake_run_with(rel_run, tmp_path / "r", state=state)
    save_checkpoint(ck, state)  # as training writes it: with the checksum
    assert torch.equal(load_checkpoint(ck)["model"][name], marker)
    raw = bytearray(ck.read_bytes())
    pattern = marker.reshape(-1)[1000:1008].contiguous().view(torch.uint8).numpy().tobytes()
    at = bytes(raw).find(pattern)
    assert at > 0  # stored uncompressed: the weights' bytes are in the file as they are
    raw[at + 3] ^= 0x10
    ck.write_bytes(bytes(raw))
    assert_clear_error(cli("sample", "--checkpoint", ck, "--out", tmp_path / "x.mid"), "damaged")
    assert_clear_error(cli("train", "--resume", tmp_path / "r"), "damaged")
    # the same state saved the old way (no checksum entry) loads
    old = tmp_path / "old.pt"
    torch.save(state, old)
    assert "checksum" not in torch.load(old, weights_only=True)
    assert torch.equal(load_checkpoint(old)["model"][name], marker)
