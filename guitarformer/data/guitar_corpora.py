"""The built-in corpus's guitar music, shipped inside the package with each source's licence beside it.

- rock: the guitar parts of Freedoom's level music (General MIDI band arrangements, BSD-3-Clause; corpora/freedoom/,
  copied by tools/copy_freedoom.py): its clean, muted, overdriven and distortion guitar tracks. A muted-guitar
  track is read as a palm-muted part and a part reaching below E2 in the drop tuning or 7-string that plays it
  (readers/midi.py); a part lower than a 7-string's B is moved up by octaves until it fits.
- classical: the Mutopia Project's guitar pieces, rendered from LilyPond by tools/render_mutopia.py into
  corpora/mutopia/<licence>/ with corpora/mutopia/CREDITS.tsv (composer, title, Mutopia id, licence per file).
  Public-domain and CC-BY pieces are built in (TRAIN_LICENCES); the CC-BY-SA ones ship as a test set of the style
  and reach a model only when a user trains on them (`classical_files`).

Each writer returns one record per source file in the shape of the fiddle tunes' (data/corpus.py): its file below
the corpus's midi/ folder, its status and its style, so `labels` gives their Style controls alike.
"""

from __future__ import annotations

import csv
from pathlib import Path

import symusic

CORPORA = Path(__file__).resolve().parent / "corpora"
FREEDOOM = CORPORA / "freedoom"
MUTOPIA = CORPORA / "mutopia"
ROCK_PROGRAMS = (27, 28, 29, 30)  # GM Electric Guitar (clean), (muted), Overdriven, Distortion
LOWEST_PITCH = 35  # B1: a 7-string's lowest open string
TRAIN_LICENCES = ("PD", "CC-BY")
TEST_LICENCES = ("CC-BY-SA",)
# A guitar corpus's record beside a fiddle tune's: no tune number and no written key (prepare estimates it)
NO_KEY = {"tune": None, "number": None, "title": None, "key_label": None, "key": None, "type_from": "source"}
DOUBLED = 0.9  # a track whose (onset, pitch) pairs lie this much in a kept track doubles it


def drop_doubles(tracks: list[symusic.Track]) -> list[symusic.Track]:
    """The tracks, largest first, without those that repeat a kept track's notes (a layered or doubled part, a
    LilyPond TabStaff sending its staff's notes again)."""
    kept: list[tuple[symusic.Track, set]] = []
    for t in sorted(tracks, key=lambda t: -len(t.notes)):
        keys = {(int(n.time), int(n.pitch)) for n in t.notes}
        if not any(len(keys & other) >= DOUBLED * len(keys) for _, other in kept):
            kept.append((t, keys))
    return [t for t, _ in kept]


def rock_score(path: Path) -> symusic.Score | None:
    """A Freedoom file's guitar parts (ROCK_PROGRAMS, doubles dropped) with its tempos and meters; None without."""
    src = symusic.Score(str(path))
    guitars = [t for t in src.tracks if not t.is_drum and t.program in ROCK_PROGRAMS and len(t.notes)]
    if not guitars:
        return None
    out = symusic.Score(src.ticks_per_quarter)
    out.tempos.extend(src.tempos)
    out.time_signatures.extend(src.time_signatures)
    for track in drop_doubles(guitars):
        track = track.copy()
        low = min(n.pitch for n in track.notes)
        shift = 12 * max(0, -((low - LOWEST_PITCH) // 12))  # whole octaves up until the lowest note is on a neck
        if shift:
            for n in track.notes:
                n.pitch += shift
        out.tracks.append(track)
    return out


def freedoom_files(limit: int = 0) -> list[Path]:
    files = sorted(FREEDOOM.glob("*.mid"))
    return files[:limit] if limit else files


def write_rock(midi_dir: Path, limit: int = 0) -> list[dict]:
    """Freedoom's guitar parts as MIDI files in midi_dir/rock/; one record per source file."""
    dest = midi_dir / "rock"
    dest.mkdir(parents=True, exist_ok=True)
    records = []
    for path in freedoom_files(limit):
        rec = {**NO_KEY, "source": f"freedoom/{path.name}", "type": "rock", "licence": "BSD-3-Clause",
               "credit": "Freedoom (CREDITS-MUSIC)"}
        score = rock_score(path)
        if score is None:
            rec.update(status="skipped", reason="no guitar track")
        else:
            score.dump_midi(str(dest / path.name))
            rec.update(status="ok", reason=None, file=f"rock/{path.name}")
        records.append(rec)
    return records


def classical_credits(licences: tuple[str, ...] = TRAIN_LICENCES) -> list[dict]:
    """CREDITS.tsv's rows of the rendered Mutopia files under these licence classes, in file order."""
    credits = MUTOPIA / "CREDITS.tsv"
    if not credits.is_file():
        return []
    with open(credits, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f, delimiter="\t") if r["license_class"] in licences]


def classical_files(licences: tuple[str, ...] = TRAIN_LICENCES, limit: int = 0) -> list[Path]:
    """The rendered Mutopia pieces under these licence classes (TEST_LICENCES: the classical test set)."""
    files = [MUTOPIA / r["file"] for r in classical_credits(licences)]
    return files[:limit] if limit else files


def write_classical(midi_dir: Path, limit: int = 0) -> list[dict]:
    """The built-in Mutopia pieces (TRAIN_LICENCES) copied to midi_dir/classical/; one record per file."""
    dest = midi_dir / "classical"
    dest.mkdir(parents=True, exist_ok=True)
    records = []
    for row in classical_credits()[:limit] if limit else classical_credits():
        name = Path(row["file"]).name
        (dest / name).write_bytes((MUTOPIA / row["file"]).read_bytes())
        records.append({**NO_KEY, "source": f"mutopia/{row['file']}", "type": "classical",
                        "title": f"{row['composer']}: {row['title']}", "licence": row["license"],
                        "credit": f"Mutopia {row['mutopia_id']}", "status": "ok", "reason": None,
                        "file": f"classical/{name}"})
    return records
