"""A process pool that survives its workers dying: a file whose reader segfaults or exits is found and recorded as
failed, and every other file is still processed (prepare's isolation of native parsers)."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable

from guitarformer.readers import detect_format

CRASH_REASON = "the reader crashed the process reading this file (a fault in a native parser); skipped"

Item = tuple[Path, str]  # a file and its content hash


def _pool_pass(items: list[Item], workers: int, work: Callable, init: Callable, initargs: tuple, store,
               window: int) -> tuple[list[Item], list[Item]]:
    """Run items through a fresh pool with at most `window` in flight. Returns ([], []) when all are done, or,
    if a worker process died (the pool is then broken), (the items in flight, the items never submitted)."""
    queue = list(reversed(items))
    running: dict[Any, Item] = {}
    with ProcessPoolExecutor(workers, initializer=init, initargs=initargs) as ex:
        try:
            while queue or running:
                while queue and len(running) < window:
                    item = queue.pop()
                    try:
                        running[ex.submit(work, str(item[0]))] = item
                    except BrokenProcessPool:  # a worker died since the last wait(): this one never ran
                        return list(running.values()), [item] + list(reversed(queue))
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                broken = False
                for fut in done:
                    if isinstance(fut.exception(), BrokenProcessPool):
                        broken = True
                        continue
                    store(*running.pop(fut), fut.result())
                if broken:
                    return list(running.values()), list(reversed(queue))
        except BaseException:
            ex.shutdown(wait=False, cancel_futures=True)
            raise
    return [], []


def run_pool(items: list[Item], workers: int, work: Callable, init: Callable, initargs: tuple, store) -> None:
    """work(path) for every item in a pool of `workers` processes (each started with init(*initargs)); store(path,
    sha, result) gets every result. A file whose reader kills its worker (segfault, abort) is recorded as failed
    (a record like work's, with CRASH_REASON) and every other file still gets processed: after a crash the files
    that were in flight are re-run one at a time in a one-worker pool, where the one that breaks it again is the
    culprit."""
    pending = items
    while pending:
        suspects, pending = _pool_pass(pending, workers, work, init, initargs, store, window=4 * workers)
        while suspects:
            culprit, suspects = _pool_pass(suspects, 1, work, init, initargs, store, window=1)
            for f, sha in culprit:
                rec = {"format": detect_format(f), "status": "failed", "reason": CRASH_REASON, "tracks": 0,
                       "n_tokens": 0}
                store(f, sha, (rec, []))
