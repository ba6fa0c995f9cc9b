"""prepare: files and folders -> a dataset folder (tokenizer.json, meta.json, token arrays, manifest.jsonl)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import resource
import signal
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch
from tqdm import tqdm

from guitarformer.config import DataConfig
from guitarformer.data.controls import style_of
from guitarformer.data.tab_tokens import control_styles, has_controls, insert_controls, is_tab_tokenizer
from guitarformer.data.tokenization import (
    bpe_encode_pretokenized,
    ids_to_bpe_text,
    bar_ids,
    build_tokenizer,
    encode,
    load_tokenizer,
    tokenizer_params,
)
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.fretting import fret
from guitarformer.readers import FORMATS, detect_format, read_guitar

SPLITS = ("train", "val", "test")
DATASET_VERSION = 1
FILE_TIMEOUT_S = 60  # one pathological file cannot hang a run
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def split_of(sha256: str) -> str:
    """Deterministic split from the content hash: adding files never moves old ones. val 1/20, test 1/20."""
    r = int(sha256[:8], 16) % 20
    return "val" if r == 0 else "test" if r == 1 else "train"


_FORMAT_LABELS = {"midi": "MIDI", "gp": "Guitar Pro", "gp6+": "Guitar Pro", "ascii_tab": "ASCII tab",
                  "musicxml": "MusicXML", "abc": "ABC"}


def readable_types() -> str:
    """The file types `read_guitar` reads, from its own table: ".mid .midi (MIDI), .gp3 ... (Guitar Pro), ..."."""
    groups: dict[str, list[str]] = {}
    for suffix, fmt in FORMATS.items():
        groups.setdefault(_FORMAT_LABELS.get(fmt, fmt), []).append(suffix)
    return ", ".join(f"{' '.join(suffixes)} ({label})" for label, suffixes in groups.items())


def unsupported_reason(path: Path) -> str:
    return f"unsupported file type {path.suffix or '(no suffix)'}; readable: {readable_types()}"


# What a binary file that claims to be text (.txt, .abc, .xml) really is, from its first bytes.
_MAGIC = ((b"\x7fELF", "an ELF executable"), (b"MZ", "a Windows executable"), (b"PK\x03\x04", "a zip archive"),
          (b"%PDF", "a PDF document"), (b"MThd", "a MIDI file: rename it .mid"), (b"\x89PNG", "a PNG image"),
          (b"\xff\xd8\xff", "a JPEG image"), (b"BCFZ", "a Guitar Pro 6 file: rename it .gpx"),
          (b"\x18FICHIER GUITAR PRO", "a Guitar Pro 3-5 file: rename it .gp5"))
_TEXT_FORMATS = ("ascii_tab", "abc")
_CONTROL = set(range(32)) - {9, 10, 12, 13}


def binary_reason(path: Path) -> str | None:
    """Why a file that should be text is not ("binary file, not text (an ELF executable)"), or None for text.

    Binary: a NUL byte or more than 1 in 20 control characters in its first 8 KiB. Text in any 8-bit encoding
    passes; UTF-16 (which has NUL bytes) is recognised by its byte-order mark."""
    fmt = detect_format(path)
    if fmt not in _TEXT_FORMATS and not (fmt == "musicxml" and path.suffix.lower() != ".mxl"):
        return None
    with open(path, "rb") as f:
        head = f.read(8192)
    if not head or head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    if b"\0" not in head and sum(b in _CONTROL for b in head) * 20 <= len(head):
        return None
    what = next((name for magic, name in _MAGIC if head.startswith(magic)), None)
    return "binary file, not text" + (f" ({what})" if what else "")


def collect_files(inputs: Iterable[str | Path]) -> tuple[list[Path], list[dict]]:
    """Expand files and folders (recursively). Returns candidate files and manifest lines for what was passed over."""
    files: list[Path] = []
    passed: list[dict] = []
    for inp in inputs:
        p = Path(inp).expanduser()
        if not p.exists():
            raise GuitarformerError(f"input {p} does not exist", f"pass files or folders of music ({readable_types()})")
        if p.is_file():
            files.append(p)
            continue
        for q in sorted(p.rglob("*")):
            if q.is_file() and not any(part.startswith(".") for part in q.relative_to(p).parts):
                if detect_format(q) is None:
                    passed.append(_line(q, None, "unsupported", "skipped", unsupported_reason(q)))
                else:
                    files.append(q)
    seen: set[Path] = set()
    unique = [f for f in files if not (f.resolve() in seen or seen.add(f.resolve()))]
    return unique, passed


def _line(path: Path, sha: str | None, fmt: str | None, status: str, reason: str | None, **kw: Any) -> dict:
    d = {"path": str(path), "sha256": sha, "format": fmt, "status": status, "reason": reason,
         "tracks": 0, "n_tokens": 0, "split": None}
    d.update(kw)
    return d


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- worker side

_TOK = None
_OPTS: dict[str, Any] = {}


def _init_worker(tokenizer_json: str, opts: dict[str, Any]) -> None:
    global _TOK, _OPTS

    _TOK = load_tokenizer(tokenizer_json)
    _OPTS = opts

    if multiprocessing.parent_process() is not None:  # a pool worker, not a caller running _process in-process
        # Ctrl-C reaches the whole process group: let the parent alone stop the pool (no worker tracebacks).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # One thread per worker: the pool already has a worker per core, and fret()'s string model (tab tokens)
        # would otherwise start a thread per core in every worker (16 workers x 16 threads stalled a 16-core box).
        torch.set_num_threads(1)
        _cap_memory()


def _cap_memory() -> None:
    """Cap a worker's address space so one pathological file raises MemoryError instead of exhausting the machine.

    The cap is the worker's current size plus GUITARFORMER_WORKER_MEM_MB (default 4096; 0 disables it).
    Only the soft limit is lowered, and only in pool workers.
    """

    try:
        extra_mb = int(os.environ.get("GUITARFORMER_WORKER_MEM_MB", "4096"))
    except ValueError:
        extra_mb = 4096
    if extra_mb <= 0 or not hasattr(resource, "RLIMIT_AS"):
        return
    try:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return  # no /proc (macOS): leave the limit alone rather than guess
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = current + (extra_mb << 20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft == resource.RLIM_INFINITY or cap < soft:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        except (ValueError, OSError):
            pass


class _Timeout(BaseException):
    """BaseException, so a reader's own `except Exception` cannot swallow it and keep spinning."""


