"""Read plain-text (ASCII) guitar tab into a GuitarScore that keeps the tab's string/fret for every note.

What is understood:
- staves of 6 or 7 consecutive tab lines ("e|--0--3-|", "E:---", "|---" or no label at all); 4- and
  5-line staves (bass, mandolin, ukulele) make the file a `SkipFile`, as does text without any staff;
- tuning from the line labels (exact where every label has its octave, "E4" as guitarformer writes them; else
  the pitch class per line, the octave the one nearest the standard tuning,
  so "D" on the bottom line is drop D, lowered by octaves where needed so open strings rise from low to high:
  "A" on the bottom line under an "A" line is a low A1), else from a "tuning ..." / "drop D" / "6=D" text line; "capo N";
- bar lines, many staves per file (concatenated in time; lyrics, chord names and text between staves
  are ignored), multi-digit frets;
- several guitars in one file (duets, trios; the text names them: "Gtr II", "guitar 2", "duet", ...) become
  one part each: either every system stacks one staff per guitar (staves with no blank line between them),
  or sections are headed by the guitar they belong to ("Gtr III" above a run of staves). A guitar's own
  tuning line ("Guitar 1 tuning: DADGBE", "Gtr I (E A D G B E)") applies to its part only;
- several versions (arrangements) of a piece in one text, as classtab publishes them (a header listing
  "1st version - ...", "2nd version - in Dm, drop D tuning", then each version after a line of asterisks) become
  one part each (or more, if a version is a duet), with the tuning and capo of their own header line and text;
- techniques, one Technique per note: h/p before a fret is a hammer-on/pull-off; 5/7, 5\\3, 5s7 (also 5/-7
  and 5/|7) slide to the next fret (a new note), 5/-- and 5\\-- slide off the note, -/5 and -\\5 into it; ~
  after a fret is vibrato; the frets after b (bend target) and r (release) are the bent note's pitches, not
  notes (7b9r7: a whole-tone bend and release; a b without a target bends a whole tone); x is a dead note
  (muted, written at fret 0); a "PM---" line right above a staff palm-mutes the notes under it; natural
  harmonics ("<12>") are notes at the written fret's pitch (their string/fret names a node to touch, not a
  fretted pitch). Parenthesised frets (ties or ghost notes, depending on the author) are skipped. In MIDI,
  dead and palm-muted notes are shorter and softer and bends are pitch bends, as in the Guitar Pro readers.

Rhythm: tab has none, so onsets come from column positions. Each bar is stretched so the file's median
bar width is one bar of the time signature the text states ("time sig: 3/8"; else 4/4): a bar about as wide
or wider lasts a whole number of bars (twice as wide: two bars' time), a narrower one whole beats; a short bar
before a full one is a pickup (at the start, or after a repeat) and ends on a bar line of the meter, so the
score's bar lines fall where the tab has them. Without bar lines one column is a 16th note. A note lasts until
the next onset, or, when '=' follow it (classtab's "note held": "0====", also across a bar line), until the
column after the last '='. Tempo is 120 unless the text says "tempo"/"bpm" (counted in the beat it names:
"120 bpm (eighth beats)" is 60 quarter notes a minute).
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import symusic

from guitarformer.errors import SkipFile
from guitarformer.music.guitar import GUITAR_PROGRAM, MAX_FRET, STANDARD_TUNING, TPQ, TUNINGS
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.readers.base import add_pitch_bends, bend_points, sounding, tab_text
from guitarformer.readers.limits import ReadLimits, too_much_text
from guitarformer.readers.tab_tuning import label_pitch, labelled_tuning, pitch_class, text_tuning

# A string's line: its label (optional: "e", "F#", "E4|", an octave only right before the bar line: "C2----" is a
# barre mark, not a string), then the line itself from a bar line, a dash or a bracket, or after a label from a
# repeat's dot ("E*||--14-") or, past a space, the fret its first column holds ("G 2---|--0-").
# Each whitespace run is taken whole, never given back ((?=(?P<w>\s*))(?P=w): an atomic group before Python 3.11): a
# match ends its runs anyway (what follows is never a blank), and three runs one after another, retried every way on
# a prose line that is no tab line, cost O(n^2) a line (reading classtab's 1,109 files took twice as long).
_LABEL = re.compile(r"^(?=(?P<w1>\s*))(?P=w1)(?P<label>[A-Ga-g](?:#|b|♯|♭)?(?:[0-8](?=\s*\|))?)?"
                    r"(?=(?P<w2>\s*))(?P=w2):?(?=(?P<w3>\s*))(?P=w3)"
                    r"(?=[|\-\[]|(?(label)(?:\*|(?<=\s)\d)|(?!)))")
# Notes in one text: the largest real tabs hold about 20,000; a 400,000-column staff of notes took 20 s and 700 MB.
MAX_TAB_NOTES = 100_000
_TAB_CHARS = set("-|0123456789=*o:~")  # "=" sustain, "*"/"o" repeat dots in classtab, "~" vibrato (let ring)
# "time sig: 3/8", "Time Signature - 6/8", "Time: 3/4" (the header guitarformer writes)
# ... or "2/4 time". The gap before the numbers is taken whole (as _LABEL's blanks): two runs retried every way.
_TIME_SIG = re.compile(r"\btime(?:[ -]*sig(?:nature)?\.?)?(?=(?P<gap>\s*[:=-]?\s*))(?P=gap)"
                       r"(?P<num>\d{1,2})\s*/\s*(?P<den>\d{1,2})\b"
                       r"|\b(?P<num2>\d{1,2})/(?P<den2>\d{1,2})\s+time\b", re.I)


def _is_tab_line(line: str) -> re.Match | None:
    m = _LABEL.match(line)
    if not m:
        return None
    body = line[m.end():].rstrip()
    if body.count("-") < 4:
        return None
    share = sum(ch in _TAB_CHARS for ch in body) / len(body)
    return m if share >= 0.6 else None


def _find_staves(lines: list[str]) -> list[tuple[int, list[str | None], list[str]]]:
    """(first line number, labels, bodies) for every run of consecutive tab lines."""
    staves, i = [], 0
    while i < len(lines):
        m = _is_tab_line(lines[i])
        if not m:
            i += 1
            continue
        start, labels, bodies = i, [], []
        while i < len(lines) and (m := _is_tab_line(lines[i])):
            labels.append(m.group("label"))
            bodies.append(lines[i][m.end():].rstrip())
            i += 1
        staves.append((start, labels, bodies))
    return staves


_ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4}
# "Gtr II", "guitar 2", "Git. 1", "Gtr #3": which guitar of an ensemble a line speaks of.
_PART_MARK = re.compile(r"\b(?:gtr|guitar|git|gt)\.?(?=(?P<gap>\s*#?\s*))(?P=gap)"  # the gap taken whole (as _LABEL's)
                        r"(?P<mark>iv|i{1,3}|[1-4])\b(?![.,]?\d)", re.I)
_ENSEMBLE = re.compile(r"\b(?:duet|duo|trio|quartet|(?:two|three|four|2|3|4)\s+guitars)\b", re.I)


def _marks(line: str) -> list[int]:
    marks = [m.group("mark") for m in _PART_MARK.finditer(line)]
    return [int(m) if m.isdigit() else _ROMAN[m.lower()] for m in marks]


def _assign_parts(lines: list[str], marks: list[list[int]], staves: list) -> tuple[list[int], list[int | None]]:
    """Which guitar (0, 1, ..) each staff belongs to (all 0 for a solo tab), and each guitar's "Gtr N" number
    where the text gives one. `marks`: each line's "Gtr N" numbers (none for tab lines).

    Only where the text names several guitars (two different "Gtr N" marks, or duet/trio/.. words). Then,
    if most staves sit in systems of the same size k >= 2 (staves with no blank line between them), the
    i-th staff of a system is guitar i (mod k). Otherwise a "Gtr N" mark in the text just above a staff
    starts that guitar's section; staves before any mark go with the first guitar."""
    n = len(staves)
    marked = {m for ms in marks for m in ms}
    if n < 2 or (len(marked) < 2 and not any(_ENSEMBLE.search(ln) for ln in lines)):
        return [0] * n, [None]
    systems: list[list[int]] = [[0]]
    for k in range(1, n):
        end, start = staves[k - 1][0] + len(staves[k - 1][1]), staves[k][0]
        if start - end <= 4 and all(ln.strip() for ln in lines[end:start]):
            systems[-1].append(k)
        else:
            systems.append([k])
    sizes: dict[int, int] = {}
    for sy in systems:
        sizes[len(sy)] = sizes.get(len(sy), 0) + 1
    k, count = max(sizes.items(), key=lambda kv: (kv[1] * kv[0], kv[0]))
    if k >= 2 and count >= 2 and k * count >= 0.6 * n:
        return [i % k for sy in systems for i in range(len(sy))], [v + 1 if v + 1 in marked else None for v in range(k)]
    if len(marked) < 2:
        return [0] * n, [None]
    out, current = [], None
    for k in range(n):
        end = staves[k - 1][0] + len(staves[k - 1][1]) if k else max(0, staves[0][0] - 6)
        found = [m for ms in marks[end:staves[k][0]] for m in ms]
        if found:
            current = found[-1]
        out.append(current)
    first = next((m for m in out if m is not None), 1)
    labels = sorted({m if m is not None else first for m in out})
    return [labels.index(m if m is not None else first) for m in out], labels


