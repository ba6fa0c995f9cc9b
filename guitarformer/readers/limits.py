"""The limits every read of a user's file runs under: the file's size (checked before reading), the wall time and
the memory of the read, and the notes it may hand on (checked right after it: what follows a read, fingering,
tokens, tab, takes time and memory per note). One place for their defaults, the environment variables that raise them and the message
that names them, so that `prepare`, the commands and the Python API refuse a file in the same words."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from guitarformer.errors import GuitarformerError

ENV_MAX_FILE_MB = "GUITARFORMER_MAX_FILE_MB"
ENV_TIMEOUT_S = "GUITARFORMER_READ_TIMEOUT_S"
ENV_MEMORY_MB = "GUITARFORMER_READ_MEMORY_MB"
ENV_MAX_TEXT_MB = "GUITARFORMER_MAX_TEXT_MB"
ENV_MAX_GPIF_MB = "GUITARFORMER_MAX_GPIF_MB"
ENV_MAX_PART_NOTES = "GUITARFORMER_MAX_PART_NOTES"
ENV_MAX_SONG_NOTES = "GUITARFORMER_MAX_SONG_NOTES"


@dataclass(frozen=True)
class ReadLimits:
    """Bounds on reading one file.

    max_file_mb: larger files are refused before a byte is read (real guitar files are well under a few MB).
    timeout_s: wall time of one read (0: none).
    memory_mb: address space the read may add to the process it runs in (0: no cap). Python's own objects for a
      score take tens of times its file's size, so this bounds what a small hostile file can make a reader build.
    max_text_mb: text and XML handed to a slow parser (an ASCII tab, ABC, MusicXML inflated from .mxl): music21
      builds about 150 bytes per byte of MusicXML and the tab reader about 130; the largest real ones are 0.2 MB.
    max_gpif_mb: a Guitar Pro 6-8 score.gpif, inflated (ElementTree holds about 25 bytes per byte; the largest
      real one is 1.9 MB).
    max_part_notes, max_song_notes: notes of one part, and of all the parts a read returns (0: no limit): about
      four times the largest real ones (docs/RELIABILITY.md), low enough that fingering every note stays bounded.
    """

    max_file_mb: float = 64
    timeout_s: float = 60
    memory_mb: int = 1536
    max_text_mb: float = 4
    max_gpif_mb: float = 16
    max_part_notes: int = 20_000
    max_song_notes: int = 40_000

    @classmethod
    def from_env(cls, **overrides) -> "ReadLimits":
        """The defaults, each replaced by its environment variable where set (then by `overrides`)."""
        values = {"max_file_mb": _env_number(ENV_MAX_FILE_MB, cls.max_file_mb),
                  "timeout_s": _env_number(ENV_TIMEOUT_S, cls.timeout_s),
                  "memory_mb": int(_env_number(ENV_MEMORY_MB, cls.memory_mb)),
                  "max_text_mb": _env_number(ENV_MAX_TEXT_MB, cls.max_text_mb),
                  "max_gpif_mb": _env_number(ENV_MAX_GPIF_MB, cls.max_gpif_mb),
                  "max_part_notes": int(_env_number(ENV_MAX_PART_NOTES, cls.max_part_notes)),
                  "max_song_notes": int(_env_number(ENV_MAX_SONG_NOTES, cls.max_song_notes))}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def as_env(self) -> dict[str, str]:
        """The environment variables that give these limits to ReadLimits.from_env() (in a child process)."""
        return {ENV_MAX_FILE_MB: f"{self.max_file_mb:g}", ENV_TIMEOUT_S: f"{self.timeout_s:g}",
                ENV_MEMORY_MB: str(self.memory_mb), ENV_MAX_TEXT_MB: f"{self.max_text_mb:g}",
                ENV_MAX_GPIF_MB: f"{self.max_gpif_mb:g}", ENV_MAX_PART_NOTES: str(self.max_part_notes),
                ENV_MAX_SONG_NOTES: str(self.max_song_notes)}

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * (1 << 20))


def _env_number(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise GuitarformerError(f"{name}={text!r} is not a number", f"set {name} to a number, or unset it") from None
    if value < 0:
        raise GuitarformerError(f"{name}={text!r} is negative", f"set {name} to 0 (no limit) or more, or unset it")
    return value


class TooLarge(Exception):
    """Something inside a file (a zip member, a container's file) inflates past its bound; `size` is how far it
    was seen to go. Readers turn it into the ReadLimitError for their limit."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


class ReadLimitError(GuitarformerError):
    """A file went past one of the read limits; the message names the limit and `limit`, the environment variable
    that raises it."""

    def __init__(self, problem: str, fix: str, limit: str):
        super().__init__(problem, fix)
        self.limit = limit

    def __reduce__(self):  # pickled across the contained read's pipe
        return type(self), (self.problem, self.fix, self.limit)


def _limit_error(name: str, what: str, env: str, suggestion: str) -> ReadLimitError:
    return ReadLimitError(f"{name}: {what}",
                          f"if the file is genuine, raise the limit: {env}={suggestion} (environment variable)", env)


def too_large(name: str, size: int, limits: ReadLimits) -> ReadLimitError:
    return _limit_error(name, f"file too large ({size / 2**20:.1f} MB > the {limits.max_file_mb:g} MB read limit)",
                          ENV_MAX_FILE_MB, f"{max(2 * limits.max_file_mb, size / 2**20 * 1.5):.3g}")


def too_much_text(name: str, what: str, size: int, limits: ReadLimits) -> ReadLimitError:
    """`what` (an ASCII tab, the MusicXML inside a .mxl, ...) holds `size` bytes, past max_text_mb."""
    return _limit_error(name, f"{what} holds {size / 2**20:.1f} MB of text, more than the {limits.max_text_mb:g} MB "
                          "read limit for text and MusicXML", ENV_MAX_TEXT_MB,
                          f"{max(2 * limits.max_text_mb, size / 2**20 * 1.5):.3g}")


def too_much_gpif(name: str, size: int, limits: ReadLimits) -> ReadLimitError:
    return _limit_error(name, f"its score.gpif inflates to {size / 2**20:.1f} MB, past the "
                          f"{limits.max_gpif_mb:g} MB read limit", ENV_MAX_GPIF_MB,
                          f"{max(2 * limits.max_gpif_mb, size / 2**20 * 1.5):.3g}")


def check_notes(name: str, counts: list[int], limits: ReadLimits) -> None:
    """ReadLimitError when a part (`counts`: notes per part read) or all of them together hold more notes than
    max_part_notes or max_song_notes."""
    part, song = max(counts, default=0), sum(counts)
    if limits.max_part_notes and part > limits.max_part_notes:
        raise _limit_error(name, f"a part of {part:,} notes, past the {limits.max_part_notes:,}-note read limit for "
                           "one part", ENV_MAX_PART_NOTES, f"{max(2 * limits.max_part_notes, int(part * 1.5))}")
    if limits.max_song_notes and song > limits.max_song_notes:
        raise _limit_error(name, f"{song:,} notes in its parts, past the {limits.max_song_notes:,}-note read limit "
                           "for one file", ENV_MAX_SONG_NOTES, f"{max(2 * limits.max_song_notes, int(song * 1.5))}")


def too_slow(name: str, limits: ReadLimits) -> ReadLimitError:
    return _limit_error(name, f"reading it took longer than the {limits.timeout_s:g} s read limit "
                          "(a corrupt or pathological file?)", ENV_TIMEOUT_S, f"{4 * limits.timeout_s:g}")


def too_big_in_memory(name: str, limits: ReadLimits) -> ReadLimitError:
    return _limit_error(name, f"reading it needed more than the {limits.memory_mb} MB read memory limit "
                          "(a corrupt or pathological file?)", ENV_MEMORY_MB, f"{2 * limits.memory_mb}")


def cap_address_space(extra_mb: int) -> None:
    """Cap this process's address space at its current size plus `extra_mb`, so that a pathological file raises
    MemoryError instead of exhausting the machine. Only the soft limit is lowered; 0 leaves it alone, as does a
    system without /proc (the current size is not guessed). Call it only in a process made for reading."""
    if extra_mb <= 0 or not hasattr(resource, "RLIMIT_AS"):
        return
    try:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = current + (int(extra_mb) << 20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft == resource.RLIM_INFINITY or cap < soft:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        except (ValueError, OSError):
            pass
