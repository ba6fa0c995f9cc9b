"""One generation thread for the whole server: one model in memory, requests answered in arrival order.

Every page tab and API client shares one loaded run; torch on a small CPU gains nothing from two generations
at once, and a model is not safe to drive from two threads. So each request becomes a Job on one queue; the
web framework's request thread waits on the job's future. A job can be cancelled: a queued one never starts;
a running one sees its `stop()` turn true and stops at the next riff boundary (the generation code asks).
"""

from __future__ import annotations

import queue
import secrets
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from guitarformer.errors import GuitarformerError

StopCheck = Callable[[], bool]


class JobCancelled(Exception):
    """The job was cancelled before it finished (its client asked)."""


class Busy(GuitarformerError):
    """The queue is full (answered with 503)."""


@dataclass
class Job:
    id: str
    fn: Callable[[StopCheck], Any]
    future: Future = field(default_factory=Future)
    stop: threading.Event = field(default_factory=threading.Event)

    def stopped(self) -> bool:
        return self.stop.is_set()


class Worker:
    """A queue of jobs and the one thread that runs them."""

    def __init__(self, max_queued: int = 32):
        self.max_queued = max_queued
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._jobs: dict[str, Job] = {}  # queued or running, by id
        self._lock = threading.Lock()
        self.done = 0  # jobs finished (answered, failed or cancelled): for the load measurement
        self._thread = threading.Thread(target=self._loop, name="guitarformer-studio-worker", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[StopCheck], Any], job_id: str | None = None) -> Job:
        """Queue fn(stop) under `job_id` (a fresh id when None): a busy server says so rather than queue forever."""
        job_id = job_id or secrets.token_hex(8)
        with self._lock:
            if len(self._jobs) >= self.max_queued:
                raise Busy(f"the studio is busy ({len(self._jobs)} requests waiting)",
                                        "try again in a moment, or cancel a request you no longer need")
            if job_id in self._jobs:
                raise GuitarformerError(f"a request with job id {job_id!r} is already running",
                                        "give each request its own job id (or none)")
            job = Job(job_id, fn)
            self._jobs[job_id] = job
        self._queue.put(job)
        return job

    def run(self, fn: Callable[[StopCheck], Any], job_id: str | None = None) -> Any:
        """submit() and wait for the answer (re-raising the job's error, JobCancelled when it was cancelled)."""
        return self.submit(fn, job_id).future.result()

    def cancel(self, job_id: str) -> bool:
        """Stop the job: True when it was queued or running, False when no such job is waiting."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            return False
        job.stop.set()
        return True

    def pending(self) -> int:
        with self._lock:
            return len(self._jobs)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                if job.stopped():
                    raise JobCancelled(job.id)
                job.future.set_result(job.fn(job.stopped))
            except BaseException as e:  # the waiting request gets every failure; this thread keeps serving
                job.future.set_exception(e)
            finally:
                with self._lock:
                    self._jobs.pop(job.id, None)
                    self.done += 1
