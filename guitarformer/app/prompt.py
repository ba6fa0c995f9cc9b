"""A file to continue (`sample --prompt`): its part as read, and the window of its last whole bars the model sees;
and how many tokens a bar takes, which sizes the token budget of `--bars`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import symusic

from guitarformer.app.files import UserSong, read_user_song
from guitarformer.vocab.tab_tokens import is_tab_tokenizer
from guitarformer.vocab.tokenization import decode, encode
from guitarformer.errors import GuitarformerError
from guitarformer.fingering import finger_score
from guitarformer.music.bars import bar_lines, count_bars, signature_at
from guitarformer.music.score import GuitarScore

# Without a prompt: at least the tokens of a dense bar, eighth-note power chords in tab tokens (a riff ends at its last
# bar, so room costs nothing; the data's average is a fiddle tune's, a third of a rock bar's)
TOKENS_PER_BAR = 128


@dataclass
class Prompt:
    """A file to continue: its part as read, and the part of it the model sees (its last whole bars)."""

    gs: GuitarScore
    ids: list[int]  # BOS + the window's tokens (no EOS)
    start: int  # tick of gs where the window begins (a bar line)
    new_from: int  # tick of gs where the new bars begin: the first bar line after the last onset
    bars: int  # bars in the window
    prompt_bars: int  # bars of the whole part up to new_from
    meter: tuple[int, int] = (4, 4)  # the time signature of the part's last bar: the new bars keep it
    tempo: float = 120.0  # the tempo in force at the end of the part: the new bars keep it unless one is asked
    song: UserSong | None = None  # every part of the file, `gs` among them: written back with the new bars

    def others_end(self) -> int:
        """The tick where the file's other parts' last note ends (0: no other part)."""
        if self.song is None:
            return 0
        return max((n.time + n.duration for k, p in enumerate(self.song.parts) if k != self.song.index
                    for n in p.track.notes), default=0)

    def parts(self, gs: GuitarScore) -> list[GuitarScore]:
        """The file's parts with `gs` (the part continued) in the place of the part read."""
        return self.song.with_part(gs) if self.song is not None else [gs]

    @property
    def edited(self) -> int:
        """The continued part's place among `parts`."""
        return self.song.index if self.song is not None else 0


def read_prompt(tokenizer, path: Path | str, max_tokens: int, track: str | None = None,
                tracks: str = "guitar") -> Prompt:
    """The part `track` names of a MIDI/GP/tab/MusicXML file (number from 1 or name, among its guitar parts or,
    with tracks="all", every part; default: the first; a file without a guitar part: its first part), the file's
    other parts (written back around it), and the window the model sees: the last whole bars whose tokens fit in `max_tokens` (BOS included), re-encoded from
    the bar they start at, so that the window opens as every piece does (time signature, tempo)."""
    song = read_user_song(path, track, tracks=tracks, any_part=True)
    prompt = prompt_of(tokenizer, song.part, max_tokens)
    prompt.song = song
    return prompt


def prompt_of(tokenizer, gs: GuitarScore, max_tokens: int) -> Prompt:
    """The `Prompt` of a part already read (see `read_prompt`)."""
    if not len(gs.track.notes):
        raise GuitarformerError(f"prompt {gs.name or 'part'} has no notes",
                                "pass a MIDI, Guitar Pro, ASCII tab or MusicXML file with notes")
    score = gs.score
    last = max(n.time for n in gs.track.notes)
    lines = bar_lines(score.time_signatures, score.ticks_per_quarter, last + 1)  # starts, then the line after
    starts = lines[:-1]
    tab = is_tab_tokenizer(tokenizer)
    if tab and gs.frets is None:  # a tab-token model reads strings: a prompt without them gets fret()'s
        gs.frets = finger_score(gs).frets

    def window(i: int) -> list[int]:
        part = _from_tick(score, starts[i], lines[-1])
        if tab:  # the window's notes keep their fingering and techniques (notes from `start` on, in order)
            keep = [k for k, n in enumerate(gs.track.notes) if n.time >= starts[i]]
            techs = gs.techniques
            part = GuitarScore(score=part, tuning=gs.tuning, capo=gs.capo, frets=[gs.frets[k] for k in keep],
                               techniques=[techs[k] for k in keep] if techs else None)
        return encode(tokenizer, part)[:-1]

    lo, hi = 0, len(starts) - 1  # the earliest bar whose window fits (the last bar always does: a bar is whole)
    best = window(hi)
    while lo < hi:
        mid = (lo + hi) // 2
        ids = window(mid)
        if len(ids) <= max_tokens:
            hi, best = mid, ids
        else:
            lo = mid + 1
    tempos = [t.qpm for t in sorted(score.tempos, key=lambda t: t.time) if t.time < lines[-1]]
    return Prompt(gs=gs, ids=best, start=starts[hi], new_from=lines[-1], bars=len(starts) - hi,
                  prompt_bars=len(starts), meter=signature_at(score.time_signatures, score.ticks_per_quarter,
                                                              lines[-1] - 1),
                  tempo=float(tempos[-1]) if tempos else 120.0)


