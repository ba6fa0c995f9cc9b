"""Guitar Pro 5 out (PyGuitarPro): one track per part with its tuning, capo, strings and frets, the score's tempo and
time signatures, and each note's techniques as Guitar Pro effects. A drum part is a percussion track on channel 10,
as Guitar Pro writes one: its "strings" are tuned to 0 and each hit's fret value is its General MIDI drum key."""

from __future__ import annotations

from typing import Sequence

import guitarpro as gp

from guitarformer.music.bars import bar_index
from guitarformer.music.drums import DRUM_CHANNEL, DRUM_VOICES
from guitarformer.music.guitar import MAX_FRET
from guitarformer.music.score import Technique
from guitarformer.render.ascii_tab import (Unplaced, bars_of, resolve_frets, signature_at, tempo_at, techniques_of,
                                           unplaced_notes)

# Guitar Pro durations (ticks at 960 per quarter), longest first: (ticks, value, dotted).
_GP_Q = gp.Duration.quarterTime  # PyGuitarPro's ticks per quarter (960)
_GP_DURATIONS = [
    (int(_GP_Q * 4 / v * (1.5 if d else 1)), v, d) for v in (1, 2, 4, 8, 16, 32, 64) for d in (True, False)
]
_GP_DURATIONS.sort(key=lambda x: -x[0])
_GP_GRID = _GP_Q // 16  # a 64th note: onsets are quantised to it
_SLIDES = {"below": gp.SlideType.intoFromBelow, "above": gp.SlideType.intoFromAbove,
           "shift": gp.SlideType.shiftSlideTo, "legato": gp.SlideType.legatoSlideTo,
           "down": gp.SlideType.outDownwards, "up": gp.SlideType.outUpwards}
GENERATED_MARK = "generated from here"  # the section marker on the bar where a model's notes begin

_HARMONICS = {"natural": gp.NaturalHarmonic, "artificial": gp.ArtificialHarmonic, "pinch": gp.PinchHarmonic,
              "semi": gp.SemiHarmonic}


def _split_duration(ticks: int) -> list[tuple[int, int, bool]]:
    """Greedy decomposition of a gap into Guitar Pro durations (value, dotted)."""
    out = []
    while ticks >= _GP_GRID:
        t, v, d = next(x for x in _GP_DURATIONS if x[0] <= ticks)
        out.append((t, v, d))
        ticks -= t
    return out


def _bend(points) -> gp.BendEffect | None:
    """Technique bend points (position 0..1, quarter tones) as a Guitar Pro bend (positions 0..12)."""
    pts = [(min(1.0, max(0.0, p)), round(a)) for p, a in sorted(points)]
    peak = max((a for _, a in pts), default=0)
    if peak <= 0:
        return None
    first, last = pts[0][1], pts[-1][1]
    if first > 0:
        kind = gp.BendType.prebendRelease if last < first else gp.BendType.prebend
    else:
        downs = sum(1 for (_, a), (_, b) in zip(pts, pts[1:]) if b < a)
        ups = sum(1 for (_, a), (_, b) in zip(pts, pts[1:]) if b > a)
        kind = (gp.BendType.bendReleaseBend if downs and ups > 1 else gp.BendType.bendRelease if downs
                else gp.BendType.bend)
    scale = gp.BendEffect.maxPosition
    return gp.BendEffect(type=kind, value=peak * 25, points=[gp.BendPoint(round(p * scale), a) for p, a in pts])