def _part_tuning(lines: list[str], marks: list[list[int]], part_mark: int, n: int) -> tuple[int, ...] | None:
    """A tuning given for one guitar of an ensemble: 'Guitar 1 tuning: DADGBE', 'Gtr I (E A D G B E)'."""
    for ln, ms in zip(lines, marks):
        if ms != [part_mark]:
            continue
        rest = ln[_PART_MARK.search(ln).end():]
        t = text_tuning(rest if re.search("tuning", rest, re.I) else "tuning " + rest, n)
        if t is not None:
            return t
    return None


def _held_until(body: str, j: int) -> int | None:
    """The column after a run of '=' (classtab's "note held") starting at column j, the run going on across a
    bar line ("0==|=="); None when no '=' follows."""
    k = j
    while k < len(body) and (body[k] == "=" or (body[k] == "|" and k > j and body[k - 1] == "=" and body[k + 1 : k + 2] == "=")):
        k += 1
    return k if k > j else None


def _fret_end(body: str, i: int) -> int:
    """The column after the fret that starts at column i. Two digits are one fret ("12") only when they stand
    alone (a dash, bar line or mark on both sides) and make a fret the guitar has; a longer run of digits is a run
    of one-digit frets written without dashes ("3232" on the high E is 3, 2, 3, 2, not 3, 23, 2)."""
    if i > 0 and body[i - 1].isdigit():  # inside a longer run: one digit at a time
        return i + 1
    run = i
    while run < len(body) and body[run].isdigit():
        run += 1
    if run - i == 2 and int(body[i:run]) <= MAX_FRET:
        return run
    return i + 1


