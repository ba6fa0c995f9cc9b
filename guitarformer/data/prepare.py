"""prepare: files and folders -> a dataset folder (tokenizer.json, meta.json, token arrays, manifest.jsonl).

The steps, each its own function: expand the inputs (data/sources.py), hash each file's bytes (an exact duplicate is
read once, an unchanged file comes from the cache), read and tokenize the rest in a pool of capped workers
(data/prepare_file.py, data/pool.py), group the files by the piece they hold (the notes, not the bytes: one score as
.gp, .gpx and .gp5 is one piece, read once and kept in one split), then write the arrays, the manifest and finally
meta.json (data/meta.py)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import miditok
import numpy as np
from tqdm import tqdm

from guitarformer.config import DataConfig
from guitarformer.data.meta import (
    SPLITS,
    dataset_meta,
    load_meta,
    refuse_other_settings,
    suggested_out,
    summary_lines,
)
from guitarformer.data.pool import run_pool
from guitarformer.vocab.seen import summarize, write_seen
from guitarformer.data.prepare_file import FILE_TIMEOUT_S, init_worker, piece_of, process_file
from guitarformer.data.sources import EMPTY_SHA256, collect_files, file_style, manifest_line, sha256_file
from guitarformer.vocab.tab_tokens import control_styles
from guitarformer.vocab.tokenization import (
    band_tokenizer,
    bar_ids,
    bpe_encode_pretokenized,
    build_tokenizer,
    extended_tokenizer,
    ids_to_bpe_text,
    tokenizer_params,
)
from guitarformer.errors import GuitarformerError
from guitarformer.readers import detect_format, read_guitar
from guitarformer.readers.formats import binary_reason, readable_types, unsupported_reason

# Callers import these from here too (the commands, training, evaluation, the corpus).
__all__ = ["SPLITS", "VAL_MIN_PIECES", "VAL_TOP_UP_FROM", "assign_splits", "binary_reason", "load_meta",
           "piece_split", "prepare", "readable_types", "reader_hash", "sha256_file", "split_of", "suggested_out", "summary_lines", "train_bpe",
           "unsupported_reason"]

Results = dict[str, tuple[dict, list[list[int]]]]  # content hash -> (record, token sequences)


def piece_split(path: str | Path, tracks: str = "guitar") -> str:
    """The split `prepare` gives a file read alone: its piece's hash split (for tests and tools that want a file in a
    split; a small dataset's val also takes some train pieces, see `assign_splits`)."""
    return split_of(piece_of(read_guitar(path, tracks=tracks)))


def split_of(key: str) -> str:
    """Deterministic split from a hash (a piece's, see prepare_file.piece_of): adding files never moves old ones.
    val 1/20, test 1/20."""
    r = int(key[:8], 16) % 20
    return "val" if r == 0 else "test" if r == 1 else "train"


VAL_MIN_PIECES = 3  # the fewest pieces the val split of a dataset of VAL_TOP_UP_FROM pieces or more gets
VAL_TOP_UP_FROM = 10  # below this, every piece the hash puts in train stays there: each is a large share of it


