"""prepare's work on one file, in a pool worker: read, finger, tokenize, and name the piece it holds.

Runs under the read limits (readers/limits.py): the worker's address space is capped once when it starts, and each
file gets an alarm for its time limit. Never raises for a bad file: every outcome is a record with a status and a
reason, which becomes the file's manifest line.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import signal
import threading
from pathlib import Path
from typing import Any

import torch

from guitarformer.vocab.parts import band_roles
from guitarformer.data.band import pick_parts
from guitarformer.vocab.song_tokens import encode_song
from guitarformer.data.sources import file_style
from guitarformer.vocab.tab_tokens import MAX_STRINGS, has_controls, insert_controls, is_tab_tokenizer
from guitarformer.vocab.tokenization import encode, load_tokenizer
from guitarformer.errors import SkipFile
from guitarformer.fingering import finger_score
from guitarformer.music.score import GuitarScore
from guitarformer.readers import detect_format, read_guitar, song_of
from guitarformer.readers.contained import describe
from guitarformer.readers.formats import binary_reason, unsupported_reason
from guitarformer.readers.limits import ReadLimitError, ReadLimits, cap_address_space, too_big_in_memory

FILE_TIMEOUT_S = 60  # one pathological file cannot hang a run
# The grid a piece's notes are compared on, per quarter note: 16ths and triplets apart, so the same score read
# from .gp, .gpx and .gp5 (or rendered to MIDI at another resolution) names the same piece.
PIECE_GRID = 12

_TOK = None
_OPTS: dict[str, Any] = {}


def init_worker(tokenizer_json: str, opts: dict[str, Any]) -> None:
    """Load the tokenizer once per worker; in a pool worker, also ignore Ctrl-C, use one thread and cap memory."""
    global _TOK, _OPTS

    _TOK = load_tokenizer(tokenizer_json)
    _OPTS = opts

    if multiprocessing.parent_process() is not None:  # a pool worker, not a caller running process_file in-process
        # Ctrl-C reaches the whole process group: let the parent alone stop the pool (no worker tracebacks).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # One thread per worker: the pool already has a worker per core, and fret()'s string model (tab tokens)
        # would otherwise start a thread per core in every worker (16 workers x 16 threads stalled a 16-core box).
        torch.set_num_threads(1)
        cap_address_space(ReadLimits.from_env().memory_mb)


def piece_of(parts: list[GuitarScore]) -> str:
    """What the file holds as music: a hash of the quantised onset and pitch of every note of its parts. The same
    score saved as .gp, .gpx and .gp5 is one piece, whatever its bytes. Onsets count from the first note; durations
    are left out: how long a note
    sounds depends on how each format renders its techniques (a palm mute, a dead note), not on what was written."""
    keys = []
    first = min((n.time for gs in parts for n in gs.track.notes), default=0)  # a pickup bar written whole or not
    for gs in parts:
        tpq = max(1, gs.score.ticks_per_quarter)
        keys.append(sorted((round((n.time - first) * PIECE_GRID / tpq), n.pitch) for n in gs.track.notes))
    return hashlib.sha256(repr(sorted(keys)).encode()).hexdigest()[:16]


class _Timeout(BaseException):
    """BaseException, so a reader's own `except Exception` cannot swallow it and keep spinning."""


def _alarm(signum, frame):  # pragma: no cover - fires only on pathological files
    raise _Timeout()


def process_file(path_str: str) -> tuple[dict, list[list[int]]]:
    """Read, tokenize one file. Never raises: failures become a record with a reason."""
    path = Path(path_str)
    rec: dict[str, Any] = {"format": detect_format(path), "status": "ok", "reason": None, "tracks": 0, "n_tokens": 0}
    timeout = int(_OPTS.get("timeout", FILE_TIMEOUT_S))
    # SIGALRM can only be handled on the main thread (prepare called from a thread runs without the limit).
    use_alarm = (timeout > 0 and hasattr(signal, "SIGALRM")
                 and threading.current_thread() is threading.main_thread())
    old = signal.signal(signal.SIGALRM, _alarm) if use_alarm else None
    seqs: list[list[int]] = []
    try:
        try:
            if use_alarm:
                signal.alarm(timeout)
            seqs = _tokenize(path, rec)
        finally:
            if use_alarm:  # disarmed before any handler below runs, so a late alarm cannot escape
                signal.alarm(0)
    except (SkipFile, ReadLimitError) as e:  # a file past a read limit is passed over, and says how to raise it
        rec.update(status="skipped", reason=str(e))
    except _Timeout:
        rec.update(status="failed", reason=f"timed out after {timeout}s")
    except MemoryError:
        rec.update(status="failed", reason=str(too_big_in_memory(path.name, ReadLimits.from_env())))
    except RecursionError:
        rec.update(status="failed", reason="file structure too deeply nested")
    except Exception as e:  # corrupt files of every kind: recorded, never fatal
        rec.update(status="failed", reason=describe(e))
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, old)
    if rec["status"] != "ok":
        seqs = []
    return rec, seqs


