"""Reading a user's file where it cannot take the machine: in a child process with a memory cap and a time limit.

Every command that reads a file a user hands it (tab, infill, sample --prompt, the studio's uploads) calls
`read_guitar_contained`; `prepare` gets the same limits in its capped pool workers (data/prepare_file.py,
data/pool.py). The readers' own bounds (notes per beat, inflated XML, zip ratio, notes of a tab) stop the blow-ups
known today; the child process stops the ones not found yet: whatever a reader does, the caller gets its parts or
one GuitarformerError (or SkipFile) naming the problem, and the child is gone.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.music.score import GuitarScore
from guitarformer.music.song import Song
from guitarformer.readers import read_guitar, song_of
from guitarformer.readers.formats import binary_reason, detect_format, unsupported_reason
from guitarformer.readers.limits import (
    ReadLimitError,
    ReadLimits,
    cap_address_space,
    too_big_in_memory,
    too_large,
    too_slow,
)

_FIX = "check that the file opens in the program that wrote it, or pass another MIDI, Guitar Pro, tab or MusicXML file"


def read_guitar_contained(path: str | os.PathLike, tracks: str = "guitar", include_bass: bool = False,
                          limits: ReadLimits | None = None) -> list[GuitarScore]:
    """`read_guitar(path, tracks, include_bass)` in a child process under `limits` (default: ReadLimits.from_env()).

    Raises SkipFile for a readable file that is not usable (no guitar part, an unsupported type), ReadLimitError
    (a GuitarformerError) for a file past a limit (its message names the environment variable that raises it), and
    GuitarformerError for a file that cannot be read or that crashed its reader. Never anything else for a bad file.
    """
    path = Path(path)
    limits = limits or ReadLimits.from_env()
    _check_before_reading(path, limits)
    ctx = multiprocessing.get_context(_start_method())
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, str(path), tracks, include_bass, limits), daemon=True,
                        name="guitarformer-read")
    child.start()
    send.close()  # the child holds the only writer: its death shows here as EOFError
    message = _TIMED_OUT
    try:
        message = _receive(receive, limits.timeout_s)
    finally:  # also on Ctrl-C: the child never outlives the call
        receive.close()
        _end(child, wait=0 if message is _TIMED_OUT else 2)
    if message is _TIMED_OUT:
        raise too_slow(path.name, limits)
    return _result(message, path, limits, child.exitcode)


def read_song_contained(path: str | os.PathLike, limits: ReadLimits | None = None) -> Song:
    """`read_song(path)` in a child process under `limits`: every part of the file as a Song (see
    `read_guitar_contained` for what it raises)."""
    return song_of(read_guitar_contained(path, tracks="all", limits=limits), Path(path))


def _check_before_reading(path: Path, limits: ReadLimits) -> None:
    if not path.is_file():
        raise GuitarformerError(f"{path} does not exist" if not path.exists() else f"{path} is not a file",
                                "pass a MIDI, Guitar Pro, ASCII tab, MusicXML or ABC file")
    if detect_format(path) is None:
        raise SkipFile(unsupported_reason(path))
    size = path.stat().st_size
    if size == 0:
        raise SkipFile("empty file (0 bytes)")
    if limits.max_file_mb and size > limits.max_file_bytes:
        raise too_large(path.name, size, limits)
    binary = binary_reason(path)
    if binary:
        raise SkipFile(binary)


def _start_method() -> str:
    """fork where it is safe (one thread: the CLI), so the child starts in milliseconds with the readers already
    imported; a process with other threads running (a web server) forks a clean server process instead."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


_TIMED_OUT = object()


def _receive(conn, timeout_s: float):
    """The child's one message, None if it died without one, or _TIMED_OUT."""
    deadline = time.monotonic() + timeout_s if timeout_s else None
    while True:
        wait = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            if conn.poll(wait):
                return conn.recv()
        except (EOFError, OSError):
            return None
        if deadline is not None and time.monotonic() >= deadline:
            return _TIMED_OUT


def _end(child, wait: float) -> None:
    """Let the child exit (it has sent its message), or kill it after `wait` seconds."""
    child.join(timeout=wait)
    if child.is_alive():
        child.kill()
        child.join()


def _result(message, path: Path, limits: ReadLimits, exitcode: int | None) -> list[GuitarScore]:
    if message is None:
        how = f"was killed by signal {-exitcode}" if exitcode and exitcode < 0 else f"exited with status {exitcode}"
        if exitcode == -signal.SIGKILL:  # the kernel's out-of-memory killer sends SIGKILL
            raise too_big_in_memory(path.name, limits)
        raise GuitarformerError(f"{path.name}: the reader crashed reading it (it {how})", _FIX)
    kind, *rest = message
    if kind == "ok":
        return rest[0]
    if kind == "skip":
        raise SkipFile(rest[0])
    if kind == "memory":
        raise too_big_in_memory(path.name, limits)
    if kind == "limit":
        raise rest[0]
    if kind == "user":
        raise GuitarformerError(*rest)
    raise GuitarformerError(f"{path.name} is not readable music ({rest[0]})", _FIX)


def _child(conn, path: str, tracks: str, include_bass: bool, limits: ReadLimits) -> None:
    """Runs in the child: read, send one message, exit. Every outcome is a message."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends the child
    # The readers take their bounds from the environment: these limits, not whatever a fork server started with.
    os.environ.update(limits.as_env())
    cap_address_space(limits.memory_mb)
    try:
        message = ("ok", read_guitar(path, tracks=tracks, include_bass=include_bass))
    except SkipFile as e:
        message = ("skip", str(e))
    except MemoryError:
        message = ("memory",)
    except RecursionError:
        message = ("error", "its structure is nested too deeply")
    except ReadLimitError as e:
        message = ("limit", e)
    except GuitarformerError as e:
        message = ("user", e.problem, e.fix)
    except Exception as e:  # a corrupt file of any kind: the reader's message names the problem
        message = ("error", describe(e))
    try:
        conn.send(message)
    except MemoryError:  # the parts themselves did not fit the cap once pickled
        conn.send(("memory",))
    finally:
        conn.close()


def describe(error: BaseException) -> str:
    """An exception as one line: "ValueError: bad header" (its first line, at most 300 characters)."""
    text = str(error).strip()
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
