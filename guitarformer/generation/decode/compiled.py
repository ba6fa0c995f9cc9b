"""A one-token decoding step compiled on a CPU (torch.compile, inductor's C++ kernels): a CPU's counterpart of the
CUDA graph in captured.py.

At batch 1 a step of a small model is a hundred-odd tensor ops of a few µs each, most of it the Python and dispatch
around them; compiled, the step is a few fused kernels called from C++ (cpp_wrapper). It runs against a static KV
cache, whose every shape is fixed and whose next position lives in a tensor, so one compiled graph serves every step
of a riff. Attention reads only the slots written so far: their count is the length of a tensor the step sets on
the cache (`KVCache.span_of`), the graph's one dynamic dimension, so a 16-bar riff's steps attend over a few hundred
slots, not the buffer's 1,024 (1.2x a riff's speed, 1.4x a guided one's). The compiling costs seconds, once per
process and batch shape (the guards keep it while the model and the shapes stay), so it pays where many tokens
follow: a long riff, a page that stays up, a benchmark.

On a GPU the compiled step is not called by itself but captured (`HeldStep` inside captured.CapturedStep): inductor
fuses the step's ~200 small kernels (layer norms, rope, residuals, the cache writes) into fewer, and the CUDA graph
replays those, so a token costs fewer kernels as well as one launch.

The model's own forward is what is compiled: there is no second decoding path.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import shutil
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from guitarformer import models
from guitarformer.errors import GuitarformerError
from guitarformer.models.kinds import Step
from guitarformer.models.layers import KVCache
from guitarformer.models.ops import hold_transposed

TRACED_LENGTH = 1  # the host count the compiled step is traced at: a static step reads positions on the device

# Inductor's options for the step a GPU captures (HeldStep). Coordinate-descent tuning of the generated kernels' launch
# settings: decoder-base dims at batch 1 on an H200, GPU time a token 513 -> 410 µs, tokens/s with the constraint
# 1,185 -> 1,401, for ~15 s more compiling on the first call (docs/results/BENCH_GPU.md, benchmarks/gpu_decode_ab.py).
CUDA_OPTIONS: dict = {"coordinate_descent_tuning": True}

# Inductor's options for the CPU step (CompiledStep). A pointwise result with more than `realize_cpu_opcount_threshold`
# ops is stored once instead of recomputed where it is read (default 50): at 5 the rotated query is stored, not
# recomputed for every key inside the attention scores' loop (with its half swap a gather of 16 scalars a key): the
# shipped model's step ~174 -> ~163 µs on the 2-core CPU, the same logits (docs/results/BENCH_SAMPLE.md).
CPU_OPTIONS: dict = {"cpp_wrapper": True, "realize_cpu_opcount_threshold": 5}


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else "")[:200]


def _first_call(fn, *args) -> Tensor:
    """`fn(*args)` for the first time, which compiles (or finds the graph of an earlier call): inductor needs a
    compiler on the machine (C++ on a CPU, Triton on a GPU), and without one the user gets what to install."""
    try:
        return fn(*args)
    except Exception as e:
        raise GuitarformerError(
            f"could not compile the decoding step ({type(e).__name__}: {_first_line(e)})",
            "torch.compile needs a C++ compiler (g++ or clang) on a CPU, Triton on a GPU; install one, or sample "
            "without --compile") from e


class HeldStep:
    """`step(tokens (B, 1), cache) -> logits` through torch.compile over the whole static buffer (no span: every shape
    fixed), the host count `cache.length` held at TRACED_LENGTH while it runs and advanced after, so one graph serves
    every step and every riff. What captured.CapturedStep captures on a GPU for `SamplingParams(compile=True)`."""

    def __init__(self, step: Step) -> None:
        self.fn = torch.compile(step, dynamic=False, options=dict(CUDA_OPTIONS))
        self.compiled = False  # the first call compiles (or finds the graph of an earlier call)

    def __call__(self, tokens: Tensor, cache: KVCache) -> Tensor:
        n = cache.length
        if not cache.static or cache.pos is None or n == 0:
            raise ValueError("a compiled step needs a static KV cache (new_cache(..., static=True)) its prompt filled")
        cache.length = TRACED_LENGTH
        try:
            if self.compiled:
                return self.fn(tokens, cache)
            out = _first_call(self.fn, tokens, cache)
            self.compiled = True
            return out
        finally:
            cache.length = n + tokens.shape[1]


def _run(step: Step, tokens: Tensor, cache: KVCache) -> Tensor:
    """What a CompiledStep compiles: `step` is an argument, so the program reads its model (and an encoder's memory,
    the closure's) at each call, and one program serves every step its guards accept."""
    return step(tokens, cache)


# This process's compiled steps (torch.compile's `aot_compile`, made here or read from `_saved_dir`), each found again
# by its guards for a new riff's step.
PROGRAMS: list = []
_READ: set[str] = set()  # the files of `_saved_dir` read into PROGRAMS
KEEP_SAVED = 16  # compiled steps kept on disk per version of the code (the oldest go): one a batch and model shape
KEEP_VERSIONS = 4  # versions of the code whose compiled steps are kept (the least recently saved to go)
STEPS_FOLDER = "guitarformer-steps"  # in inductor's cache folder: one folder per version of the code inside


def _is_digest(name: str) -> bool:
    return len(name) == 16 and all(c in "0123456789abcdef" for c in name)


@functools.cache
def _saved_dir() -> Path | None:
    """Where compiled steps are kept between processes: a folder in inductor's cache (TORCHINDUCTOR_CACHE_DIR) named
    by what a program was traced from, torch's version and the code of this package's models and of this module, so
    a change to either reads none of the older ones (their guards check shapes and settings, not code). None where
    inductor's cache folder is unknown or cannot be made."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        digest = hashlib.sha256(torch.__version__.encode())
        for source in [*sorted(Path(models.__file__).parent.glob("*.py")), Path(__file__)]:
            digest.update(source.read_bytes())
        return Path(cache_dir()) / STEPS_FOLDER / digest.hexdigest()[:16]
    except (ImportError, OSError):
        return None


def _read_saved() -> None:
    """The compiled steps saved in `_saved_dir` not read yet, into PROGRAMS; a file that does not load (another
    machine's, cut short) is left out."""
    folder = _saved_dir()
    for path in sorted(folder.glob("*.bin")) if folder is not None and folder.is_dir() else []:
        if str(path) in _READ:
            continue
        _READ.add(str(path))
        try:
            with open(path, "rb") as f:
                found = torch.compiler.load_compiled_function(f)
        except Exception:  # noqa: BLE001 - any unreadable program is compiled anew
            continue
        found.disable_guard_check()
        PROGRAMS.append(found)


def _save(found) -> None:
    """`found` kept in `_saved_dir` for later processes (the oldest beyond KEEP_SAVED removed, and the folders of all
    but the KEEP_VERSIONS versions of the code saved to last); where the folder cannot be written, the program serves
    this process only."""
    folder = _saved_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{time.time_ns()}-{os.getpid()}.bin"
        found.save_compiled_function(str(path))
        _READ.add(str(path))
        for old in sorted(folder.glob("*.bin"))[:-KEEP_SAVED]:
            old.unlink(missing_ok=True)
        if folder.parent.name == STEPS_FOLDER:  # only folders `_saved_dir` names: a digest each
            versions = sorted((d for d in folder.parent.iterdir() if d.is_dir() and _is_digest(d.name)),
                              key=lambda d: d.stat().st_mtime)
            for old in versions[:-KEEP_VERSIONS]:
                shutil.rmtree(old, ignore_errors=True)
    except Exception:  # noqa: BLE001 - saving is a convenience: the program in memory serves this riff either way
        pass


def _holds(found, step: Step, tokens: Tensor, cache: KVCache) -> bool:
    """Whether `found`'s guards accept these arguments; a program whose guards cannot even be checked (one read from
    disk for other code) does not."""
    try:
        return bool(found.guard_check(step, tokens, cache))
    except Exception:  # noqa: BLE001 - any failure to check is a no
        return False


def _program(step: Step, tokens: Tensor, cache: KVCache):
    """A compiled `_run` for these arguments: one of PROGRAMS (this process's, then those saved by earlier ones) whose
    guards hold for them, checked here once a riff, else a new one, compiled and saved. Compiled ahead of time, a
    program is called without dynamo's frame hook, its cache lookup and its guards: less per step than torch.compile's
    wrapper, the same logits bit for bit (docs/results/BENCH_SAMPLE.md). (Such a program misses inductor's own caches in
    a new process, so it is saved itself: reading it back is quicker than the wrapper with its caches warm, and much
    quicker than compiling.) Where torch lacks `aot_compile` (and
    `torch.compiler.load_compiled_function` with it), or inductor's caches are off (which it needs), the torch.compile
    wrapper itself, which checks its guards at every call. The wrapper is made only to compile: a riff whose program
    is found needs none."""
    ahead = hasattr(torch.compiler, "load_compiled_function") and not torch._inductor.config.force_disable_caches
    for fresh in (False, True) if ahead else ():
        if fresh:
            _read_saved()
        for found in PROGRAMS:
            if _holds(found, step, tokens, cache):
                return found
    torch._dynamo.mark_dynamic(cache.span_of, 0)  # only to compile: a marked tensor fails a read program's guards
    program = torch.compile(_run, dynamic=False, fullgraph=True, options=dict(CPU_OPTIONS))
    if not ahead:
        return program
    found = program.aot_compile(((step, tokens, cache), {}))
    found.disable_guard_check()  # checked above, once a riff, for the cache, model and shapes that stay
    PROGRAMS.append(found)
    _save(found)
    return found


ISA_NOTE = "vec-isa.json"  # in `_saved_dir`: the CPU whose every listed vector ISA inductor's probe found usable
_ISA_SETTLED: list[bool] = []  # non-empty once this process's first compiled step has settled its ISA (probed or not)


@contextlib.contextmanager
def _isa_probed_once():
    """Around a process's first compiled CPU step. Inductor's first C++ code in a process probes which vector ISAs the
    compiler builds and a child Python loads: a build and a child process per ISA, a noticeable share of a one-shot
    `sample --compile` and of the studio's warm-up (docs/results/BENCH_SAMPLE.md). Where an earlier process on this CPU
    (its ISA flags noted in `_saved_dir`) found every ISA the CPU lists usable, the probe is skipped
    (`config.cpp.vec_isa_ok`): inductor then takes the ISAs the CPU lists, the list the probe gave, so it picks the
    same one and reads the same programs (its extra checks of the wider ISAs' bf16 and VNNI still run). Elsewhere (no note,
    another CPU, an ISA the compiler could not build or load, not x86) it probes, and a probe that found them all is
    noted. Inductor keeps its answer for the process, so later steps (the studio's riffs, from a thread pool) pass
    through unchanged."""
    if _ISA_SETTLED:
        yield
        return
    try:
        from torch._inductor import cpu_vec_isa as isa

        cpu = isa.x86_isa_checker() if platform.machine() in ("x86_64", "AMD64") else None
    except (ImportError, AttributeError):
        cpu = None
    folder = _saved_dir()
    note = folder / ISA_NOTE if folder is not None and cpu is not None else None
    try:  # (a setting of the user's own, TORCHINDUCTOR_VEC_ISA_OK, stands)
        known = note is not None and torch._inductor.config.cpp.vec_isa_ok is None and \
            json.loads(note.read_text()) == {"cpu": cpu}
    except (OSError, ValueError):
        known = False
    with torch._inductor.config.patch({"cpp.vec_isa_ok": True} if known else {}):
        yield
    _ISA_SETTLED.append(True)
    if note is None or known:
        return
    try:
        listed = [str(i) for i in isa.supported_vec_isa_list if all(flag in cpu for flag in str(i).split())]
        if [str(i) for i in isa.valid_vec_isa_list()] == listed:
            folder.mkdir(parents=True, exist_ok=True)
            note.write_text(json.dumps({"cpu": cpu}))
    except (OSError, AttributeError):  # a convenience: the next process probes again
        pass


class CompiledStep:
    """`step(tokens (B, 1), cache) -> logits (B, 1, V)` through torch.compile, against the static cache it was made
    for (filled by an eager prompt first; `reset()` and an eager refill, a sliding window, keep its buffers). `model`:
    the step's model, whose weights' (in, out) copies are made here (its products read them, unchecked, per step).

    The host count `cache.length` is held at TRACED_LENGTH while the compiled step runs, so the graph never sees it
    change (a static step reads only whether it is 0: a prompt or a step), and is advanced here after it."""

    def __init__(self, step: Step, cache: KVCache, model: nn.Module) -> None:
        if not cache.static or cache.pos is None or cache.length == 0:
            raise ValueError("a compiled step needs a static KV cache (new_cache(..., static=True)) its prompt filled")
        self.step, self.cache = step, cache
        hold_transposed(model)  # the weights' (in, out) copies the step's products read (models/ops.py `linear`)
        # The new tokens are copied into one buffer: a slice of the caller's ids has its width as a stride, which
        # the compiled graph's guards would see change with every call's token budget.
        self.tokens = torch.zeros(cache.batch_size, 1, dtype=torch.long, device=cache.pos.device)
        # Attention reads the slots written so far (`KVCache.span_of`, a view of `spans` that long): its length is
        # the graph's one dynamic dimension, every other shape fixed.
        self.spans = torch.empty(cache.max_len, dtype=torch.bool, device=cache.pos.device)
        self.fn = None  # the first call finds or compiles the program (`_program`)

    def __call__(self, tokens: Tensor, cache: KVCache) -> Tensor:
        if cache is not self.cache:
            raise ValueError("a compiled step runs against the cache it was made for")
        n, T = cache.length, tokens.shape[1]
        if T != 1:
            raise ValueError(f"a compiled step reads one new token a row, not {T}")
        if n + T > cache.max_len:
            raise ValueError(f"KV cache full: {n + T} positions > max_len {cache.max_len}")
        cache.length = TRACED_LENGTH
        cache.span_of = self.spans[:max(n + T, 2)]  # at least 2: a length-1 dimension would be specialised
        try:
            if self.fn is not None:
                return self.fn(self.step, self.tokens.copy_(tokens), cache)
            with _isa_probed_once():
                fn = _first_call(_program, self.step, self.tokens, cache)
                out = _first_call(fn, self.step, self.tokens.copy_(tokens), cache)
            self.fn = fn
            return out
        finally:
            cache.length = n + T
            cache.span_of = None