def _check_strings(parts: list[GuitarScore]) -> None:
    """SkipFile for parts tuned to more strings than the tab tokens name (their notes would land on wrong strings)."""
    wide = sorted({len(gs.tuning) for gs in parts if len(gs.tuning) > MAX_STRINGS})
    if wide:
        raise SkipFile(f"a {wide[-1]}-string tuning: the tab tokens name at most {MAX_STRINGS} strings "
                       "(prepare with --tokenizer REMI to keep its pitches without strings)")


def band_order(roles: list[str], piece: str) -> list[str]:
    """The order of a piece's parts in its band stream: the roles' own (the guitar first) for half the pieces, the
    rhythm first (drums, bass, then the guitar) for the other half, chosen by the piece, so that a model learns to
    accompany a guitar and to write a guitar part for a groove."""
    return list(roles) if int(piece[:8], 16) % 2 == 0 else list(reversed(roles))


def _tokenize_band(path: Path, rec: dict) -> list[list[int]]:
    """A file's band stream (data/parts.py): the parts it has of the tokenizer's roles where it has two or more; a
    file with one guitar part (and nothing else of the band) is that part's own stream, as a single part writes it,
    so that a band model also learns the guitar alone."""
    roles = band_roles(_TOK) or []
    song = song_of(read_guitar(path, tracks="all"), path)
    _check_strings(song.stringed)
    picked = dict(pick_parts(song, roles))
    if len(picked) < min(2, len(roles)):
        if not song.guitars:
            raise SkipFile(f"no guitar part and {len(picked)} of the band's parts ({', '.join(roles)})")
        return _tokenize_parts(path, song.guitars, rec)
    piece = piece_of(list(picked.values()))
    parts = [(r, picked[r]) for r in band_order([r for r in roles if r in picked], piece)]
    given = _OPTS.get("labels", {}).get(str(path.resolve()), {})
    style = (given.get("Style") or file_style(path, _OPTS.get("style_roots", ()))) if has_controls(_TOK) else None
    ids = encode_song(_TOK, parts, style=style, key=given.get("Key"))
    rec.update(tracks=len(parts), n_tokens=len(ids), piece=piece, fingering="band",
               parts=[r for r, _ in parts])
    return [ids]


def _tokenize(path: Path, rec: dict) -> list[list[int]]:
    """The token sequences of a file's parts (filling rec's tracks, tokens, fingering and piece)."""
    if rec["format"] is None:  # a file passed by name (folders pass these over in collect_files)
        raise SkipFile(unsupported_reason(path))
    binary = binary_reason(path)
    if binary:  # said before a text reader calls it "a chord sheet"
        raise SkipFile(binary)
    if band_roles(_TOK):
        return _tokenize_band(path, rec)
    parts = read_guitar(path, tracks=_OPTS.get("tracks", "guitar"), include_bass=_OPTS.get("include_bass", False))
    parts = [gs for gs in parts if not gs.is_drum]  # --tracks all reads drum parts: a band dataset writes them
    if not parts:
        raise SkipFile("only drum parts: drums are written in a band dataset (--set data.parts=guitar,bass,drums)")
    return _tokenize_parts(path, parts, rec)


def _tokenize_parts(path: Path, parts: list[GuitarScore], rec: dict) -> list[list[int]]:
    """One token sequence per part, each with its controls."""
    seqs, fingerings = [], set()
    if is_tab_tokenizer(_TOK):
        _check_strings(parts)
    for gs in parts:
        if is_tab_tokenizer(_TOK):  # the tokens carry strings: a source without them gets fret()'s
            fingerings.add("source" if gs.frets is not None else "fret()")
            if gs.frets is None:
                gs.frets = finger_score(gs).frets
        ids = encode(_TOK, gs)
        if len(ids) > 2:  # BOS + EOS only: an empty part
            if has_controls(_TOK):  # what the notes are like, as the model will be asked for it
                given = _OPTS.get("labels", {}).get(str(path.resolve()), {})  # a corpus's own labels
                ids = insert_controls(_TOK, ids, gs, given.get("Style") or file_style(path, _OPTS.get("style_roots", ())),
                                      key=given.get("Key"))
            seqs.append(ids)
    if fingerings:
        rec["fingering"] = fingerings.pop() if len(fingerings) == 1 else "source+fret()"
    if not seqs:
        raise SkipFile("no notes in the guitar part(s)")
    rec.update(tracks=len(seqs), n_tokens=sum(len(s) for s in seqs), piece=piece_of(parts))
    return seqs
