"""Guitar Pro 5 out (PyGuitarPro): one track with its tuning, capo, tempo, time signatures, strings and frets."""

from __future__ import annotations

import guitarpro as gp

from guitarformer.music.guitar import MAX_FRET
from guitarformer.render.ascii_tab import bars_of, resolve_frets

# Guitar Pro durations (ticks at 960 per quarter), longest first: (ticks, value, dotted).
_GP_Q = 960
_GP_DURATIONS = [
    (int(_GP_Q * 4 / v * (1.5 if d else 1)), v, d) for v in (1, 2, 4, 8, 16, 32, 64) for d in (True, False)
]
_GP_DURATIONS.sort(key=lambda x: -x[0])
_GP_GRID = _GP_Q // 16  # a 64th note: onsets are quantised to it


def _split_duration(ticks: int) -> list[tuple[int, int, bool]]:
    """Greedy decomposition of a gap into Guitar Pro durations (value, dotted)."""
    out = []
    while ticks >= _GP_GRID:
        t, v, d = next(x for x in _GP_DURATIONS if x[0] <= ticks)
        out.append((t, v, d))
        ticks -= t
    return out


def write_gp5(gs, path, frets=None) -> None:
    """Write the part as a one-track Guitar Pro 5 file (tuning, capo, tempo, time signatures, string/fret).

    Onsets are quantised to 64th notes; each onset is a beat lasting until the next onset (or the bar
    end), split into Guitar Pro durations with rests, so held notes that overlap later onsets are
    shortened. Unplayable notes and a second note on an already used string at one onset are left out.
    """
    frets = resolve_frets(gs, frets)
    notes = gs.track.notes
    tpq = gs.score.ticks_per_quarter
    n_str = len(gs.tuning)

    def q(t: int) -> int:
        return round(t * _GP_Q / tpq / _GP_GRID) * _GP_GRID

    end_src = max((x.time + x.duration for x in notes), default=1)
    bars = bars_of(gs.score, end_src)

    song = gp.models.Song()
    song.title = gs.name or ""
    song.tempo = int(round(gs.score.tempos[0].qpm)) if len(gs.score.tempos) else 120
    track = song.tracks[0]
    track.name = (gs.name or "Guitar")[:40]
    track.strings = [gp.models.GuitarString(i + 1, p) for i, p in enumerate(reversed(gs.tuning))]
    track.offset = gs.capo
    track.fretCount = MAX_FRET
    track.channel.instrument = int(gs.track.program) if not gs.track.is_drum else 25
    song.measureHeaders.clear()
    track.measures.clear()

    # Time signature per bar, from the source.
    ts_list = sorted((ts.time, ts.numerator, ts.denominator) for ts in gs.score.time_signatures) or [(0, 4, 4)]
    by_onset: dict[int, list[tuple[int, int, int]]] = {}
    for x, (s, f) in zip(notes, frets):
        if f >= 0 and 1 <= s <= n_str:
            by_onset.setdefault(q(x.time), []).append((s, f, int(x.velocity)))

    gp_start = _GP_Q  # GP's first measure starts at one quarter
    for k, (start, length) in enumerate(bars):
        num, den = 4, 4
        for t, nu, de in ts_list:
            if t <= start:
                num, den = nu, de
        header = gp.models.MeasureHeader(number=k + 1, start=gp_start)
        header.timeSignature.numerator = num
        header.timeSignature.denominator = gp.models.Duration(value=den)
        header.song = song
        song.measureHeaders.append(header)
        measure = gp.models.Measure(track, header)
        track.measures.append(measure)
        voice = measure.voices[0]

        b0, b1 = q(start), q(start) + header.length
        onsets = sorted(t for t in by_onset if b0 <= t < b1)
        points = onsets + [b1]
        if not onsets or onsets[0] > b0:
            points = [b0] + points  # leading rest
        for i in range(len(points) - 1):
            t, nxt = points[i], points[i + 1]
            parts = _split_duration(nxt - t)
            for j, (_, v, d) in enumerate(parts):
                beat = gp.models.Beat(voice, duration=gp.models.Duration(value=v, isDotted=d))
                if j == 0 and t in by_onset:
                    used = set()
                    for s, f, vel in by_onset[t]:
                        if s in used:
                            continue
                        used.add(s)
                        beat.notes.append(gp.models.Note(beat, value=f, string=s, velocity=vel, type=gp.NoteType.normal))
                    beat.status = gp.models.BeatStatus.normal
                else:
                    beat.status = gp.models.BeatStatus.rest
                voice.beats.append(beat)
        gp_start += header.length
    gp.write(song, str(path), version=(5, 1, 0))