def _parse_line(body: str) -> tuple[list[tuple[int, int, int | None]], list[int], dict[int, dict]]:
    """Notes (column, fret, held-until column or None), bar-line columns and the techniques of one tab line body's
    notes ({column: Technique fields}, for the notes that have any)."""
    notes, bars, marks = [], [], {}
    i, prev, depth, in_harmonic = 0, "", 0, False
    last = None  # column of the last note: the one a slide, bend or vibrato mark after it belongs to
    hammer = slide_in = ""  # marks before the next fret: h/p, or a slide from nowhere (/5, \5)
    bend: list[float] = []  # the last note's bend so far, in quarter tones: [0, b target, r target, ...]
    while i < len(body):
        ch = body[i]
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if ch == "|":
            bars.append(i)
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch in "<>":
            in_harmonic = ch == "<"
        elif ch.isdigit():
            j = _fret_end(body, i)
            fret = int(body[i:j])
            if prev in ("b", "r", "B", "R"):  # a bend's target or a release's: the bent note's pitch, not a note
                if last is not None and bend:
                    base = next(f for c, f, _ in reversed(notes) if c == last)
                    bend.append(max(0.0, 2.0 * (fret - base)))
                    marks.setdefault(last, {})["bend"] = bend_points(bend)
            elif depth == 0:
                notes.append((i, fret, _held_until(body, j)))
                found = marks.setdefault(i, {})
                if in_harmonic:
                    found["harmonic"] = "natural"
                if hammer:
                    found["hammer"] = True
                if slide_in:
                    found["slide_in"] = slide_in
                last, bend, hammer, slide_in = i, [], "", ""
            prev = "0"
            i = j
            continue
        elif ch in "hpHP" and nxt.isdigit():
            hammer = ch
        elif ch in "/\\" or (ch in "sS" and nxt.isdigit()):
            if prev == "0" and last is not None:  # 5/7, 5s7, 5/-7: a slide to the next fret; 5\--: off the note
                to_fret = re.match(r"[-|]{0,2}\d", body[i + 1 : i + 4]) is not None
                marks.setdefault(last, {})["slide_out"] = "legato" if to_fret else "down" if ch == "\\" else "up"
            elif nxt.isdigit() and ch in "/\\":  # -/7: into the note from below, -\7: from above
                slide_in = "below" if ch == "/" else "above"
        elif ch == "~" and prev in ("0", "~") and last is not None:
            marks.setdefault(last, {})["vibrato"] = True
        elif ch in "bB" and prev == "0" and last is not None:
            bend = bend or [0.0]
            if not nxt.isdigit():  # a bend without its target: a whole tone
                bend.append(4.0)
                marks.setdefault(last, {})["bend"] = bend_points(bend)
        elif ch in "rR" and prev == "0" and last is not None and bend and not nxt.isdigit():
            bend.append(0.0)  # a release without its target: back to the fretted pitch
            marks.setdefault(last, {})["bend"] = bend_points(bend)
        elif ch in "xX" and depth == 0 and prev in ("", "-", "|", "=") and nxt in ("", "-", "|", " "):
            notes.append((i, 0, None))  # a dead note: muted, no pitch (written at fret 0)
            marks[i] = {"dead": True}
            last, bend, hammer, slide_in = None, [], "", ""
        prev = ch
        i += 1
    return notes, bars, {c: found for c, found in marks.items() if found}


