"""Reliability of `prepare`: fuzzed and damaged files, a reader that spins, hogs memory or kills its worker,
Ctrl-C in the middle (docs/results/RELIABILITY.md).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


from helpers.reliability import (FIXTURES, _env, assert_clear_error, cli, far_apart_midi, gf, mutations, python_proc,
                                 write_riffs)

# ---------------------------------------------------------------- fuzzed input


@pytest.mark.slow
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
    from guitarformer.data import prepare_file as P
    from guitarformer.vocab.tokenization import build_tokenizer

    build_tokenizer(DataConfig()).save(tmp_path / "tok.json")
    P.init_worker(str(tmp_path / "tok.json"), {"timeout": 10})
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
        rec, seqs = P.process_file(str(p))
        assert rec["status"] in ("ok", "skipped", "failed")
        assert (rec["status"] == "ok") == bool(seqs) and (rec["status"] == "ok" or rec["reason"])
        seen.add(rec["status"])
    assert seen == {"ok", "skipped", "failed"}


_SPIN_DRIVER = """
    import sys, time, resource
    from pathlib import Path
    import guitarformer.data.prepare_file as gio  # the worker's own name for the reader
    from guitarformer.data.prepare import PrepareOptions, prepare

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
    meta = prepare([sys.argv[1]], sys.argv[2], options=PrepareOptions(workers=workers, timeout=1, progress=False))
    print("SECONDS", round(time.time() - t0, 1), flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 1])
def test_per_file_timeout_and_memory_cap(tmp_path, cache_root, workers):
    """A reader that spins (even one swallowing exceptions) is stopped by the per-file timeout, with two workers and
    with one; a worker that asks for too much memory gets MemoryError, not the machine."""
    folder = tmp_path / "in"
    riffs = write_riffs(folder, 2)
    for name in ("spin.mid", "swallow.mid", "hog.mid"):
        (folder / name).write_bytes(riffs[0].read_bytes() + name.encode())  # distinct content: not deduplicated
    p = python_proc(_SPIN_DRIVER, folder, tmp_path / "ds", workers, cwd=tmp_path,
                    env=_env(cache_root, GUITARFORMER_READ_MEMORY_MB="1024"))
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
    assert "needed more than the 1024 MB read memory limit" in lines["hog.mid"]["reason"], lines["hog.mid"]
    assert "GUITARFORMER_READ_MEMORY_MB=2048" in lines["hog.mid"]["reason"]  # and how to raise it


_CRASH_DRIVER = """
    import os, signal, sys
    from pathlib import Path
    import guitarformer.data.prepare_file as gio  # the worker's own name for the reader
    from guitarformer.data.prepare import PrepareOptions, prepare

    real = gio.read_guitar

    def reader(path, **kw):
        name = Path(path).name
        if name.startswith("segv"):    # a native parser faulting: the worker process dies outright
            os.kill(os.getpid(), signal.SIGSEGV)
        if name.startswith("abort"):   # ... or exits under the pool's feet
            os._exit(3)
        return real(path, **kw)

    gio.read_guitar = reader
    prepare([sys.argv[1]], sys.argv[2], options=PrepareOptions(workers=int(sys.argv[3]), progress=False))
"""


@pytest.mark.slow
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


@pytest.mark.slow
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
    code = ("import sys; from guitarformer.data.prepare import PrepareOptions, prepare; "
            "prepare([sys.argv[1]], sys.argv[2], options=PrepareOptions(workers=2, timeout=10, progress=False))")
    r = subprocess.run([sys.executable, "-c", code, str(out), str(tmp_path / "ds")], capture_output=True, text=True,
                       env=_env(cache_root), timeout=300, cwd=tmp_path)  # a hang guard, not a speed test
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = [json.loads(x) for x in (tmp_path / "ds" / "manifest.jsonl").read_text().splitlines()]
    assert len(lines) == n
    assert all(d["status"] == "ok" or d["reason"] for d in lines)


# ---------------------------------------------------------------- interrupted prepare


_SLOW_PREPARE_DRIVER = """
    import signal, sys, time
    # Ctrl-C reaches a terminal's foreground command; a job a script started with `&` inherits SIGINT ignored, so
    # the driver takes the default handler back, whatever started the tests.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import guitarformer.data.prepare_file as gio  # the worker's own name for the reader

    real = gio.read_guitar

    def slow(path, **kw):
        print("READING", path, flush=True)
        time.sleep(0.4)
        return real(path, **kw)

    gio.read_guitar = slow
    from guitarformer.cli import main
    main(sys.argv[1:], prog_name="guitarformer")
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["2", "1"])
def test_ctrl_c_during_prepare_leaves_no_complete_looking_dataset(tmp_path, cache_root, riff_dir, workers):
    from guitarformer.config import load_config
    from guitarformer.data.prepare import PrepareOptions, prepare

    ds = tmp_path / "ds"
    # a complete dataset of the command's own settings (the default preset's) is there before the new run
    prepare([riff_dir], ds, load_config().data, options=PrepareOptions(workers=1, progress=False))
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


