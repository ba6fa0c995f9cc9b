"""An untrained tiny run the studio can be asked everything of: TabREMI with control tokens and fill tokens, its
config saying so (data.controls, data.infill), so every option and Regenerate are available."""

from __future__ import annotations

import socket
from pathlib import Path

from guitarformer.config import DataConfig
from guitarformer.vocab.tokenization import build_tokenizer
from guitarformer.runs.checkpoint import load_checkpoint, save_checkpoint
from helpers.tiny_runs import untrained_run

STYLES = ("folk", "rock")


def studio_run(run: Path, controls: bool = True, infill: float = 0.3, block_size: int = 512, seed: int = 0,
               parts: str = "") -> Path:
    """Write the run at `run`: an untrained 1-layer decoder (tests/helpers/tiny_runs.py) whose config has the
    tokenizer's controls and infilling switched on, as a run trained with them would."""
    tok = build_tokenizer(DataConfig(tokenizer="TabREMI", controls=controls, parts=parts),
                          styles=STYLES if controls else ())
    untrained_run(run, tok, block_size, seed=seed, max_new_tokens=block_size)
    ckpt = run / "ckpt" / "last.pt"
    state = load_checkpoint(ckpt)
    state["config"]["data"].update(controls=controls, infill=infill, parts=parts)
    save_checkpoint(ckpt, state)
    return run


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def band_midi(bars: int = 4, parts: tuple[str, ...] = ("guitar", "bass", "drums")) -> bytes:
    """A MIDI file of three parts, `bars` bars of 4/4 at 120 BPM: a guitar (eighth notes), a bass (quarter notes)
    and drums (kick, snare and hi-hat), as a band's file brings them to the studio (`parts`: those of them)."""
    import symusic

    s = symusic.Score(480)
    s.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    s.tempos.append(symusic.Tempo(0, 120))
    guitar = symusic.Track(name="Lead guitar", program=29)
    guitar.notes.extend(symusic.Note(bar * 1920 + i * 240, 240, p + bar % 2 * 2, 100) for bar in range(bars)
                        for i, p in enumerate((52, 55, 57, 59, 62, 59, 57, 55)))
    bass = symusic.Track(name="Bass", program=33)
    bass.notes.extend(symusic.Note(bar * 1920 + i * 480, 480, p, 100) for bar in range(bars)
                      for i, p in enumerate((40, 40, 43, 45)))
    drums = symusic.Track(name="Drums", program=0, is_drum=True)
    drums.notes.extend(symusic.Note(bar * 1920 + i * 480, 120, p, 100) for bar in range(bars) for i in range(4)
                       for p in ((36 if i % 2 == 0 else 38), 42))
    s.tracks.extend([t for t, name in ((guitar, "guitar"), (bass, "bass"), (drums, "drums")) if name in parts])
    return bytes(s.dumps_midi())