def _effect(t: Technique, fret: int, hammer_to_next: bool) -> gp.NoteEffect:
    """A Technique as a Guitar Pro note effect. Guitar Pro marks a hammer-on/pull-off on the note it starts from,
    the score on the note it lands on: `hammer_to_next` says the next note on this string is hammered or pulled."""
    eff = gp.NoteEffect(hammer=hammer_to_next, palmMute=t.palm_mute, ghostNote=t.ghost, vibrato=t.vibrato,
                        letRing=t.let_ring)
    if t.bend and not t.dead:
        eff.bend = _bend(t.bend)
    eff.slides = [_SLIDES[x] for x in (t.slide_in, t.slide_out) if x in _SLIDES]
    if t.harmonic == "tap":
        eff.harmonic = gp.TappedHarmonic(fret=min(MAX_FRET, fret + 12))
    elif t.harmonic in _HARMONICS:
        eff.harmonic = _HARMONICS[t.harmonic]()
    return eff


def gp_text(text: str) -> str:
    """`text` as a Guitar Pro 5 file can hold it (PyGuitarPro writes its strings in cp1252): characters it cannot hold
    become '?'. The marks of bytes a reader could not decode (U+FFFD: a MIDI track name in another encoding) are left
    out, and a name that was mostly such marks (no letter left) is no name."""
    undecoded = "\ufffd" in text
    text = text.replace("\ufffd", "").encode("cp1252", errors="replace").decode("cp1252").strip()
    if set(text) <= {"?", " "} or (undecoded and not any(c.isalpha() for c in text)):
        return ""
    return text


MAJOR_STEPS = (0, 2, 4, 5, 7, 9, 11)  # the pitch classes of a major scale above its tonic


def key_signature(parts) -> int:
    """Sharps (> 0) or flats (< 0), -6..6, of the key signature whose major scale holds the most of the parts'
    sounding time (each note weighted by its length; the fewer accidentals on a tie), so that a written score marks
    only the notes outside the key (a song in E minor: F# in the signature, not on every F#)."""
    weight = [0] * 12
    for gs in parts:
        for n in gs.track.notes:
            weight[n.pitch % 12] += max(1, n.duration)
    if not any(weight):
        return 0

    def held(sharps: int) -> int:
        tonic = (7 * sharps) % 12  # each sharp a fifth up (G, D, A ...), each flat a fifth down (F, Bb ...)
        return sum(weight[(tonic + step) % 12] for step in MAJOR_STEPS)

    return max(range(-6, 7), key=lambda k: (held(k), -abs(k)))


def write_gp5(gs, path, frets=None, bars: tuple[int, int] | None = None) -> list[Unplaced]:
    """Write the part as a one-track Guitar Pro 5 file; returns the notes it could not write (see `write_gp5_parts`)."""
    return write_gp5_parts([(gs, frets)], path, bars)[0]


def write_gp5_parts(parts: Sequence[tuple], path, bars: tuple[int, int] | None = None,
                    timing=None) -> list[list[Unplaced]]:
    """Write (GuitarScore, frets or None) parts as one Guitar Pro 5 file, a track each (tuning, capo, program,
    string/fret, techniques; a drum part: a percussion track, its frets ignored), bars, tempo and the generated mark from `timing`'s score (a GuitarScore; default: the
    first part's). `bars` = (first, last), 1-based, writes only those bars. Returns, per part, the notes left out:
    unplayable on the tuning, or a second note on a string at one onset.

    Onsets are quantised to 64th notes; each onset is a beat lasting until the next onset (or the bar end), split
    into Guitar Pro durations with rests, so held notes that overlap later onsets are shortened.
    """
    if not parts:
        raise ValueError("no parts to write")
    first_gs = timing or parts[0][0]
    score = first_gs.score
    end_src = max((x.time + x.duration for gs, _ in parts for x in gs.track.notes), default=1)
    layout = bars_of(score, end_src)
    a, b = bars or (1, len(layout))
    if not 1 <= a <= b or a > len(layout):
        raise ValueError(f"bars {a}-{b}: the part has {len(layout)} bars")
    chosen = layout[a - 1:b]

    song = gp.models.Song()
    song.title = gp_text((first_gs.name or "").split(" [")[0])  # a part's name is "song [track]"
    song.tempo = round(tempo_at(score, chosen[0][0]))
    song.tracks.clear()
    song.measureHeaders.clear()
    gp_start = _GP_Q  # GP's first measure starts at one quarter
    key = gp.KeySignature((key_signature([gs for gs, _ in parts]), 0))
    for k, (start, _length) in enumerate(chosen):
        num, den = signature_at(score, start)
        header = gp.models.MeasureHeader(number=k + 1, start=gp_start)
        header.keySignature = key
        header.timeSignature.numerator = num
        header.timeSignature.denominator = gp.models.Duration(value=den)
        header.song = song
        song.measureHeaders.append(header)
        gp_start += header.length
    _mark_generated(song, first_gs.extra.get("generated_from_tick"), chosen)

    left_out = []
    for i, (gs, frets) in enumerate(parts):
        placed = drum_frets(gs) if gs.is_drum else resolve_frets(gs, frets)
        left_out.append(_write_track(song, i, gs, placed, chosen, (a, b)))
    _write_tempo_changes(song, score, chosen)
    gp.write(song, str(path), version=(5, 1, 0))
    return left_out