def read_ascii_tab(path) -> list[GuitarScore]:
    """One GuitarScore per guitar (its staves concatenated in time; one for a solo tab) with frets from the tab.

    Raises SkipFile for bass/mandolin/ukulele tab (4- or 5-line staves), chord sheets and other text
    without a 6- or 7-line tab staff; ReadLimitError for a text over ReadLimits.max_text_mb; ValueError for one
    holding more than MAX_TAB_NOTES notes.
    """
    path = Path(path)
    limits = ReadLimits.from_env()
    size = path.stat().st_size
    if limits.max_text_mb and size > limits.max_text_mb * (1 << 20):
        raise too_much_text(path.name, "the tab", size, limits)
    lines = tab_text(path.read_bytes()).replace("\t", "    ").splitlines()
    title = _title(lines, path.stem)
    sections = _version_sections(lines)
    if sections is None:
        return _read_lines(path, lines, title)
    out, skipped = [], None
    for k, sec in enumerate(sections):
        try:
            parts = _read_lines(path, sec, f"{title} (version {k + 1})")
        except SkipFile as e:  # a version given as a bass tab or as text only; the others still count
            skipped = skipped or e
            continue
        for gs in parts:
            gs.extra.update(version=k, versions=len(sections))
        out += parts
    if not out:
        raise skipped
    return out


# Several versions (arrangements) of a piece in one text, as classtab publishes them: a header listing
# "1st version - by ..., in Em" / "version 2 - ..." / "2 versions - ...", then each version's tab after a
# line of asterisks (the versions themselves are separated by two such lines).
_VERSION_LINE = re.compile(r"^(?=(?P<lead>\s*-?\s*))(?P=lead)"  # the lead taken whole, as _LABEL's blanks
                           r"(?:(?P<nth>\d)(?:st|nd|rd|th)\s+version|version\s+(?P<num>\d)(?![.\d])"
                           r"|(?P<count>\d)\s+versions\b)", re.I)  # not "Version 2.0" (a revision)
_STARS = re.compile(r"^\s*\*{20,}\s*$")


