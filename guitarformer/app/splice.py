"""New notes into a part, defined once: `infill` replaces a gap's notes with the model's, `sample --prompt` puts
the model's bars after a file. Each note travels with its (string, fret) and technique, so the three lists of the
result cannot drift apart; notes the splice keeps keep their time, string, fret and techniques."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import symusic

from guitarformer.app.prompt import Prompt
from guitarformer.fingering import finger_score
from guitarformer.compose.riffs import Riff, bars_spanned, clamp_to_tuning, new_bars_from
from guitarformer.music.bars import bar_lines
from guitarformer.music.score import PLAIN, UNPLAYABLE, GuitarScore, Technique

Placed = tuple[symusic.Note, tuple[int, int], Technique]  # a note in the part's ticks, its (string, fret), technique


def splice(part: GuitarScore, new: Sequence[Placed], at: int, drop: Sequence[bool] | None = None,
           score: symusic.Score | None = None, position: int | None = None) -> GuitarScore:
    """`part` less the notes flagged in `drop`, with `new` (sorted by time, then pitch) after the kept notes that
    start before tick `at` and before the rest; each kept note in its own order. A (string, fret) that is
    UNPLAYABLE (unknown, or not on this tuning) gets fret()'s choice in `position` for the whole result.
    `score`: the result's tempos and time signatures (default: the part's)."""
    old = list(part.track.notes)
    drop = drop or [False] * len(old)
    frets = part.frets or [UNPLAYABLE] * len(old)
    techs = part.techniques if part.techniques and len(part.techniques) == len(old) else [PLAIN] * len(old)
    kept = [(n, f, t) for n, f, t, d in zip(old, frets, techs, drop) if not d]
    ordered = ([x for x in kept if x[0].time < at] + sorted(new, key=lambda x: (x[0].time, x[0].pitch)) +
               [x for x in kept if x[0].time >= at])
    score = (score or part.score).copy()
    track = score.tracks[0]
    track.notes.clear()
    track.notes.extend(n for n, _, _ in ordered)
    out = GuitarScore(score=score, tuning=part.tuning, capo=part.capo, name=part.name, source_format="generated",
                      extra={**part.extra, "generated_from_tick": at})
    out.techniques = [t for _, _, t in ordered] if part.techniques or any(t for _, _, t in new) else None
    out.frets = [f for _, f, _ in ordered]
    if UNPLAYABLE in out.frets:  # fret()'s choice for those notes alone, in the context of the whole part
        fallback = finger_score(out, position).frets
        out.frets = [f if f != UNPLAYABLE else fallback[k] for k, f in enumerate(out.frets)]
    return out


def continue_part(file: Prompt, dec: GuitarScore, window: symusic.Score, tuning: tuple[int, ...],
                  tempo: float | None, program: int, position: int | None, bars: int | None = None) -> Riff:
    """The prompt file's part, whole and as written, followed by the notes the model wrote after its window
    (`dec`: the decoded window and continuation, in the tokenizer's ticks, with the strings and techniques a tab-token
    model wrote: `decode_guitar`), at most `bars` bars of them. The new notes keep the model's strings and techniques
    unless `position` asks for the part fingered again; a model of pitches alone gets fret()'s, its notes first moved
    by octaves into the tuning (as generate_riffs repairs a riff)."""
    notes = list(dec.score.tracks[0].notes) if dec.score.tracks else []
    played = dec.frets is not None and position is None
    frets = dec.frets if played else [UNPLAYABLE] * len(notes)
    techs = dec.techniques if played and dec.techniques else [PLAIN] * len(notes)
    ours = Counter(_key(n) for n in window.tracks[0].notes)
    new = []
    for n, f, t in zip(notes, frets, techs):  # the decoded body less the window's own notes
        if ours[_key(n)] > 0:
            ours[_key(n)] -= 1
        else:
            new.append((n, f, t))
    # Decoded ticks count from the window's first bar at the tokenizer's resolution; map them onto the file's.
    bar_dec = new_bars_from(dec.score, window)
    scale = file.gs.score.ticks_per_quarter / dec.score.ticks_per_quarter

    def to_file(t: int) -> int:
        return file.new_from + round((t - bar_dec) * scale)

    begin = to_file(min([bar_dec] + [n.time for n, _, _ in new]))
    if dec.frets is None:
        part = symusic.Score(dec.score.ticks_per_quarter)
        part.tracks.append(symusic.Track(program=program))
        part.tracks[0].notes.extend(n for n, _, _ in new)
        new = [(n, UNPLAYABLE, PLAIN) for n in clamp_to_tuning(part, tuning).tracks[0].notes]
    placed = [(symusic.Note(to_file(n.time), max(1, round(n.duration * scale)), n.pitch, n.velocity), f, t)
              for n, f, t in new]
    score = _score_of_continuation(file.gs.score, begin, tempo)
    score.tracks[0].program = program
    # The file's markers (section names) go on only as far as its other parts do: a part's later sections would
    # stretch the song past its new bars with silence.
    score.markers = [m for m in score.markers if m.time < max(begin, file.others_end())]
    if bars is not None:  # the file's bar lines decide where the asked bars end, whatever the model counted
        end_of_new = file.new_from
        for _ in range(bars):  # the next bar line, `bars` times
            end_of_new = bar_lines(score.time_signatures, score.ticks_per_quarter, end_of_new + 1)[-1]
        placed = [p for p in placed if p[0].time < end_of_new]
    keep_frets = file.gs.tuning == tuple(tuning) and position is None  # else the whole part is fingered again
    source = GuitarScore(score=file.gs.score, tuning=tuple(tuning), capo=file.gs.capo,
                         frets=file.gs.frets if keep_frets else None, techniques=file.gs.techniques,
                         name=f"{file.gs.name} (continued)" if file.gs.name else "riff", extra=dict(file.gs.extra))
    gs = splice(source, placed, begin, score=score, position=position)
    end = max((n.time + n.duration for n, _, _ in placed), default=file.new_from)
    return Riff(ids=[], gs=gs, frets=gs.frets, new_notes=len(placed),
                new_bars=bars_spanned(score, file.new_from, end))


def _score_of_continuation(base: symusic.Score, begin: int, tempo: float | None) -> symusic.Score:
    """The file's score with, from `begin`, the tempo asked. The new bars stay in the meter of the file's last bar
    (app/sample.py holds the model to it): a meter the model chose for itself would move the song's bar lines. The
    file's own tempo and meter changes from `begin` on (its ending: closing rests, a ritardando) give way to the
    new bars, which the model wrote without them (app/prompt.py's window stops before them)."""
    score = base.copy()
    score.tempos = [t for t in score.tempos if t.time < begin] or list(score.tempos)[:1]
    score.time_signatures = [ts for ts in score.time_signatures if ts.time < begin] or list(score.time_signatures)[:1]
    if tempo is not None:  # the new bars at the tempo asked for; the prompt keeps its own
        kept = [t for t in score.tempos if t.time < begin]
        score.tempos = kept + [symusic.Tempo(begin, float(tempo))]
    return score


def _key(n) -> tuple[int, int, int, int]:
    return n.time, n.duration, n.pitch, n.velocity
