"""Reference music for the feature comparison: a dataset split, or a folder of files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import symusic

from guitarformer.data.dataset import TokenSplit
from guitarformer.vocab.tokenization import decode
from guitarformer.evaluation.features import Piece, piece_of
from guitarformer.fingering import UNPLAYABLE
from guitarformer.readers import detect_format, read_guitar


@dataclass
class Reference:
    """Real music to compare samples with: each part as a Piece (features, playability) and as its score (bars and
    time signatures, for the form measure), in the same order; files that could not be read."""

    pieces: list[Piece] = field(default_factory=list)
    scores: list[symusic.Score] = field(default_factory=list)
    skipped: int = 0


def reference_from_split(dataset: Path, split: str, tokenizer) -> Reference:
    """The split's sequences decoded back to music through the tokenizer."""

    part = TokenSplit(dataset, split)
    scores = [decode(tokenizer, part.sequence(i).tolist()) for i in range(part.num_sequences)]
    return Reference([piece_of(s) for s in scores], scores)


def _fretted_only(gs) -> list[tuple[int, int]] | None:
    """The part's human frets with harmonics and dead notes marked unplayable: a harmonic's string/fret names a
    node to touch and a dead note's no pitch, so `fingering_agreement` leaves them out (as
    benchmarks/bench_fretting.py does)."""
    if not gs.frets:
        return gs.frets

    techniques = gs.techniques or ()
    skip = {i for i, t in enumerate(techniques) if t.harmonic or t.dead}
    return [UNPLAYABLE if i in skip else f for i, f in enumerate(gs.frets)]


def reference_from_dir(folder: Path, limit: int = 500) -> Reference:
    """Every readable guitar part under a folder (read_guitar), with human frets where the file has them."""

    ref = Reference()
    files = sorted(f for f in Path(folder).rglob("*") if f.is_file() and detect_format(f))
    for f in files[:limit]:
        try:
            parts = read_guitar(f)
        except Exception:  # unreadable or not guitar: a reference set is best effort
            ref.skipped += 1
            continue
        for gs in parts:
            if len(gs.track.notes) >= 2:
                ref.pieces.append(piece_of(gs.score, gs.tuning, gs.capo, _fretted_only(gs)))
                ref.scores.append(gs.score)
    return ref