def _version_sections(lines: list[str]) -> list[list[str]] | None:
    """Each version's lines, or None for a text holding one version.

    Cut at the asterisk lines after the header's version list: at every one if that leaves as many stretches
    with a tab staff as the header lists versions, else at the doubled ones (two consecutive lines) if that leaves
    at least two. Each version's text is its own header line first (so "2nd version - drop D tuning, capo 2" is
    version 2's tuning and capo, not version 1's), then its stretch, then the shared header before the first
    stretch (a tuning or capo it names applies to every version), the versions' header lines blanked. Versions
    are numbered by stretch: a version without a tab staff (given as a picture or a link) is not counted, and
    then no header line is given to any of them."""
    found = [(i, m) for i, ln in enumerate(lines[:30]) if (m := _VERSION_LINE.match(ln))]
    if not found:
        return None
    count = max(int(m.group("nth") or m.group("num") or m.group("count")) for _, m in found)
    if count < 2:
        return None
    header = {i for i, _ in found}
    own = {int(m.group("nth") or m.group("num")): lines[i] for i, m in found if not m.group("count")}
    groups: list[list[int]] = []
    for i, ln in enumerate(lines):
        if i > max(header) and _STARS.match(ln):
            if groups and i - groups[-1][-1] == 1:
                groups[-1].append(i)
            else:
                groups.append([i])

    def stretches(cuts: list[int]) -> list[tuple[int, int]]:
        edges = [0, *cuts, len(lines)]
        return [(a, b) for a, b in zip(edges, edges[1:])
                if any(len(s[1]) in (6, 7) for s in _find_staves(lines[a:b]))]

    every, doubled = stretches([g[0] for g in groups]), stretches([g[0] for g in groups if len(g) >= 2])
    found_cuts = every if len(every) == count else doubled
    if len(found_cuts) < 2:
        return None
    mapped = len(found_cuts) == count
    # The shared header: the text up to the first asterisks, unless version 1's tab is already in it.
    head = range(groups[0][0]) if not any(len(st[1]) in (6, 7) for st in _find_staves(lines[: groups[0][0]])) else range(0)
    shared = ["" if i in header else lines[i] for i in head]
    return [[own.get(k + 1, "") if mapped else ""] + ["" if i in header else lines[i] for i in range(a, b)] + shared
            for k, (a, b) in enumerate(found_cuts)]


def _parse_staves(path: Path, lines: list[str], guitar: list) -> tuple[list, float | None]:
    """Per staff: notes (col, line index 0 = highest string, fret, held-until), bar segments (from the bar lines
    most of the staff's lines agree on) and techniques; and the median bar width (None without bar lines)."""
    parsed = []
    widths = []
    total = 0
    for start, _, bodies in guitar:
        notes, bar_sets, techniques = [], [], {}
        muted = _palm_muted(lines, start)
        for li, body in enumerate(bodies):
            ns, bs, found = _parse_line(body)
            notes += [(c, li, f, end) for c, f, end in ns]
            for c, _, _ in ns:
                fields = {**found.get(c, {}), **({"palm_mute": True} if c in muted else {})}
                if fields:
                    techniques[(c, li)] = Technique(**fields)
            bar_sets.append(tuple(bs))
        total += len(notes)
        if total > MAX_TAB_NOTES:
            raise ValueError(f"{path.name}: more than {MAX_TAB_NOTES:,} notes in one tab (the largest real tabs "
                             "hold about 20,000): not read")
        bars = sorted(set(statistics.mode(bar_sets))) if bar_sets else []
        width = max(len(b) for b in bodies)
        cuts = sorted(set([c for c in bars if 0 < c < width - 1]))
        end = bars[-1] if bars and bars[-1] >= width - 2 else width  # closing bar line (or '||')
        cuts = [c for c in cuts if c < end]
        edges = [0] + cuts + [end]
        note_cols = {c for c, _, _, _ in notes}
        segs = []
        for a, b in zip(edges, edges[1:]):
            a += a in bars  # content starts after the bar line...
            a += a not in note_cols and a < b  # ...and after the customary leading dash
            if b > a:
                segs.append((a, b))
        widths += [b - a for a, b in segs if cuts]
        parsed.append((notes, segs, techniques))
    typical = statistics.median(widths) if widths else None
    return parsed, typical


