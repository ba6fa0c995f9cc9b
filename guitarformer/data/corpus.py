"""The built-in corpus: fiddle tunes shipped inside music21, Mutopia's classical guitar pieces and Freedoom's rock
guitar parts (data/guitar_corpora.py), written as guitar MIDI once and cached.

Styles: a fiddle tune's type, "classical" for the Mutopia pieces, "rock" for Freedoom's guitar parts.

Each tune keeps what its ABC header says about it: its key from ``K:`` (mode included, e.g. "A:dorian") and its
type from ``R:`` or, where the tune has none, its title ("The Boys of Ballisodare -- Reel"), or in a book that
groups its tunes by type (O'Neill's) the section it sits in, as the tune's style (data/tune_labels.py). Both are in ``tunes.jsonl``, and ``labels.json`` maps each MIDI file to its ``Key`` and
``Style`` control values, which `prepare` takes over its key estimate and folder styles (its `labels`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import fields
from pathlib import Path

import symusic
from tqdm import tqdm

from guitarformer.data.prepare import PrepareOptions, prepare, reader_hash
from guitarformer.vocab.tokenization import tokenizer_params
from guitarformer.errors import SkipFile
from guitarformer.music.guitar import (
    GUITAR_PROGRAM,
    PITCH_NAMES,
    STANDARD_TUNING,
    TPQ,
    playable_range,
)
from guitarformer.data.guitar_corpora import freedoom_files, write_classical, write_rock
from guitarformer.data.tune_labels import (
    header_of,
    key_control,
    key_label,
    read_abc_headers,
    section_types,
    tune_type,
)

COLLECTIONS = ("ryansMammoth", "oneills1850")
# Books that print their tunes grouped by type, in X: order: a tune there without R: is typed by its section.
ORDERED_BY_TYPE = ("oneills1850",)
# v2: sounding an octave below the written fiddle pitch, as guitarists play them; v3: each tune's type and K: key
# in tunes.jsonl and labels.json; guitar-v1: with the classical and rock guitar corpora
CORPUS_VERSION = "guitar-v1"
SOURCES = ("music21 fiddle tunes: ryansMammoth, oneills1850 (public domain)",
           "Mutopia classical guitar pieces marked public domain or CC-BY (corpora/mutopia/CREDITS.tsv)",
           "Freedoom level music, guitar parts (BSD-3-Clause; corpora/freedoom/COPYING.adoc, CREDITS-MUSIC)")
DEFAULT_TEMPO = 120.0
VELOCITY = 80  # the sources carry no dynamics
LOW, HIGH = playable_range(STANDARD_TUNING, frets=22)  # E2 .. D6 (a 22-fret guitar)
# Time signatures the default miditok config can express; others (pickup artefacts like 1/16) are dropped.
SUPPORTED_TS = {(n, 4) for n in (1, 2, 3, 4, 5, 6)} | {(n, 8) for n in range(3, 13)} | {(2, 2), (3, 2)}


def cache_home() -> Path:
    """Root of guitarformer's cache: $GUITARFORMER_CACHE, else $XDG_CACHE_HOME/guitarformer, else ~/.cache/guitarformer."""
    env = os.environ.get("GUITARFORMER_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "guitarformer"


def corpus_dir() -> Path:
    return cache_home() / "corpus" / CORPUS_VERSION


def default_dataset_dir() -> Path:
    return cache_home() / "datasets" / "builtin"


def source_files() -> list[Path]:
    """The ABC files of the built-in collections, in a stable order."""

    from music21 import corpus  # music21 (a fifth of a second to import) only where the corpus is built

    files: list[Path] = []
    for name in COLLECTIONS:
        files.extend(sorted(Path(p) for p in corpus.getComposer(name)))
    return files


def _tempo_of(score) -> float:
    """The first metronome mark in 30-300 BPM (the tunes carry at most one), else 120."""
    from music21 import tempo

    for mm in score.recurse().getElementsByClass(tempo.MetronomeMark):
        try:
            bpm = mm.getQuarterBPM()
        except Exception:  # music21 raises on marks without a number
            bpm = None
        if bpm and 30 <= bpm <= 300:
            return float(bpm)
    return DEFAULT_TEMPO


def _fit_to_guitar(pitches: list[int]) -> int | None:
    """Octave shift that puts every pitch in E2..D6, preferring an octave below the written pitch; None if impossible.

    Guitar music is written an octave above its sound, and a guitarist reading a fiddle tune plays the written
    notes: the tune then sits in open position (G3..B5 written -> G2..B4 sounding, frets 0-7), where flatpickers
    play it. At the written octave the same tune needs frets 7-19 on the top strings."""
    lo, hi = min(pitches), max(pitches)
    for shift in (-12, 0, -24, 12, 24):
        if LOW <= lo + shift and hi + shift <= HIGH:
            return shift
    return None


def _corpus_time_signatures(score: symusic.Score) -> list[tuple[int, int, int]]:
    """The tune's time signatures the tokenizer can express, the first moved to tick 0 (a pickup bar's
    signature would otherwise start the tune in 1/16)."""
    last_ts: dict[int, tuple[int, int]] = {}
    for ts in score.time_signatures:
        if (ts.numerator, ts.denominator) in SUPPORTED_TS:
            last_ts[int(ts.time)] = (ts.numerator, ts.denominator)
    if not last_ts:
        last_ts[0] = (4, 4)
    first = min(last_ts)
    if first != 0:
        last_ts[0] = last_ts.pop(first)
    out, prev = [], None
    for t in sorted(last_ts):
        if last_ts[t] != prev:
            out.append((t, *last_ts[t]))
            prev = last_ts[t]
    return out


def tune_to_score(m21score) -> tuple[symusic.Score | None, str | None]:
    """A music21 tune -> (symusic Score with one steel-string guitar track, None), or (None, reason).

    The tune is read by the same `from_music21` users' MusicXML/ABC files go through; the corpus then adds its
    own policy: an octave below the written pitch (see `_fit_to_guitar`), one tempo, the signatures the
    tokenizer expresses, and no dynamics."""
    from guitarformer.readers.notation import from_music21

    try:
        gs = from_music21(m21score, name="Guitar", source_format="abc")[0]
    except SkipFile:
        return None, "no notes"
    notes = list(gs.track.notes)
    shift = _fit_to_guitar([n.pitch for n in notes])
    if shift is None:
        return None, "range wider than the guitar's"
    score = symusic.Score(TPQ)
    score.tempos.append(symusic.Tempo(0, _tempo_of(m21score)))
    for t, num, den in _corpus_time_signatures(gs.score):
        score.time_signatures.append(symusic.TimeSignature(t, num, den))
    track = symusic.Track(name="Guitar", program=GUITAR_PROGRAM, is_drum=False)
    for n in sorted(notes, key=lambda n: (n.time, n.duration, n.pitch)):
        track.notes.append(symusic.Note(n.time, n.duration, n.pitch + shift, VELOCITY))
    score.tracks.append(track)
    return score, None


def _convert_file(args: tuple[str, str]) -> list[dict]:
    """Parse one ABC file (one or many tunes) and write each tune as MIDI; returns one record per tune (with its
    K: label, Key control value and type)."""
    from music21 import converter, stream

    src, out_dir = args
    records: list[dict] = []
    try:
        parsed = converter.parse(src, format="abc")
        headers = read_abc_headers(src)
    except Exception as e:  # a broken book loses its tunes, not the run
        return [{"source": src, "tune": None, "status": "failed", "reason": f"music21 parse error: {e}"}]
    tunes = list(parsed.scores) if isinstance(parsed, stream.Opus) else [parsed]
    for i, tune in enumerate(tunes):
        title = tune.metadata.title if tune.metadata else None
        header = header_of(headers, i, tune.metadata.number if tune.metadata else None, len(tunes))
        label = key_label(tune)
        kind = tune_type(header.rhythm if header else None, title or (header.title if header else None))
        number = header.number if header else None
        rec = {"source": src, "tune": i, "number": int(number) if number and number.isdigit() else None,
               "title": title, "key_label": label, "key": key_control(label), "type": kind,
               "type_from": "header" if kind else None}
        expanded = True
        try:
            full = tune.expandRepeats()
        except Exception:  # badly formed repeats: keep the tune as written
            full, expanded = tune, False
        try:
            score, reason = tune_to_score(full)
        except Exception as e:
            score, reason = None, f"conversion error: {type(e).__name__}: {e}"
        if score is None:
            rec.update(status="skipped", reason=reason)
            records.append(rec)
            continue
        name = f"{Path(src).stem}-{i:03d}.mid"
        score.dump_midi(str(Path(out_dir) / name))
        rec.update(status="ok", reason=None if expanded else "repeats not expanded", file=name)
        records.append(rec)
    return records


def type_by_sections(records: list[dict]) -> None:
    """Type the untyped tunes of the books in ORDERED_BY_TYPE by the section they sit in (`section_types`)."""
    for book in ORDERED_BY_TYPE:
        mine = [r for r in records if Path(r["source"]).parent.name == book and r.get("tune") is not None]
        for r, kind in zip(mine, section_types([(r.get("number"), r.get("type")) for r in mine])):
            if kind and not r.get("type"):
                r.update(type=kind, type_from="section")


def labels(records: list[dict]) -> dict[str, dict[str, str]]:
    """MIDI file (relative to midi/) -> its given control values: Key (from K:) and Style (the tune's type),
    each where the header has it."""
    out: dict[str, dict[str, str]] = {}
    for r in records:
        if r.get("status") == "ok":
            given = {"Key": r.get("key"), "Style": r.get("type")}
            out[r["file"]] = {k: v for k, v in given.items() if v}
    return out


def label_summary(records: list[dict]) -> dict:
    """The styles (tune types) of the converted tunes and how many carry a K: key."""
    ok = [r for r in records if r.get("status") == "ok"]
    return {
        "styles": dict(Counter(r.get("type") or "(none)" for r in ok).most_common()),
        "typed_by_section": sum(r.get("type_from") == "section" for r in ok),
        "key_labels": sum(bool(r.get("key")) for r in ok),
        "modes": dict(Counter((r.get("key_label") or ":(none)").split(":")[1] for r in ok).most_common()),
        "tunes": len(ok),
    }


def corpus_labels(corpus: Path) -> dict[str, dict[str, str]]:
    """The given control values of a built corpus's MIDI files, by absolute path (see `labels`)."""
    given = json.loads((Path(corpus) / "labels.json").read_text())
    return {str((Path(corpus) / "midi" / f).resolve()): v for f, v in given.items()}


def fiddle_records(midi_dir: Path, limit: int = 0, workers: int = 0, progress: bool = True) -> list[dict]:
    """The fiddle tunes as MIDI in midi_dir, one record per tune, typed by section where their book says. music21's
    parse is the corpus's slow part: its records are kept in fiddle.jsonl beside midi_dir and read back on a later
    build (the guitar corpora, quick to copy, are written on every build)."""
    cached = midi_dir.parent / "fiddle.jsonl"
    if cached.is_file():
        return [json.loads(line) for line in cached.read_text().splitlines() if line.strip()]
    files = source_files()
    if limit:
        files = files[:limit]
    jobs = [(str(f), str(midi_dir)) for f in files]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    records: list[dict] = []
    bar = tqdm(total=len(jobs), desc="built-in corpus", unit="file", disable=not progress)
    if workers > 1:
        with ProcessPoolExecutor(workers) as ex:
            for recs in ex.map(_convert_file, jobs, chunksize=4):
                records.extend(recs)
                bar.update(1)
    else:
        for job in jobs:
            records.extend(_convert_file(job))
            bar.update(1)
    bar.close()
    type_by_sections(records)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    tmp.replace(cached)
    return records


def build_corpus(out_dir: Path | None = None, limit: int = 0, workers: int = 0, progress: bool = True) -> Path:
    """Write the built-in corpus as MIDI files (once); returns the folder. `limit` keeps the first N fiddle source
    files and a quarter as many files (at least one) of each guitar corpus."""
    out_dir = Path(out_dir) if out_dir else corpus_dir()
    if limit:
        out_dir = out_dir.with_name(out_dir.name + f"-first{limit}")
    done = out_dir / "corpus.json"
    if done.is_file():
        return out_dir
    midi_dir = out_dir / "midi"
    midi_dir.mkdir(parents=True, exist_ok=True)
    records = fiddle_records(midi_dir, limit, workers, progress)
    few = max(1, limit // 4) if limit else 0  # a quick test corpus: a quarter as many of each guitar corpus
    records += write_classical(midi_dir, few) + write_rock(midi_dir, few)
    counts = Counter(r["status"] for r in records)
    reasons = Counter(r["reason"] for r in records if r.get("reason"))
    summary = {
        "version": CORPUS_VERSION,
        "collections": list(COLLECTIONS),
        "sources": list(SOURCES),
        "source_files": len({r["source"] for r in records if r.get("type_from") != "source"}),
        "tunes": len(records),
        "counts": dict(counts),
        "reasons": dict(reasons),
        "sha256": hashlib.sha256("".join(sorted(r.get("file") or "" for r in records)).encode()).hexdigest(),
        "labels": label_summary(records),
    }
    with open(out_dir / "tunes.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    (out_dir / "labels.json").write_text(json.dumps(labels(records), indent=0, sort_keys=True))
    tmp = done.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=2))
    tmp.replace(done)  # corpus.json last: its presence means the corpus is complete
    return out_dir


def builtin_dataset_name(data_cfg) -> str:
    """Folder name of the built-in corpus prepared with this data config by this reader code (an upgrade that
    reads MIDI differently prepares it again, from the cached corpus MIDI: seconds, not the corpus build)."""

    key = json.dumps([CORPUS_VERSION, data_cfg.tokenizer, tokenizer_params(data_cfg), data_cfg.bpe_vocab_size, data_cfg.bpe_model,
                      reader_hash()], sort_keys=True, default=str)
    tag = hashlib.sha256(key.encode()).hexdigest()[:8]
    limit = data_cfg.corpus_limit
    return f"builtin-{data_cfg.tokenizer.lower()}-{tag}" + (f"-first{limit}" if limit else "")


def labels_taken() -> bool:
    """Whether prepare takes given control values (`labels`), so that the corpus's Style controls are the tunes'
    types and its Key controls their K: fields; without that parameter the built-in dataset has no styles and
    estimates every key from the notes."""
    return "labels" in {f.name for f in fields(PrepareOptions)}


def ensure_builtin_dataset(data_cfg, out: Path | None = None, progress: bool = True) -> Path:
    """The built-in corpus prepared with this data config (built and tokenized on first use, then reused)."""

    limit = data_cfg.corpus_limit
    out = Path(out) if out else default_dataset_dir().with_name(builtin_dataset_name(data_cfg))
    if (out / "meta.json").is_file():
        return out
    if getattr(data_cfg, "parts", ""):  # the band: Freedoom's arrangements as they are (guitar, bass and drums)
        files = freedoom_files(limit)
        labels = {str(f.resolve()): {"Style": "rock"} for f in files} if data_cfg.controls else None
        prepare(files, out, data_cfg, PrepareOptions(progress=progress, labels=labels,
                                                     sources=["Freedoom (BSD-3-Clause), band arrangements"]))
        return out
    src = build_corpus(limit=limit, progress=progress)
    # The tunes' types and K: keys as their Style and Key controls (see `labels_taken`).
    labels = corpus_labels(src) if data_cfg.controls and labels_taken() else None
    prepare([src / "midi"], out, data_cfg, PrepareOptions(progress=progress, labels=labels,
                                                          sources=[f"{s} ({CORPUS_VERSION})" for s in SOURCES]))
    return out
