"""What the reliability tests share: subprocess drivers, riff files, damaged bytes."""

from __future__ import annotations

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

import symusic
import torch
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


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


def train_args(dataset: Path, run: Path, *extra) -> list[str]:
    return ["train", "--config", "tiny", "--data", str(dataset), "--run-dir", str(run), "--device", "cpu", *extra]



def fake_run_with(run_src: Path, dst: Path, ckpt_bytes: bytes | None = None, state=None) -> Path:
    (dst / "ckpt").mkdir(parents=True)
    (dst / "tokenizer.json").write_bytes((run_src / "tokenizer.json").read_bytes())
    (dst / "config.yaml").write_bytes((run_src / "config.yaml").read_bytes())
    ck = dst / "ckpt" / "last.pt"
    if state is not None:
        torch.save(state, ck)
    else:
        ck.write_bytes(ckpt_bytes)
    return ck

