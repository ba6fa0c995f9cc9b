"""How often a tab-token model fingers music as people did: agreement with human fingerings, per part, per folder.

`compare_part` and `score_parts` measure agreement in token space: the part encoded with the human frets (ids_h),
the model re-choosing every note's string of ids_h (fingering/tab_model.py's `refinger`), fret()'s frets through
the same encoder; accuracy = share of notes whose string equals the human one (with the pitch the same, so is the
fret). A note's string is its String token, or in tab layout 3, where a note on its lowest-fret string writes
none, that string in the part's tuning and capo (`note_strings`). Dead notes and natural harmonics are left out
(their string and fret are no fretted pitch), and so are notes whose human string cannot sound their pitch.
`evaluate_folder` does it for every file of a folder that carries a human fingering (`guitarformer eval --run RUN
--fingering DIR`); unreadable files are listed, never fatal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path


from guitarformer.vocab.tab_tokens import lowest_fret_string
from guitarformer.vocab.tokenization import encode
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.fingering.part import finger_score
from guitarformer.fingering.tab_model import BEAM, Guitar, TabVocab, check_fingering_run, refinger
from guitarformer.fingering.combined import MODEL_WEIGHT, finger_combined
from guitarformer.music.guitar import MAX_FRET, fret_of
from guitarformer.music.score import GuitarScore
from guitarformer.readers import detect_format, read_guitar

@dataclass
class PartIds:
    """One part with a human fingering, as tokens: `human` (ids with the human strings), `fretted` (fret()'s),
    the part's guitar, its source (a folder name) and `counted` (per note in token order: compared or not)."""

    name: str
    source: str
    guitar: Guitar
    human: list[int]
    fretted: list[int]
    counted: list[bool]
    score: GuitarScore | None = None  # the part itself, for fingerings computed on its notes (fret() + model)

    @property
    def notes(self) -> int:
        return sum(self.counted)


def has_human_fingering(gs: GuitarScore) -> bool:
    """The reader set frets from the file (tab, Guitar Pro, MusicXML with TAB); MIDI and plain notation leave
    them None."""
    return (gs.frets is not None and len(gs.frets) == len(gs.track.notes)
            and gs.source_format not in ("midi", "generated"))


def note_strings(tokenizer, ids: Sequence[int], guitar: Guitar | None = None) -> list[tuple[int, int, bool]]:
    """(string, pitch, fretted) of each note in token order; fretted is False for dead notes and natural
    harmonics. A note without a String token (tab layout 3: on its lowest-fret string) has that string in
    `guitar` (tuning, capo), or 0 without one."""
    v = TabVocab(tokenizer) if not isinstance(tokenizer, TabVocab) else tokenizer
    out = []
    for j, end in enumerate(v.note_ends(ids)):
        if not end:
            continue
        pitch, k, string = v.note_pitch(ids, j), j + 1, 0
        if k < len(ids) and ids[k] in v.string_of:
            string, k = v.string_of[ids[k]], k + 1
        elif v.implied and guitar is not None:
            string = lowest_fret_string(tuple(guitar[0]), int(guitar[1]), pitch)
        plain = True
        while k < len(ids) and ids[k] in v.tail:
            plain &= ids[k] not in v.not_fretted
            k += 1
        out.append((string, pitch, plain))
    return out


def part_ids(tokenizer, gs: GuitarScore, name: str = "", source: str = "") -> PartIds | None:
    """A part with a human fingering as PartIds (None when no note can be compared)."""
    if not has_human_fingering(gs):
        return None
    human = encode(tokenizer, gs)
    fretted = encode(tokenizer, finger_score(gs))
    counted = []
    for s, p, plain in note_strings(tokenizer, human, (gs.tuning, gs.capo)):
        counted.append(plain and 0 <= fret_of(p, s, gs.tuning, gs.capo) <= MAX_FRET)
    if not any(counted):
        return None
    return PartIds(name, source, (tuple(gs.tuning), gs.capo), human, fretted, counted, gs)


@dataclass
class Agreement:
    """Notes compared, and how many the model and fret() finger as the human did; parts counted. `either`: notes
    one of the two fingers as the human did, what a perfect choice between them, note by note, would reach (the
    headroom for combining them)."""

    parts: int = 0
    notes: int = 0
    model: int = 0
    fret: int = 0
    either: int = 0

    def add(self, other: Agreement) -> None:
        self.parts, self.notes = self.parts + other.parts, self.notes + other.notes
        self.model, self.fret = self.model + other.model, self.fret + other.fret
        self.either += other.either

    def as_dict(self) -> dict:
        return {"parts": self.parts, "notes": self.notes, "model_right": self.model, "fret_right": self.fret,
                "model_accuracy": self.model / self.notes if self.notes else None,
                "fret_accuracy": self.fret / self.notes if self.notes else None,
                "either_accuracy": self.either / self.notes if self.notes else None}


def compare_part(tokenizer, part: PartIds, model_ids: Sequence[int]) -> Agreement:
    """Agreement of the model's ids (`part.human` with its strings re-chosen) and fret()'s with the human."""
    v = TabVocab(tokenizer)
    h, m, f = (note_strings(v, x, part.guitar) for x in (part.human, model_ids, part.fretted))
    if not len(h) == len(m) == len(f) == len(part.counted):
        raise ValueError(f"{part.name}: the three encodings hold different notes ({len(h)}, {len(m)}, {len(f)})")
    a = Agreement(parts=1, notes=part.notes)
    for (sh, _, _), (sm, _, _), (sf, _, _), c in zip(h, m, f, part.counted):
        a.model += c and sm == sh
        a.fret += c and sf == sh
        a.either += c and (sm == sh or sf == sh)
    return a


def score_parts(model, tokenizer, parts: Sequence[PartIds], device=None, batch_size: int = 64,
                context: int | None = None, beam: int = BEAM) -> list[Agreement]:
    """Each part's Agreement, the model's strings chosen for all parts in shared batches."""
    model_ids = refinger(model, tokenizer, [p.human for p in parts], [p.guitar for p in parts], device, batch_size,
                         context, beam)
    return [compare_part(tokenizer, p, m) for p, m in zip(parts, model_ids)]


def score_parts_combined(model, tokenizer, parts: Sequence[PartIds], weight: float = MODEL_WEIGHT, rounds: int = 1,
                         device=None, batch_size: int = 64, context: int | None = None) -> list[Agreement]:
    """Each part's Agreement with fret() + the model (fingering/combined.py) in the model's place: fret()'s
    Viterbi with `weight * -log p(string)` from the model added per note."""
    frets = finger_combined(model, tokenizer, [p.score for p in parts], weight, rounds, device, batch_size, context)
    return [compare_part(tokenizer, p, encode(tokenizer, replace(p.score, frets=f))) for p, f in zip(parts, frets)]


@dataclass
class FolderReport:
    """Per source folder and pooled Agreement, and the files passed over with the reason."""

    sources: dict[str, Agreement] = field(default_factory=dict)
    pooled: Agreement = field(default_factory=Agreement)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"sources": {k: a.as_dict() for k, a in sorted(self.sources.items())},
                "pooled": self.pooled.as_dict(),
                "skipped": [{"path": p, "reason": r} for p, r in self.skipped]}


