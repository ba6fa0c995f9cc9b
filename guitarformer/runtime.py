"""Where a run runs: device, dtype (bf16 where the hardware has it), autocast, CPU threads (one place picks them
for every command), DDP setup, peak FLOP/s."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed

from guitarformer.errors import GuitarformerError

# Dense bf16 peak FLOP/s by device name, for model-FLOPs utilisation.
PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40": 181e12, "A10": 125e12, "4090": 165e12, "3090": 71e12}


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_distributed(device_pref: str) -> Dist:
    """torchrun sets RANK/WORLD_SIZE: NCCL on CUDA, gloo on CPU (so DDP is testable without a GPU)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Dist()

    use_cuda = torch.cuda.is_available() and device_pref in ("auto", "cuda")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:  # before the process group: every rank of the node stops with the same message, none hangs
        per_node = max(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), local_rank + 1)
        gpus = torch.cuda.device_count()
        if per_node > gpus:
            raise GuitarformerError(
                f"torchrun started {per_node} ranks per node but this machine has {gpus} GPU(s): one GPU per rank",
                f"run torchrun --nproc_per_node={gpus}, or add --device cpu to train those ranks on the CPU (gloo)")
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if use_cuda else "gloo")
    d = Dist(torch.distributed.get_rank(), torch.distributed.get_world_size(), local_rank)
    if use_cuda:
        torch.cuda.set_device(d.local_rank)
    return d


def teardown_distributed() -> None:
    """Leave the process group `setup_distributed` joined, if any, once the command is done with it: a rank that
    exits with gloo's threads still running can abort in teardown ("terminate called without an active exception")
    after its work is saved, which torchrun reports as the rank failing. The ranks leave together: rank 0 works on
    after the others (the run's summary, the last riff), and a rank that left first still aborted at exit now and
    then (1 in 12 two-rank runs on a loaded CPU)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def resolve_device(pref: str, dist: Dist | None = None) -> torch.device:
    if pref == "auto":
        if torch.cuda.is_available():
            pref = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            pref = "mps"
        else:
            pref = "cpu"
    if pref.startswith("cuda"):
        if not torch.cuda.is_available():
            raise GuitarformerError("--device cuda was asked for but CUDA is not available", "use --device cpu or auto")
        if dist is not None and dist.world > 1:
            return torch.device("cuda", dist.local_rank)
    if pref == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise GuitarformerError("--device mps was asked for but MPS is not available", "use --device cpu or auto")
    return torch.device(pref)


def cpu_has_fast_bf16() -> bool:
    """True on CPUs with native bf16 matmul, where CPU autocast to bf16 pays off."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_dtype(pref: str, device: torch.device) -> torch.dtype:
    """auto: bf16 on CUDA (fp16 + grad scaler where bf16 is missing), bf16 on CPUs with native bf16, else fp32."""
    if pref == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        if device.type == "cpu" and cpu_has_fast_bf16():
            return torch.bfloat16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[pref]


def autocast_ctx(device: torch.device, dtype: torch.dtype):
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)


# ---------------------------------------------------------------- CPU threads

# Parameters x rows of one forward step below which one intra-op thread is fastest: a one-token step of a small
# model is ~100 ops of a few microseconds each, too little to share, and every parallel region waits for its
# slowest thread. When another process keeps a core busy that wait dominates: on 2 cores with one busy, `tab --run`
# took 195.7 s with torch's default threads and 29.0 s with one (issue 28).
SMALL_STEP_WORK = 32_000_000
_asked_threads = 0  # what --threads / train.num_threads asked of this process (0: choose per step)


@dataclass(frozen=True)
class CpuLoad:
    """The cores this process may run on and how many cores other work keeps busy (runnable threads)."""

    cores: int
    load: float

    @property
    def idle_cores(self) -> int:
        """Cores no other work holds (at least 1): the load rounded to whole busy cores, off the usable ones."""
        return max(1, min(self.cores, self.cores - math.floor(self.load + 0.5)))


_LOAD_TTL_S, _LOAD_WINDOW_S = 30.0, 0.2
_last_load: tuple[float, CpuLoad] | None = None


def _busy_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat (Linux), None elsewhere."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return sum(v[:8]) - idle, sum(v[:8])


def _others_busy_cores() -> float | None:
    """Cores other processes keep busy now, measured over a short window while this process sleeps: unlike the
    load average it does not count this process's own work of the last minute (preparing a dataset before
    training, say), which would make an idle machine look busy."""
    a = _busy_ticks()
    if a is None:
        return None
    time.sleep(_LOAD_WINDOW_S)
    b = _busy_ticks()
    if b is None or b[1] <= a[1]:
        return None
    return (b[0] - a[0]) / (b[1] - a[1]) * (os.cpu_count() or 1)


def cpu_load() -> CpuLoad:
    """This machine's CpuLoad now (measured at most every 30 s: commands ask it per step size); without /proc/stat
    the 1-minute load average stands in; where the OS cannot say either, the cores count as idle."""
    global _last_load
    now = time.monotonic()
    if _last_load is not None and now - _last_load[0] < _LOAD_TTL_S:
        return _last_load[1]
    try:
        cores = len(os.sched_getaffinity(0))  # a container or taskset may allow fewer than os.cpu_count()
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    load = _others_busy_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
    _last_load = (now, CpuLoad(cores, load))
    return _last_load[1]


def step_work(model: torch.nn.Module, rows: int) -> int:
    """The size of one forward step: the model's parameters x the rows (tokens) it processes at once."""
    return sum(p.numel() for p in model.parameters()) * max(1, rows)


def default_threads(work: int, load: CpuLoad | None = None, processes: int = 1) -> int:
    """Intra-op threads for steps of `work` (step_work): one for small steps; else this process's share of the idle
    cores (`processes` of its kind share them: DDP ranks on one machine), so a busy machine never runs slower than
    with one thread."""
    if work <= SMALL_STEP_WORK:
        return 1
    return max(1, (load or cpu_load()).idle_cores // max(1, processes))


def resolve_threads(requested: int | None, work: int, load: CpuLoad | None = None, processes: int = 1) -> int:
    """The thread count to use: `requested` when > 0 (--threads, train.num_threads), else OMP_NUM_THREADS when the
    user set it, else `default_threads(work)`."""
    if requested is not None and requested < 0:
        raise GuitarformerError(f"threads={requested}: a thread count cannot be negative",
                                "pass --threads 1 or more, or 0 to let guitarformer choose")
    if requested:
        return requested
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return default_threads(work, load, processes)


def set_threads(requested: int | None, work: int, load: CpuLoad | None = None, processes: int = 1) -> int:
    """torch's intra-op threads for a command whose steps are of size `work`, as `resolve_threads` picks them;
    the count set. Call once a command knows its model (and batch), before the work starts."""
    global _asked_threads
    n = resolve_threads(requested, work, load, processes)
    _asked_threads = requested or 0
    torch.set_num_threads(n)
    return n


def threads_for(work: int) -> int:
    """Threads for steps of `work` inside a command: what the command was asked (set_threads), else as
    resolve_threads chooses (one for small steps: a riff's one-token steps, a fingering window)."""
    return resolve_threads(_asked_threads, work)


@contextmanager
def threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to `n` inside the block, the previous count restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