def _mark_generated(song, tick: int | None, chosen) -> None:
    """A section marker on the written bar where a model's notes begin (`tick`: the first part's
    `extra["generated_from_tick"]`: a continued prompt, a filled gap), as the tab's "[generated from here]" and the
    MIDI's "generated" marker show it; none where that bar is not written."""
    if tick is None:
        return
    for header, (start, length) in zip(song.measureHeaders, chosen):
        if start <= tick < start + length:
            header.marker = gp.models.Marker(title=GENERATED_MARK)
            return


def _write_tempo_changes(song, score, chosen) -> None:
    """Tempo changes inside the written bars, as mix-table changes on the first track's beat where each falls
    (Guitar Pro tempos are whole BPM; the song's tempo is the one in force at the first bar)."""
    tpq = score.ticks_per_quarter
    start, end = chosen[0][0], chosen[-1][0] + chosen[-1][1]
    beats = [b for m in song.tracks[0].measures for b in m.voices[0].beats]
    current = song.tempo
    for t in score.tempos:
        if not start < t.time < end:
            continue
        qpm = round(t.qpm)
        gp_time = _GP_Q + round((t.time - start) * _GP_Q / tpq)  # GP's first measure starts at one quarter
        at = [b for b in beats if b.start <= gp_time]
        if qpm == current or not at:
            continue
        at[-1].effect.mixTableChange = gp.MixTableChange(tempo=gp.MixTableItem(value=qpm, duration=0),
                                                         hideTempo=False)
        current = qpm


def drum_frets(gs) -> list[tuple[int, int]]:
    """A drum part's hits as (voice, drum key): the hits at one onset on "strings" 1, 2, ... of a percussion track;
    (-1, -1) for a hit past its DRUM_VOICES (Guitar Pro holds one note per string at a beat)."""
    frets, voices = [], {}
    for n in gs.track.notes:
        v = voices[n.time] = voices.get(n.time, 0) + 1
        frets.append((v, int(n.pitch)) if v <= DRUM_VOICES else (-1, -1))
    return frets


def _crowded_hits(gs, frets) -> list[Unplaced]:
    """The hits of a drum part drum_frets found no voice for ("chord": more at once than a percussion track holds)."""
    notes = gs.track.notes
    starts = [b[0] for b in bars_of(gs.score, max((x.time + 1 for x in notes), default=1))]
    return [Unplaced(k, bar_index(starts, notes[k].time) + 1, int(notes[k].pitch), "chord")
            for k, (s, _) in enumerate(frets) if s < 0]