def _from_tick(score: symusic.Score, start: int, end: int) -> symusic.Score:
    """The score from `start` to `end` (the bar line after the last note's bar), moved to tick 0, with the tempo and
    time signature in force at `start`. Tempo and meter changes from `end` on are left out: a file that ends in empty
    bars (a Guitar Pro song's closing rests, its tempo automation) would give a window that ends in bars without a
    note, which the model continues after them, past the bars asked for (`sample --prompt` wrote nothing)."""
    out = symusic.Score(score.ticks_per_quarter)
    tempos = sorted((e for e in score.tempos if e.time < end), key=lambda e: e.time)
    sigs = sorted((e for e in score.time_signatures if e.time < end), key=lambda e: e.time)
    at_start = [e for e in tempos if e.time <= start][-1:]
    out.tempos.extend([symusic.Tempo(0, e.qpm) for e in at_start] +
                      [symusic.Tempo(e.time - start, e.qpm) for e in tempos if e.time > start])
    at_start = [e for e in sigs if e.time <= start][-1:]
    out.time_signatures.extend([symusic.TimeSignature(0, e.numerator, e.denominator) for e in at_start] +
                               [symusic.TimeSignature(e.time - start, e.numerator, e.denominator)
                                for e in sigs if e.time > start])
    src = score.tracks[0]
    track = symusic.Track(name=src.name, program=src.program, is_drum=False)
    track.notes.extend(symusic.Note(n.time - start, n.duration, n.pitch, n.velocity) for n in src.notes
                       if n.time >= start)
    out.tracks.append(track)
    return out


def bars_of_score(score: symusic.Score) -> int:
    """Bars up to the score's end, following its time signatures (0 for an empty score)."""
    end = score.end()
    return count_bars(score.time_signatures, score.ticks_per_quarter, end) if end > 0 else 0


def tokens_per_bar(tokenizer, cfg, prompt: Prompt | None = None) -> float:
    """How many tokens a bar takes: the prompt's window, else the run's training data, else the built-in corpus's."""
    if prompt is not None and prompt.bars:
        return max(1.0, (len(prompt.ids) - 1) / prompt.bars)
    return max(data_tokens_per_bar(tokenizer, cfg.data.dataset) or 0.0, TOKENS_PER_BAR)


def data_tokens_per_bar(tokenizer, dataset: str, max_tokens: int = 40_000) -> float | None:
    """Tokens per bar over the first pieces of a prepared dataset's train split (None when it is not at hand)."""
    folder = Path(dataset or "").expanduser()
    try:
        dtype = json.loads((folder / "meta.json").read_text())["dtype"]
        flat = np.memmap(folder / "train.bin", dtype=dtype, mode="r")
        offsets = np.load(folder / "train.idx.npy")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    tokens = bars = 0
    for a, b in zip(offsets[:-1], offsets[1:]):
        ids = flat[a:min(b, a + max_tokens)].tolist()
        tokens += len(ids)
        bars += bars_of_score(decode(tokenizer, ids))
        if tokens >= max_tokens:
            break
    return tokens / bars if bars else None