def _read_lines(path: Path, lines: list[str], title: str) -> list[GuitarScore]:
    """read_ascii_tab's work on a text's lines: the whole file, or one version of a multi-version one."""
    text = "\n".join(lines)
    staves = _find_staves(lines)
    guitar = [s for s in staves if len(s[1]) in (6, 7)]
    if not guitar:
        sizes = sorted({len(s[1]) for s in staves})
        if any(k in (4, 5) for k in sizes):
            raise SkipFile(f"{len(staves)} tab staves with {sizes} lines: bass/mandolin/ukulele tab, not six-string guitar")
        raise SkipFile("no 6- or 7-line tab staff (chord sheet or plain text)")
    n = statistics.mode(len(s[1]) for s in guitar)
    guitar = [s for s in guitar if len(s[1]) == n]

    marks = [[] if _is_tab_line(ln) else _marks(ln) for ln in lines]
    voices, part_marks = _assign_parts(lines, marks, guitar)
    # A tuning line that names one guitar of an ensemble ("Guitar 2 tuning: ...") is that guitar's alone.
    stated = text_tuning(text if len(part_marks) == 1 else "\n".join(ln for ln, ms in zip(lines, marks) if not ms), n)
    m = re.search(r"\bcapo\b\D{0,12}(\d{1,2})", text, re.I)
    capo = int(m.group(1)) if m and int(m.group(1)) <= 12 else 0
    qpm = _text_tempo(text)
    m = _TIME_SIG.search(text)
    sig = [int(m.group("num") or m.group("num2")), int(m.group("den") or m.group("den2"))] if m else []
    meter = (sig[0], sig[1]) if sig and 1 <= sig[0] <= 16 and sig[1] in (2, 4, 8) else (4, 4)

    parsed, typical = _parse_staves(path, lines, guitar)

    out = []
    for v, mark in enumerate(part_marks):
        mine = [k for k, x in enumerate(voices) if x == v]
        # Tuning: labels of the part's first fully labelled staff, else the part's own tuning line, else the
        # text, else standard.
        tuning = None
        for k in mine:
            if all(guitar[k][1]):
                exact = [label_pitch(x) for x in guitar[k][1][::-1]]
                tuning = (tuple(exact) if None not in exact and exact == sorted(exact)
                          else labelled_tuning([pitch_class(x) for x in guitar[k][1][::-1]], stated))
                break
        if tuning is None and mark is not None and len(part_marks) > 1:
            tuning = _part_tuning(lines, marks, mark, n)
        if tuning is None:
            tuning = stated or (TUNINGS["seven-string"] if n == 7 else STANDARD_TUNING)
        gs = _part_score(path, [parsed[k] for k in mine], typical, tuning, capo, qpm, n, meter)
        if gs is None:
            continue
        gs.name = title if len(part_marks) == 1 else f"{title} (guitar {mark or v + 1})"[:96]
        gs.extra.update(staves=len(mine), part=v, parts=len(part_marks))
        out.append(gs)
    if not out:
        raise SkipFile("tab staves hold no fret numbers")
    return out


# Beats a text's tempo may count, in quarter notes: "120 bpm (eighth beats)" is 60 quarter notes a minute.
_BEAT = re.compile(r"dotted quarter|dotted half|dotted eighth|eighth|quarter|half", re.I)
_BEAT_QUARTERS = {"dotted quarter": 1.5, "dotted half": 3.0, "dotted eighth": 0.75, "eighth": 0.5, "quarter": 1.0,
                  "half": 2.0}


def _text_tempo(text: str) -> float:
    """Quarter notes per minute from "tempo: 100", "bpm 90", "♩=72" or "120 bpm", counted in the beat the text
    names next to it ("120 bpm (eighth beats)", "tempo: (eighth note) 150 bpm"); 120 when it says none."""
    m = re.search(r"(?:tempo|bpm|♩\s*=)\D{0,6}(\d{2,3})", text, re.I) or re.search(r"(\d{2,3})\s*bpm", text, re.I)
    if not m or not 30 <= int(m.group(1)) <= 300:
        return 120.0
    beat = _BEAT.search(text[m.end():m.end() + 30]) or _BEAT.search(text[max(0, m.start() - 20):m.start()])
    return float(m.group(1)) * (_BEAT_QUARTERS[beat.group(0).lower()] if beat else 1.0)


def _title(lines: list[str], fallback: str) -> str:
    """A 'Title: ...' line, else the first line with words that is not a '#' banner or a tab line, else `fallback`."""
    for ln in lines:
        m = re.match(r"\s*title\s*[:=]\s*(\S.*)", ln, re.I)
        if m:
            return m.group(1).strip()[:80]
    for ln in lines:
        t = ln.strip()
        if t and not t.startswith("#") and sum(c.isalpha() for c in t) >= 3 and not _is_tab_line(ln):
            return t.strip("|*=~-_ \t")[:80]
    return fallback