def assign_splits(pieces: Iterable[str]) -> dict[str, str]:
    """Each piece's split (a piece's hash, see prepare_file.piece_of): `split_of`, except that where the hash leaves
    val fewer than VAL_MIN_PIECES pieces of VAL_TOP_UP_FROM or more, train pieces move to val (in hash order) until
    it has that many or one piece in five: a val split of one short piece cannot judge a run. Once the hash alone
    gives val that many, it alone decides, and adding files never moves old ones."""
    keys = sorted(set(pieces))
    split = {k: split_of(k) for k in keys}
    want = min(VAL_MIN_PIECES, len(keys) // 5) if len(keys) >= VAL_TOP_UP_FROM else 0
    short = want - sum(s == "val" for s in split.values())
    for k in [k for k in keys if split[k] == "train"][:max(0, short)]:
        split[k] = "val"
    return split


FRET_MODULES = ("__init__", "chords", "costs", "notes", "part", "string_features", "string_model", "viterbi")


@functools.lru_cache(maxsize=1)
def reader_hash() -> str:
    """A hash of the code that turns a file into tokens (readers, score, fret(), the vocabulary, data's modules), so
    that a cached tokenization is reused only by the reader code that made it: after an upgrade that reads a format
    differently (say, note lengths in ASCII tab), a re-run into the same folder reads every file again."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent.parent
    files = [*(pkg / "readers").glob("*.py"), *(pkg / "music").glob("*.py"), *(pkg / "data").glob("*.py"),
             *(pkg / "vocab").glob("*.py"), *(pkg / "fingering").glob("*.json"),  # fret() fingers tab tokens
             *(pkg / "fingering" / f"{m}.py" for m in FRET_MODULES)]
    for f in sorted(files, key=lambda f: f.relative_to(pkg).as_posix()):
        if f.name not in ("dataset.py", "transpose.py"):  # training's windows and their shifts; read no input file
            h.update(f.relative_to(pkg).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


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


@dataclass(frozen=True)
class PrepareOptions:
    """How `prepare` reads and runs: `tracks` and `include_bass` (which parts of a file are read), `timeout` (seconds
    a file may take), `labels` (given control values by resolved file path: see `prepare`), `workers` (0: one per
    CPU core, at most one per file), `progress` (a progress bar), `sources` (what meta.json says the data came from;
    default: the inputs) and `force` (replace a dataset made with other settings)."""

    tracks: str = "guitar"
    include_bass: bool = False
    workers: int = 0
    progress: bool = True
    timeout: int = FILE_TIMEOUT_S
    sources: list[str] | None = None
    force: bool = False
    labels: dict[str, dict[str, str]] | None = None


def prepare(
    inputs: list[str | Path],
    out: str | Path,
    data_cfg: DataConfig | None = None,
    options: PrepareOptions = PrepareOptions(),
    like: miditok.MusicTokenizer | None = None,
) -> dict:
    """Tokenize every input file into a dataset folder; returns meta (also written to meta.json, last).

    Re-running into a dataset made with the same tokenizer settings updates it (unchanged files come from the
    cache); a dataset made with other settings is replaced only with `options.force` (runs trained on it need it).
    `options.labels`: with controls, given control values by resolved file path ({"Style": .., "Key": ..}: the
    built-in corpus's tune types and written keys), over the folder's style and the estimated key.
    `like`: tokenize as this tokenizer does (a run's, for `train --init`; `data_cfg` then is that run's data
    config), the styles it lacks appended to its vocabulary (tokenization.extended_tokenizer)."""
    tracks, include_bass, labels = options.tracks, options.include_bass, options.labels
    data_cfg = data_cfg or DataConfig()
    tok = _base_tokenizer(data_cfg, like)  # with controls, built again once styles are known
    t0 = time.time()
    files, lines = collect_files(inputs)  # a missing input is reported before an existing dataset is touched
    # Controls: each file's style is the folder it sits in below an input folder; the styles make the vocabulary.
    roots = [str(Path(i).expanduser()) for i in inputs if Path(i).expanduser().is_dir()] if data_cfg.controls else []
    labels = (labels or {}) if data_cfg.controls else {}
    styles = sorted({s for f in files if (s := file_style(f, roots))} | {v["Style"] for v in labels.values()
                                                                         if v.get("Style")})
    if like is not None:
        tok = extended_tokenizer(tok, styles)
    elif data_cfg.controls:
        tok = build_tokenizer(data_cfg, styles)
    out = Path(out).expanduser()
    refuse_other_settings(out, data_cfg, options.force, control_styles(tok))
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").unlink(missing_ok=True)  # the dataset is complete only once meta.json is back
    tok_json = out / "tokenizer.json"
    tok.save(tok_json)
    tok_hash = _vocab_hash(data_cfg, styles, tok)
    opts = {"tracks": tracks, "include_bass": include_bass, "timeout": options.timeout, "style_roots": roots}
    if labels:
        opts["labels"] = labels

    def style(f: Path) -> str | None:  # what a file's controls are given: part of its cache key
        given = labels.get(str(f.resolve()))
        return json.dumps([file_style(f, roots), given], sort_keys=True) if given else file_style(f, roots)

    cache = _Cache(out / "cache", tok_hash, opts, style)

    todo = _hash_files(files, lines)
    results = _read_files(todo, cache, options.workers, (str(tok_json), opts), options.progress)
    split_seqs = _assemble(todo, results, lines)
    if data_cfg.bpe_vocab_size > 0:
        train_bpe(tok, split_seqs, data_cfg.bpe_vocab_size, data_cfg.bpe_model)
        tok.save(tok_json)  # the trained tokenizer replaces the base one
    counts, dtype = _write_arrays(out, split_seqs, len(tok))
    if data_cfg.bpe_vocab_size <= 0:  # what the run will have learned, per control (vocab/seen.py; BPE ids are merged)
        write_seen(out, summarize(tok.vocab, split_seqs.get("train", []), f"the training data of {out}"))
    _write_atomic(out / "manifest.jsonl", "".join(json.dumps(d) + "\n" for d in lines).encode())
    meta = dataset_meta(
        out, lines, counts, {s: len(split_seqs.get(s, [])) for s in SPLITS},
        vocab_size=len(tok), dtype=np.dtype(dtype).name, tokenizer=data_cfg.tokenizer, data_config=asdict(data_cfg),
        control_styles=control_styles(tok),  # None: no controls
        tracks=tracks, include_bass=include_bass, sources=options.sources or [str(Path(i)) for i in inputs],
        seconds=round(time.time() - t0, 2))
    _write_atomic(out / "meta.json", json.dumps(meta, indent=2).encode())
    return meta


def _base_tokenizer(data_cfg: DataConfig, like: miditok.MusicTokenizer | None) -> miditok.MusicTokenizer:
    """The tokenizer before styles are known (`like`'s, else one built from `data_cfg`); settings that cannot work
    are said before anything is read or written."""
    if like is not None and like.is_trained:
        raise GuitarformerError("the run to prepare like has BPE-merged tokens, learned from its own dataset",
                                "fine-tune a run trained on base tokens (data.bpe_vocab_size 0), or prepare and "
                                "train from scratch")
    tok = like if like is not None else build_tokenizer(data_cfg)
    if like is not None and getattr(data_cfg, "parts", ""):  # a single-part run learning the band
        tok = band_tokenizer(like, [r.strip() for r in data_cfg.parts.split(",")])
    if 0 < data_cfg.bpe_vocab_size <= len(tok):
        raise GuitarformerError(f"a BPE vocabulary of {data_cfg.bpe_vocab_size} is not larger than the "
                                f"{data_cfg.tokenizer} base vocabulary ({len(tok)} tokens): nothing to merge",
                                f"give --bpe a size above {len(tok)} (e.g. {4 * len(tok)}), or 0 for no BPE")
    return tok


def _vocab_hash(data_cfg: DataConfig, styles: list[str], tok: miditok.MusicTokenizer) -> str:
    """The ids a file's tokens get, for the cache key: the settings, and the vocabulary itself (prepared like a
    run, the same styles are numbered otherwise than in a tokenizer built from scratch)."""
    return hashlib.sha256(json.dumps(tokenizer_params(data_cfg, styles), sort_keys=True, default=str).encode()
                          + data_cfg.tokenizer.encode() + json.dumps(tok.vocab, sort_keys=True).encode()
                          ).hexdigest()[:16]


def _hash_files(files: list[Path], lines: list[dict]) -> list[tuple[Path, str]]:
    """(file, sha256) of every file to read; an unreadable, empty or byte-identical file gets its manifest line."""
    by_sha: dict[str, Path] = {}
    todo: list[tuple[Path, str]] = []
    for f in files:
        try:
            sha = sha256_file(f)
        except OSError as e:
            lines.append(manifest_line(f, None, detect_format(f), "failed", f"cannot read file: {e.strerror or e}"))
            continue
        if sha == EMPTY_SHA256:  # empty files are all alike: each is reported as empty, none as a duplicate
            lines.append(manifest_line(f, sha, detect_format(f), "skipped", "empty file (0 bytes)"))
            continue
        if sha in by_sha:
            lines.append(manifest_line(f, sha, detect_format(f), "skipped", f"exact duplicate of {by_sha[sha]}"))
            continue
        by_sha[sha] = f
        todo.append((f, sha))
    return todo


class _Cache:
    """Each file's record and tokens, keyed by its bytes, the token settings, the options and the reader code."""

    def __init__(self, folder: Path, tok_hash: str, opts: dict, style):
        folder.mkdir(exist_ok=True)
        self.folder, self.tok_hash, self.opts, self.style = folder, tok_hash, opts, style

    def path(self, f: Path, sha: str) -> Path:
        return self.folder / f"{_cache_key(sha, self.tok_hash, self.opts, self.style(f))}.json"

    def get(self, f: Path, sha: str) -> tuple[dict, list[list[int]]] | None:
        cp = self.path(f, sha)
        if cp.is_file():
            try:
                c = json.loads(cp.read_text())
                return c["record"], c["seqs"]
            except (ValueError, KeyError):
                pass  # a damaged cache entry is just redone
        return None

    def put(self, f: Path, sha: str, res: tuple[dict, list[list[int]]]) -> None:
        _write_atomic(self.path(f, sha), json.dumps({"record": res[0], "seqs": res[1]}).encode())


def _read_files(todo: list[tuple[Path, str]], cache: _Cache, workers: int, initargs: tuple, progress: bool) -> Results:
    """Every file's (record, sequences): from the cache, else read in the worker pool (and cached)."""
    results: Results = {}
    to_run = []
    for f, sha in todo:
        hit = cache.get(f, sha)
        if hit is None:
            to_run.append((f, sha))
        else:
            results[sha] = hit
    workers = workers or max(1, min(os.cpu_count() or 1, len(to_run)))
    bar = tqdm(total=len(to_run), desc="prepare", unit="file", disable=not progress or not to_run)

    def store(f: Path, sha: str, res: tuple[dict, list[list[int]]]) -> None:
        results[sha] = res
        cache.put(f, sha, res)
        bar.update(1)

    if to_run:
        # Even one worker is a child process: a reader that segfaults or exits takes down the child, not prepare (the
        # file is recorded as failed and the rest prepared), and the child's memory cap applies.
        run_pool(to_run, workers, process_file, init_worker, initargs, store)
    bar.close()
    return results


# Which of several files with the same notes is read: the format that keeps the most (techniques, fingering).
_RICHEST = {s: k for k, s in enumerate((".gp", ".gpx", ".gp5", ".gp4", ".gp3", ".mxl", ".musicxml", ".xml", ".txt",
                                         ".tab", ".abc", ".mid", ".midi"))}


def _assemble(todo: list[tuple[Path, str]], results: Results, lines: list[dict]) -> dict[str, list[list[int]]]:
    """The token sequences of each split, in a stable order (by path), and every file's manifest line (sorted).

    Of files read to the same notes, one is kept (the richest format, see _RICHEST) and the others are
    `skipped: same notes as ...`: one score saved in several formats is read once. Files of one piece share its split: a piece is the files with the same
    notes (prepare_file.piece_of), joined with the files of the same name in the same folder (let-ring.gp4 and
    let-ring.gp5, whose readers differ in a grace note or a harmonic), named in the manifest by `piece`."""
    ok = sorted(((f, sha) for f, sha in todo if results[sha][0]["status"] == "ok"), key=lambda item: str(item[0]))
    group = _pieces([(f, results[sha][0]["piece"]) for f, sha in ok])
    splits = assign_splits(group.values())
    first_of: dict[str, Path] = {}  # notes hash -> the file read for them: the richest format, then the first path
    for f, sha in sorted(ok, key=lambda item: (_RICHEST.get(item[0].suffix.lower(), len(_RICHEST)), str(item[0]))):
        first_of.setdefault(results[sha][0]["piece"], f)
    split_seqs: dict[str, list[list[int]]] = defaultdict(list)
    for f, sha in sorted(todo, key=lambda item: str(item[0])):
        rec, seqs = results[sha]
        status, reason, extra, split = rec["status"], rec["reason"], {}, None
        if status == "ok":
            notes = rec["piece"]
            extra["piece"] = group[f]
            split = splits[group[f]]
            if rec.get("fingering"):
                extra["fingering"] = rec["fingering"]
            if first_of[notes] != f:
                status, reason, seqs = "skipped", f"same notes as {first_of[notes]} (read once)", []
            else:
                split_seqs[split].extend(seqs)
        lines.append(manifest_line(f, sha, rec["format"], status, reason, tracks=rec["tracks"],
                                   n_tokens=rec["n_tokens"] if seqs else 0, split=split, **extra))
    lines.sort(key=lambda d: d["path"])
    return split_seqs


def _pieces(files: list[tuple[Path, str]]) -> dict[Path, str]:
    """Each file's piece: the smallest notes hash among the files joined to it by equal notes or by the same name
    (stem, any case) in the same folder."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    by_name: dict[tuple[Path, str], str] = {}
    for f, notes in files:
        name = (f.parent, f.stem.lower())
        union(notes, by_name.setdefault(name, notes))
    return {f: find(notes) for f, notes in files}


def _write_arrays(out: Path, split_seqs: dict[str, list[list[int]]], vocab: int) -> tuple[dict[str, int], type]:
    """{split}.bin (tokens) and {split}.idx.npy (sequence offsets); returns tokens per split and the dtype."""
    counts: dict[str, int] = {}
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
    return counts, dtype


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