def read_parts(tokenizer, files: Sequence[Path], root: Path, skipped: list[tuple[str, str]],
               dedupe: bool = False) -> list[PartIds]:
    """PartIds of every part with a human fingering in `files` (source: the first folder under `root`, "."
    for files directly in it). Unreadable files and files with no fingered part go to `skipped` with the
    reason. `dedupe`: one copy of parts with the same notes and fingering (a song saved as .gp3/.gp4/.gp5)."""
    parts, seen = [], set()
    for path in files:
        rel = path.relative_to(root) if path.is_relative_to(root) else Path(path.name)
        source = rel.parts[0] if len(rel.parts) > 1 else "."
        try:
            got = read_guitar(path)
        except SkipFile as e:
            skipped.append((str(rel), str(e)))
            continue
        except Exception as e:  # broken files are part of real data: report and go on
            skipped.append((str(rel), f"unreadable: {_first_line(e)}"))
            continue
        found = 0
        for k, gs in enumerate(got):
            if dedupe:
                key = hashlib.sha1(repr((gs.tuning, gs.capo, [(n.time, n.pitch) for n in gs.track.notes],
                                         gs.frets)).encode()).hexdigest()
                if key in seen:
                    found += 1
                    continue
                seen.add(key)
            try:
                p = part_ids(tokenizer, gs, f"{rel}#{k}", source)
            except Exception as e:  # a part the tokenizer cannot take
                skipped.append((f"{rel}#{k}", f"not encodable: {_first_line(e)}"))
                continue
            if p is not None:
                parts.append(p)
                found += 1
        if not found:
            skipped.append((str(rel), "no part with a human fingering (string and fret) to compare"))
    return parts


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0][:200] if str(e).strip() else type(e).__name__


def evaluate_folder(model, tokenizer, folder: Path, device=None, batch_size: int = 64,
                    beam: int = BEAM) -> FolderReport:
    """Agreement with the human fingering of every fingered file under `folder` (recursive), per source folder
    and pooled; never fatal on a bad file."""
    check_fingering_run(model, tokenizer)
    folder = Path(folder)
    if not folder.is_dir():
        raise GuitarformerError(f"--fingering {folder}: not a folder", "pass a folder of tabs or Guitar Pro files")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and detect_format(p) is not None
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    report = FolderReport()
    parts = read_parts(tokenizer, files, folder, report.skipped)
    for p, a in zip(parts, score_parts(model, tokenizer, parts, device, batch_size, beam=beam)):
        report.sources.setdefault(p.source, Agreement()).add(a)
        report.pooled.add(a)
    return report


def format_report(report: FolderReport) -> str:
    """The agreement table as text."""
    def pct(x):
        return "-" if x is None else f"{x:.1%}"

    lines = [f"{'source':<28} {'parts':>6} {'notes':>8} {'model':>7} {'fret()':>7}"]
    rows = [*sorted(report.sources.items()), ("pooled", report.pooled)]
    for name, a in rows:
        d = a.as_dict()
        lines.append(f"{name[:28]:<28} {a.parts:>6} {a.notes:>8} {pct(d['model_accuracy']):>7} "
                     f"{pct(d['fret_accuracy']):>7}")
    if report.skipped:
        lines.append(f"{len(report.skipped)} files or parts passed over:")
        lines += [f"  {p}: {r}" for p, r in report.skipped[:20]]
        if len(report.skipped) > 20:
            lines.append(f"  ... and {len(report.skipped) - 20} more (all in --json)")
    return "\n".join(lines)