def _alarm(signum, frame):  # pragma: no cover - fires only on pathological files
    raise _Timeout()


def _process(path_str: str) -> tuple[dict, list[list[int]]]:
    """Read, tokenize one file. Never raises: failures become a record with a reason."""


    path = Path(path_str)
    fmt = detect_format(path)
    rec: dict[str, Any] = {"format": fmt, "status": "ok", "reason": None, "tracks": 0, "n_tokens": 0}
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

            if fmt is None:  # a file passed by name (folders pass these over in collect_files)
                raise SkipFile(unsupported_reason(path))
            binary = binary_reason(path)
            if binary:  # said before a text reader calls it "a chord sheet"
                raise SkipFile(binary)
            parts = read_guitar(path, tracks=_OPTS.get("tracks", "guitar"), include_bass=_OPTS.get("include_bass", False))
            fingerings = set()
            for gs in parts:
                if is_tab_tokenizer(_TOK):  # the tokens carry strings: a source without them gets fret()'s
                    fingerings.add("source" if gs.frets is not None else "fret()")
                    if gs.frets is None:
                        gs.frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
                ids = encode(_TOK, gs)
                if len(ids) > 2:  # BOS + EOS only: an empty part
                    if has_controls(_TOK):  # what the notes are like, as the model will be asked for it
                        ids = insert_controls(_TOK, ids, gs, file_style(path, _OPTS.get("style_roots", ())))
                    seqs.append(ids)
            if fingerings:
                rec["fingering"] = fingerings.pop() if len(fingerings) == 1 else "source+fret()"
            if not seqs:
                raise SkipFile("no notes in the guitar part(s)")
            rec["tracks"] = len(seqs)
            rec["n_tokens"] = sum(len(s) for s in seqs)
        finally:
            if use_alarm:  # disarmed before any handler below runs, so a late alarm cannot escape
                signal.alarm(0)
    except SkipFile as e:
        rec.update(status="skipped", reason=str(e))
    except _Timeout:
        rec.update(status="failed", reason=f"timed out after {timeout}s")
    except MemoryError:
        seqs = []
        rec.update(status="failed", reason="ran out of memory reading the file")
    except RecursionError:
        rec.update(status="failed", reason="file structure too deeply nested")
    except Exception as e:  # corrupt files of every kind: recorded, never fatal
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        rec.update(status="failed", reason=f"{type(e).__name__}: {msg}" if msg else type(e).__name__)
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, old)
    if rec["status"] != "ok":
        seqs = []
    return rec, seqs