def _part_score(path: Path, parsed, typical, tuning, capo: int, qpm: float, n: int,
                meter: tuple[int, int] = (4, 4)) -> GuitarScore | None:
    """One guitar's staves (parsed notes and bar segments), concatenated in time, as a GuitarScore; None if
    they hold no note. The median bar is one bar of `meter`."""
    events = []  # (tick, string number, fret, technique, tick its '=' hold ends or None)
    num, den = meter
    unit = TPQ * 4 // den  # bar lengths are whole beats of the meter
    full = num * unit

    def bar_length(w: int) -> float:
        if not typical:
            return w * TPQ / 4
        if num * w / typical >= num - 0.5:  # one bar (or several), however wide its notes made it
            return full * max(1, round(w / typical))
        return max(unit, round(num * w / typical) * unit)  # a short bar, in whole beats

    lengths = [bar_length(b - a) for _, segs, _ in parsed for a, b in segs]
    # Where each bar starts. A short bar followed by a full one is a pickup (at the start, or after a repeat): it
    # ends on a bar line of the meter; the bar before it, where that one was read too long, ends where it begins.
    starts, t = [], 0
    for i, length in enumerate(lengths):
        if typical and length < full and i + 1 < len(lengths) and lengths[i + 1] >= full:
            if i == 0:
                t = full - length
            else:
                end = max(starts[-1] + unit + length, round((t + length) / full) * full)
                if end - length < t:
                    lengths[i - 1] = end - length - starts[-1]
                t = end - length
        starts.append(t)
        t += length
    k = 0
    for notes, segs, techniques in parsed:
        notes.sort()
        placed = []  # (first column, last column, first tick, ticks per column) of each bar segment
        for a, b in segs:
            placed.append((a, b, starts[k], lengths[k] / (b - a)))
            k += 1
        staff_end = round(placed[-1][2] + lengths[k - 1]) if placed else 0

        def tick(c: int) -> int:  # a column's tick; a bar line's is the next bar's first
            for a, b, start, tpc in placed:
                if c < b:
                    return round(start + max(0, c - a) * tpc)
            return staff_end

        for c, li, f, end in notes:
            if any(a <= c < b for a, b, _, _ in placed):
                events.append((tick(c), li + 1, f, techniques.get((c, li), PLAIN), None if end is None else tick(end)))
    if not events:
        return None
    # One note per string per onset (a stray digit under another one is noise).
    uniq = {}
    for t, s, f, h, e in events:
        uniq.setdefault((t, s), (f, h, e))
    events = [(t, s, f, h, e) for (t, s), (f, h, e) in sorted(uniq.items(), key=lambda kv: kv[0])]
    onsets = sorted({t for t, _, _, _, _ in events})
    nxt = {t: u for t, u in zip(onsets, onsets[1:] + [onsets[-1] + TPQ])}

    score = symusic.Score(TPQ)
    score.tempos.append(symusic.Tempo(0, qpm))
    score.time_signatures.append(symusic.TimeSignature(0, num, den))
    track = symusic.Track(path.stem, GUITAR_PROGRAM, False)
    frets, techniques, bent = [], [], []
    for t, s, f, tech, e in events:
        pitch = tuning[n - s] + capo + f
        duration, velocity = sounding(max(1, (nxt[t] if e is None else e) - t), 80, tech)
        track.notes.append(symusic.Note(t, duration, pitch, velocity))
        frets.append((s, f))
        techniques.append(tech)
        if tech.bend:
            bent.append((t, duration, tech.bend))
    add_pitch_bends(track, bent)
    score.tracks.append(track)
    return GuitarScore(score, tuning=tuning, capo=capo, frets=frets, techniques=techniques, name="",
                       source_format="ascii_tab", extra={"path": str(path)})


# "PM----|", "P.M. - - -": a palm-mute line above a staff, over the columns it spans.
_PALM_MUTE = re.compile(r"P\.?M\.?(?:[-_.|]|\s+(?=[-_.|]))*")


def _palm_muted(lines: list[str], start: int) -> set[int]:
    """Body columns of the staff starting at line `start` that a palm-mute line right above it spans."""
    above = lines[start - 1] if start > 0 else ""
    if not above.strip() or _PALM_MUTE.search(above) is None or re.search(r"[a-zA-Z]{3,}", above):
        return set()  # no mark, or a line of words ("PM = palm muting") rather than a mark over the staff
    offset = _is_tab_line(lines[start]).end()  # the staff's bodies start after its labels
    return {c - offset for m in _PALM_MUTE.finditer(above) for c in range(m.start(), m.end())}