def _new_track(song, i: int, gs) -> gp.models.Track:
    """The empty Guitar Pro track of part `i`: its strings, capo and MIDI channel (a drum part: percussion on channel
    10, strings tuned to 0)."""
    name = gp_text(gs.extra.get("track_name") or gs.name or "") or ("Drums" if gs.is_drum else "Guitar")
    track = gp.models.Track(song, number=i + 1, name=name[:40], offset=0 if gs.is_drum else gs.capo,
                            fretCount=MAX_FRET, isPercussionTrack=gs.is_drum)
    track.measures.clear()  # PyGuitarPro gives a new track an empty measure per header; ours are built below
    if gs.is_drum:
        track.strings = [gp.models.GuitarString(k + 1, 0) for k in range(DRUM_VOICES)]
        channel, program = DRUM_CHANNEL, 0
    else:
        track.strings = [gp.models.GuitarString(k + 1, p) for k, p in enumerate(reversed(gs.tuning))]
        channel, program = (i if i < DRUM_CHANNEL else i + 1), int(gs.track.program)  # channel 10 is the drums'
    track.channel = gp.models.MidiChannel(channel=channel % 16, effectChannel=channel % 16, instrument=program)
    song.tracks.append(track)
    return track


def _write_track(song, i: int, gs, frets, chosen, bar_range) -> list[Unplaced]:
    notes = gs.track.notes
    techs = techniques_of(gs)
    tpq = gs.score.ticks_per_quarter
    track = _new_track(song, i, gs)
    n_str = len(track.strings)

    def q(t: int) -> int:
        return round(t * _GP_Q / tpq / _GP_GRID) * _GP_GRID

    # A hammer-on/pull-off is marked in Guitar Pro on the note before it on the string.
    hammer_from = set()
    last_on: dict[int, int] = {}
    for k in sorted(range(len(notes)), key=lambda k: notes[k].time):
        s, f = frets[k]
        if f < 0 or not 1 <= s <= n_str:
            continue
        if techs[k].hammer and s in last_on:
            hammer_from.add(last_on[s])
        last_on[s] = k

    unplaced = _crowded_hits(gs, frets) if gs.is_drum else unplaced_notes(gs, frets)
    left_out = [u for u in unplaced if bar_range[0] <= u.bar <= bar_range[1]]
    skip = {u.index for u in unplaced}
    by_onset: dict[int, list[int]] = {}
    for k, x in enumerate(notes):
        if k not in skip:
            by_onset.setdefault(q(x.time), []).append(k)

    for header, (start, _length) in zip(song.measureHeaders, chosen):
        measure = gp.models.Measure(track, header)
        track.measures.append(measure)
        voice = measure.voices[0]
        b0 = q(start)
        b1 = b0 + header.length
        onsets = sorted(t for t in by_onset if b0 <= t < b1)
        points = onsets + [b1]
        if not onsets or onsets[0] > b0:
            points = [b0] + points  # leading rest
        for j in range(len(points) - 1):
            t, nxt = points[j], points[j + 1]
            at = header.start + t - b0
            for part, (ticks, v, d) in enumerate(_split_duration(nxt - t)):
                beat = gp.models.Beat(voice, duration=gp.models.Duration(value=v, isDotted=d), start=at)
                at += ticks
                beat.status = gp.models.BeatStatus.rest
                if part == 0 and t in by_onset:
                    used = set()
                    for k in by_onset[t]:
                        s, f = frets[k]
                        if s in used:  # two onsets quantised together on one string
                            left_out.append(Unplaced(k, header.number + bar_range[0] - 1, int(notes[k].pitch), "busy"))
                            continue
                        used.add(s)
                        tech = techs[k]
                        beat.notes.append(gp.models.Note(
                            beat, value=f, string=s, velocity=int(notes[k].velocity),
                            type=gp.NoteType.dead if tech.dead else gp.NoteType.normal,
                            effect=_effect(tech, f, k in hammer_from)))
                        if tech.tap:
                            beat.effect.slapEffect = gp.SlapEffect.tapping
                    beat.status = gp.models.BeatStatus.normal
                voice.beats.append(beat)
    return left_out