# ---------------------------------------------------------------- driver


@functools.lru_cache(maxsize=1)
def reader_hash() -> str:
    """A hash of the code that turns a file into tokens (readers, score, fretting, this package's data modules), so
    that a cached tokenization is reused only by the reader code that made it: after an upgrade that reads a format
    differently (say, note lengths in ASCII tab), a re-run into the same folder reads every file again."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent.parent
    files = [*(pkg / "readers").glob("*.py"), *(pkg / "music").glob("*.py"), *(pkg / "data").glob("*.py"),
             *(pkg / "fretting").glob("*.py"), *(pkg / "fretting").glob("*.json")]  # fret() fingers tab tokens
    for f in sorted(files, key=lambda f: f.relative_to(pkg).as_posix()):
        if f.name != "dataset.py":  # loads prepared arrays for training; reads no input file
            h.update(f.relative_to(pkg).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def file_style(path: str | Path, roots: Iterable[str | Path]) -> str | None:
    """The style control of a file: the folder below the first input folder (`roots`) that holds it
    (my-tabs/metal/x.gp5 -> "metal"); None for a file directly in a root or passed by name."""
    for root in roots:
        try:
            Path(path).resolve().relative_to(Path(root).resolve())
        except ValueError:
            continue
        return style_of(path, root)
    return None


def _cache_key(sha: str, tok_hash: str, opts: dict, style: str | None = None) -> str:
    key = f"{sha}|{tok_hash}|{opts.get('tracks')}|{opts.get('include_bass')}|{reader_hash()}"
    if style is not None:  # the same file in two style folders tokenizes to two streams
        key += f"|style={style}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


CRASH_REASON = "the reader crashed the process reading this file (a fault in a native parser); skipped"


def _pool_pass(items: list[tuple[Path, str]], workers: int, initargs: tuple, store, window: int
               ) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """Run items through a fresh pool with at most `window` in flight. Returns ([], []) when all are done, or,
    if a worker process died (the pool is then broken), (the items in flight, the items never submitted)."""
    queue = list(reversed(items))
    running: dict[Any, tuple[Path, str]] = {}
    with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=initargs) as ex:
        try:
            while queue or running:
                while queue and len(running) < window:
                    item = queue.pop()
                    try:
                        running[ex.submit(_process, str(item[0]))] = item
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


def _run_pool(items: list[tuple[Path, str]], workers: int, initargs: tuple, store) -> None:
    """Process files in a pool; a file whose reader kills its worker (segfault, abort) is found and recorded
    as failed, and every other file still gets processed. After a crash the files that were in flight are
    re-run one at a time in a one-worker pool, where the one that breaks it again is the culprit."""
    pending = items
    while pending:
        suspects, pending = _pool_pass(pending, workers, initargs, store, window=4 * workers)
        while suspects:
            culprit, suspects = _pool_pass(suspects, 1, initargs, store, window=1)
            for f, sha in culprit:
                rec = {"format": detect_format(f), "status": "failed", "reason": CRASH_REASON, "tracks": 0,
                       "n_tokens": 0}
                store(f, sha, (rec, []))


def prepare(
    inputs: list[str | Path],
    out: str | Path,
    data_cfg: DataConfig | None = None,
    tracks: str = "guitar",
    include_bass: bool = False,
    workers: int = 0,
    progress: bool = True,
    timeout: int = FILE_TIMEOUT_S,
    sources: list[str] | None = None,
    force: bool = False,
) -> dict:
    """Tokenize every input file into a dataset folder; returns meta (also written to meta.json, last).

    Re-running into a dataset made with the same tokenizer settings updates it (unchanged files come from the
    cache); a dataset made with other settings is replaced only with `force` (runs trained on it need it)."""

    data_cfg = data_cfg or DataConfig()
    tok = build_tokenizer(data_cfg)  # with controls, built again below once the styles are known
    if 0 < data_cfg.bpe_vocab_size <= len(tok):  # said before anything is read or written
        raise GuitarformerError(f"a BPE vocabulary of {data_cfg.bpe_vocab_size} is not larger than the "
                                f"{data_cfg.tokenizer} base vocabulary ({len(tok)} tokens): nothing to merge",
                                f"give --bpe a size above {len(tok)} (e.g. {4 * len(tok)}), or 0 for no BPE")
    t0 = time.time()
    files, lines = collect_files(inputs)  # a missing input is reported before an existing dataset is touched
    # Controls: each file's style is the folder it sits in below an input folder; the styles make the vocabulary.
    roots = [str(Path(i).expanduser()) for i in inputs if Path(i).expanduser().is_dir()] if data_cfg.controls else []
    styles = sorted({s for f in files if (s := file_style(f, roots))})
    if data_cfg.controls:
        tok = build_tokenizer(data_cfg, styles)
    out = Path(out).expanduser()
    _refuse_other_settings(out, data_cfg, force, control_styles(tok))
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").unlink(missing_ok=True)  # the dataset is complete only once meta.json is back
    cache_dir = out / "cache"
    cache_dir.mkdir(exist_ok=True)

    tok_json = out / "tokenizer.json"
    tok.save(tok_json)
    tok_hash = hashlib.sha256(json.dumps(tokenizer_params(data_cfg, styles), sort_keys=True, default=str).encode()
                              + data_cfg.tokenizer.encode()).hexdigest()[:16]
    opts = {"tracks": tracks, "include_bass": include_bass, "timeout": timeout, "style_roots": roots}
    style = functools.partial(file_style, roots=roots)

    # Hash everything first: duplicates are tokenized once and unchanged files come from the cache.
    by_sha: dict[str, Path] = {}
    todo: list[tuple[Path, str]] = []
    for f in files:
        try:
            sha = sha256_file(f)
        except OSError as e:
            lines.append(_line(f, None, detect_format(f), "failed", f"cannot read file: {e.strerror or e}"))
            continue
        if sha == EMPTY_SHA256:  # empty files are all alike: each is reported as empty, none as a duplicate
            lines.append(_line(f, sha, detect_format(f), "skipped", "empty file (0 bytes)"))
            continue
        if sha in by_sha:
            lines.append(_line(f, sha, detect_format(f), "skipped", f"exact duplicate of {by_sha[sha]}"))
            continue
        by_sha[sha] = f
        todo.append((f, sha))

    results: dict[str, tuple[dict, list[list[int]]]] = {}
    to_run: list[tuple[Path, str]] = []
    for f, sha in todo:
        cp = cache_dir / f"{_cache_key(sha, tok_hash, opts, style(f))}.json"
        if cp.is_file():
            try:
                c = json.loads(cp.read_text())
                results[sha] = (c["record"], c["seqs"])
                continue
            except (ValueError, KeyError):
                pass  # a damaged cache entry is just redone
        to_run.append((f, sha))


    workers = workers or max(1, min(os.cpu_count() or 1, len(to_run)))
    bar = tqdm(total=len(to_run), desc="prepare", unit="file", disable=not progress or not to_run)

    def _store(f: Path, sha: str, res: tuple[dict, list[list[int]]]) -> None:
        results[sha] = res
        cp = cache_dir / f"{_cache_key(sha, tok_hash, opts, style(f))}.json"
        _write_atomic(cp, json.dumps({"record": res[0], "seqs": res[1]}).encode())
        bar.update(1)

    if to_run:
        # Even one worker is a child process: a reader that segfaults or exits takes down the child, not prepare (the
        # file is recorded as failed and the rest prepared), and the child's memory cap applies.
        _run_pool(to_run, workers, (str(tok_json), opts), _store)
    bar.close()

    # Assemble splits in a stable order (by path), then write arrays, manifest and finally meta.json.
    split_seqs: dict[str, list[list[int]]] = defaultdict(list)
    for f, sha in todo:
        rec, seqs = results[sha]
        split = split_of(sha) if rec["status"] == "ok" else None
        extra = {"fingering": rec["fingering"]} if rec.get("fingering") and split else {}
        lines.append(_line(f, sha, rec["format"], rec["status"], rec["reason"], tracks=rec["tracks"],
                           n_tokens=rec["n_tokens"], split=split, **extra))
        if split:
            split_seqs[split].extend(seqs)
    lines.sort(key=lambda d: d["path"])

    if data_cfg.bpe_vocab_size > 0:
        train_bpe(tok, split_seqs, data_cfg.bpe_vocab_size, data_cfg.bpe_model)
        tok.save(tok_json)  # the trained tokenizer replaces the base one

    counts: dict[str, int] = {}
    vocab = len(tok)
    dtype = np.uint16 if vocab < 65536 else np.uint32
    for split in SPLITS:
        seqs = split_seqs.get(split, [])
        flat = np.fromiter((t for s in seqs for t in s), dtype=dtype, count=sum(len(s) for s in seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in seqs], out=offsets[1:])
        _write_atomic(out / f"{split}.bin", flat.tobytes())
        with open(out / f"{split}.idx.npy.tmp", "wb") as fh:
            np.save(fh, offsets)
        (out / f"{split}.idx.npy.tmp").replace(out / f"{split}.idx.npy")
        counts[split] = int(flat.size)

    _write_atomic(out / "manifest.jsonl", "".join(json.dumps(d) + "\n" for d in lines).encode())
    by_format: dict[str, dict[str, int]] = defaultdict(Counter)
    for d in lines:
        by_format[d["format"] or "unknown"][d["status"]] += 1
    status = Counter(d["status"] for d in lines)
    meta = {
        "version": DATASET_VERSION,
        "name": out.name,
        "files": len(lines),
        "status": dict(status),
        "by_format": {k: dict(v) for k, v in sorted(by_format.items())},
        "sequences": {s: len(split_seqs.get(s, [])) for s in SPLITS},
        "tokens": counts,
        "vocab_size": vocab,
        "dtype": np.dtype(dtype).name,
        "tokenizer": data_cfg.tokenizer,
        "data_config": asdict(data_cfg),
        "control_styles": control_styles(tok),  # None: no controls
        "tracks": tracks,
        "include_bass": include_bass,
        "sources": sources or [str(Path(i)) for i in inputs],
        "seconds": round(time.time() - t0, 2),
    }
    _write_atomic(out / "meta.json", json.dumps(meta, indent=2).encode())
    return meta


def train_bpe(tok, split_seqs: dict[str, list[list[int]]], vocab_size: int, model: str = "BPE") -> None:
    """Train miditok's BPE/Unigram on the train split and re-encode every split in place.

    Sequences are cut at bar lines before merging (miditok's default `encode_ids_split="bar"`), so a
    learned token never spans a bar; BOS/EOS stay single tokens.
    """

    bars = set(bar_ids(tok))

    def pieces(ids: list[int]) -> list[str]:
        out: list[list[int]] = []
        for i in ids[1:-1]:
            if i in bars or not out:
                out.append([])
            out[-1].append(int(i))
        return [ids_to_bpe_text(tok, c) for c in out]

    train = split_seqs.get("train", [])
    if not train:
        raise GuitarformerError("cannot train BPE: the train split is empty", "prepare more files or set data.bpe_vocab_size=0")
    tok.train(vocab_size=vocab_size, model=model, iterator=[pieces(s) for s in train])
    bos, eos = tok["BOS_None"], tok["EOS_None"]
    for split, seqs in split_seqs.items():
        if seqs:
            encoded = bpe_encode_pretokenized(tok, [pieces(s) for s in seqs])
            split_seqs[split] = [[bos, *e, eos] for e in encoded]


def _token_settings(data: dict) -> dict:
    """The data-config fields that decide the token ids (what a trained run depends on)."""
    keys = ("tokenizer", "num_velocities", "use_tempos", "use_time_signatures", "bpe_vocab_size", "bpe_model")
    return {k: data.get(k) for k in keys} | {"controls": bool(data.get("controls", False))}


def _refuse_other_settings(out: Path, data_cfg: DataConfig, force: bool, styles: list[str] | None = None) -> None:
    meta_path = out / "meta.json"
    if force or not meta_path.is_file():
        return
    try:
        meta = json.loads(meta_path.read_text())
        old = meta.get("data_config") or {}
    except (OSError, ValueError):
        return  # an unreadable meta.json is not a dataset anyone can train on: prepare it again
    before, now = _token_settings(old), _token_settings(dataclasses.asdict(data_cfg))
    if now["controls"]:  # the style vocabulary numbers the control tokens after it
        before["control styles"], now["control styles"] = meta.get("control_styles"), styles
    if before != now:
        changed = ", ".join(f"{k} {before[k]} -> {now[k]}" for k in now if before[k] != now[k])
        raise GuitarformerError(
            f"{out} already holds a dataset prepared with other token settings ({changed}); preparing into it "
            "would replace it, and runs trained on it could no longer resume or be evaluated",
            "choose a new --out folder, or pass --force to replace it")


def load_meta(dataset: str | Path) -> dict:
    d = Path(dataset).expanduser()
    if not d.is_dir():
        if d.is_file() and detect_format(d):
            raise GuitarformerError(f"{d} is a music file, not a prepared dataset",
                                    f"prepare it first: guitarformer prepare {d} --out {suggested_out(d)}")
        raise GuitarformerError(f"dataset folder {d} does not exist", "run `guitarformer prepare FILES... --out DIR` first")
    meta = d / "meta.json"
    if not meta.is_file():
        if not any((d / name).exists() for name in ("tokenizer.json", "manifest.jsonl", "cache")) and _holds_music(d):
            # The user's own files, not a dataset: the dataset goes into a folder of its own, not among them.
            raise GuitarformerError(f"{d} is not a prepared dataset (no meta.json)",
                                    f"prepare it first: guitarformer prepare {d} --out {suggested_out(d)}")
        raise GuitarformerError(
            f"dataset {d} is incomplete (no meta.json: prepare did not finish)",
            f"run `guitarformer prepare ... --out {d}` again; unchanged files are reused",
        )
    try:
        return json.loads(meta.read_text())
    except (ValueError, OSError) as e:
        raise GuitarformerError(f"dataset {d} has a damaged meta.json ({e})",
                                f"run `guitarformer prepare ... --out {d}` again; unchanged files are reused") from None


def _holds_music(folder: Path, look_at: int = 1000) -> bool:
    """Whether a folder holds files we read (among the first `look_at` entries, hidden ones left out)."""
    for k, q in enumerate(folder.rglob("*")):
        if k >= look_at:
            break
        if not q.name.startswith(".") and q.is_file() and detect_format(q):
            return True
    return False


def suggested_out(source: str | Path) -> Path:
    """Where `prepare SOURCE` writes by default: data/prepared/<name>, never inside the source folder."""
    p = Path(source).expanduser().resolve()
    return Path("data/prepared") / (p.stem if p.is_file() else p.name or "dataset")


def summary_lines(meta: dict) -> list[str]:
    """A human summary of a dataset (used by `prepare` and `info`)."""
    st = meta["status"]
    out = [
        f"dataset {meta['name']}: {meta['files']} files — ok {st.get('ok', 0)}, skipped {st.get('skipped', 0)}, "
        f"failed {st.get('failed', 0)}",
        f"tokens: train {meta['tokens']['train']:,}  val {meta['tokens']['val']:,}  test {meta['tokens']['test']:,}  "
        f"(sequences {meta['sequences']['train']}/{meta['sequences']['val']}/{meta['sequences']['test']}); "
        f"vocab {meta['vocab_size']} ({meta['tokenizer']})",
    ]
    for fmt, c in meta["by_format"].items():
        out.append(f"  {fmt:<10} " + "  ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return out
