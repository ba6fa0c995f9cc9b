"""A song of parts as one token stream and back (the layout: vocab/parts.py).

`encode_song` tokenizes each part alone (a stringed part as tab tokens, the kit as drum hits), cuts each part's
tokens at its Bar tokens and lays the bars out one after the other, each part's bar after its part token.
`split_song` cuts a band stream back into one single-part stream per role (every part gets every Bar, so all parts
are as long in bars as the song), and `decode_song` decodes those into parts: a stringed part with the strings its
tokens name in its tuning, the kit as a drum part.
"""

from __future__ import annotations

from collections.abc import Sequence

import miditok
import numpy as np
import symusic

from guitarformer.vocab.parts import DRUM, PART, band_roles, drum_token, part_token
from guitarformer.vocab.tab_tokens import has_controls, insert_controls
from guitarformer.vocab.tokenization import decode_guitar, encode, special_ids
from guitarformer.errors import GuitarformerError
from guitarformer.music.drums import drum_part
from guitarformer.music.guitar import BASS_TUNING, GUITAR_PROGRAM, STANDARD_TUNING
from guitarformer.music.score import GuitarScore

BAR = "Bar_None"
HIT_TICKS_PER_QUARTER = 8  # a drum hit decodes as a 32nd note (a hit has no length in the tokens)
DEFAULT_TUNINGS = {"guitar": (STANDARD_TUNING, 0), "bass": (BASS_TUNING, 0)}
PROGRAMS = {"guitar": GUITAR_PROGRAM, "bass": 33}  # General MIDI Electric Bass (finger), 0-based


def check_band(tok: miditok.MusicTokenizer) -> list[str]:
    """The tokenizer's band roles; a GuitarformerError for a single-part tokenizer."""
    roles = band_roles(tok)
    if not roles:
        raise GuitarformerError("this run's tokens carry one part", "train on a dataset prepared with "
                                "--set data.parts=guitar,bass,drums to write a band")
    return roles


def _drum_ids(tok: miditok.MusicTokenizer, gs: GuitarScore) -> list[int]:
    """A drum part's tokens: the tab tokens of its hits as a plain part, each note (Pitch [Velocity] Duration
    [String]) written as its one Drum token."""
    score = symusic.Score(gs.score.ticks_per_quarter)
    score.tempos = gs.score.tempos.copy()
    score.time_signatures = gs.score.time_signatures.copy()
    track = symusic.Track("drums", 0, False)
    for n in gs.track.notes:
        track.notes.append(symusic.Note(n.time, max(1, n.duration), n.pitch, n.velocity))
    score.tracks.append(track)
    seq = tok.encode(score)  # a bare Score: each hit a plain note, on no string of its own
    seq = seq[0] if isinstance(seq, list) else seq
    toks = [tok[int(i)] for i in (seq.ids if seq is not None else [])]
    out: list[int] = []
    for t in toks:
        kind = t.split("_")[0]
        if kind == "Pitch":
            key = drum_token(int(t.split("_")[1]))
            if key in tok.vocab:
                out.append(tok.vocab[key])
        elif kind not in ("Velocity", "Duration", "String", "Bend", "Tech"):
            out.append(tok.vocab[t])
    return out


def bars_of(tok: miditok.MusicTokenizer, ids: Sequence[int]) -> tuple[list[int], list[list[int]]]:
    """(the ids before the first Bar, each bar's ids after its Bar token)."""
    bar = tok.vocab[BAR]
    head: list[int] = []
    bars: list[list[int]] = []
    for i in ids:
        if i == bar:
            bars.append([])
        elif bars:
            bars[-1].append(int(i))
        else:
            head.append(int(i))
    return head, bars


def part_ids(tok: miditok.MusicTokenizer, role: str, gs: GuitarScore, style: str | None = None,
             key: str | None = None) -> list[int]:
    """One part's tokens without BOS and EOS: the kit's hits; a guitar's tab tokens with its piece and bar controls
    (a tokenizer with controls); a bass's tab tokens, without controls (they describe the guitar)."""
    if role == "drums":
        return _drum_ids(tok, gs)
    ids = encode(tok, gs, bos_eos=False)
    if role == "guitar" and has_controls(tok):
        ids = insert_controls(tok, ids, gs, style, key)
    return ids


def encode_song(tok: miditok.MusicTokenizer, parts: Sequence[tuple[str, GuitarScore]], style: str | None = None,
                key: str | None = None) -> list[int]:
    """BOS, the guitar's piece controls, then bar by bar each part's bar after its part token (in the order of
    `parts`, (role, part) pairs, one per role), EOS. Stringed parts need their frets (`fingering`)."""
    roles = check_band(tok)
    heads, bars = [], []
    for k, (role, gs) in enumerate(parts):
        if role not in roles:
            raise GuitarformerError(f"this run's band has no {role} part", f"use parts among {', '.join(roles)}")
        head, bar_ids = bars_of(tok, part_ids(tok, role, gs, style, key))
        heads.append(head if role == "guitar" else [])
        bars.append(bar_ids if k == 0 else [_without_meter(tok, b) for b in bar_ids])
    sp = special_ids(tok)
    out = [sp["bos"], *(i for head in heads for i in head)]
    for b in range(max((len(x) for x in bars), default=0)):
        out.append(tok.vocab[BAR])
        for (role, _), bar_ids in zip(parts, bars):
            out.append(tok.vocab[part_token(role)])
            out += bar_ids[b] if b < len(bar_ids) else []
    return out + [sp["eos"]]


def _without_meter(tok: miditok.MusicTokenizer, bar: list[int]) -> list[int]:
    """A bar's ids without TimeSig and Tempo tokens (the first part of a bar carries them for all), and without a
    Position left holding nothing."""
    toks = [tok[i] for i in bar]
    kept = [j for j, t in enumerate(toks) if not t.startswith(("TimeSig_", "Tempo_"))]
    out = []
    for n, j in enumerate(kept):
        nxt = toks[kept[n + 1]] if n + 1 < len(kept) else "Bar_None"
        if toks[j].startswith("Position_") and nxt.startswith(("Position_", "Bar_", PART + "_")):
            continue
        out.append(bar[j])
    return out


def split_song(tok: miditok.MusicTokenizer, ids: Sequence[int], every_role: bool = False) -> dict[str, list[int]]:
    """Each role's single-part ids (BOS ... EOS) from a band stream: the ids before the first Bar go to the guitar
    (its piece controls), every Bar to every part, each part's bar ids to its part. A role the stream never names
    is absent (`every_role`: present all the same); one named in some bars gets every Bar all the same (its silent
    bars empty). A bar's TimeSig (written in its first part only) goes to every part; Tempo tokens stay with that
    first part (`decode_song` gives its tempos to all)."""
    roles = check_band(tok)
    sp = special_ids(tok)
    streams: dict[str, list[int]] = {r: [sp["bos"]] for r in roles}
    named: set[str] = set()
    now: str | None = None
    for i in ids:
        t = tok[int(i)]
        if int(i) in (sp["bos"], sp["eos"], sp["pad"]):
            continue
        if t == BAR:
            now = None
            for s in streams.values():
                s.append(int(i))
        elif t.startswith(PART + "_"):
            now = t.split("_", 1)[1]
            named.add(now)
        elif t.startswith("TimeSig_") and now is not None:
            for s in streams.values():
                s.append(int(i))
        elif now is None:  # before the first Part: the piece controls (or a stray token), the guitar's
            streams["guitar" if "guitar" in streams else roles[0]].append(int(i))
        elif now in streams:
            streams[now].append(int(i))
    return {r: s + [sp["eos"]] for r, s in streams.items() if r in named or every_role}


def decode_drums(tok: miditok.MusicTokenizer, ids: Sequence[int]) -> GuitarScore:
    """A drum part from its single-part ids: each Drum token a hit of a 32nd at its Position."""
    # what follows each hit's Pitch as a note's tokens: a loud Velocity where the tokens have them, a short Duration
    after = [*([tok.vocab[_loud(tok)]] if tok.config.use_velocities else []), tok.vocab[_hit_duration(tok)]]
    plain: list[int] = []
    for i in ids:
        t = tok[int(i)]
        if t.startswith(DRUM + "_"):
            plain += [tok.vocab[f"Pitch_{t.split('_')[1]}"], *after]
        else:
            plain.append(int(i))
    score = decode_guitar(tok, plain, STANDARD_TUNING).score
    hits = [(n.time, n.duration, n.pitch, n.velocity) for n in score.tracks[0].notes] if score.tracks else []
    base = symusic.Score(score.ticks_per_quarter)
    base.tempos = score.tempos.copy()
    base.time_signatures = score.time_signatures.copy()
    return drum_part(hits, base, "Drums", "generated")


def _hit_duration(tok: miditok.MusicTokenizer) -> str:
    """The Duration token of a HIT_TICKS_PER_QUARTER note at the finest beat resolution (else the first Duration)."""
    durations = [t for t in tok.vocab if t.startswith("Duration_")]
    res = max(int(t.split(".")[-1]) for t in durations)
    want = f"Duration_0.{max(1, res // HIT_TICKS_PER_QUARTER)}.{res}"
    return want if want in tok.vocab else durations[0]


def _loud(tok: miditok.MusicTokenizer) -> str:
    velocities = sorted((int(t.split("_")[1]) for t in tok.vocab if t.startswith("Velocity_")))
    return f"Velocity_{velocities[int(np.searchsorted(velocities, 100)) if velocities[-1] >= 100 else -1]}"


def decode_song(tok: miditok.MusicTokenizer, ids: Sequence[int],
                tunings: dict[str, tuple[tuple[int, ...], int]] | None = None,
                tempo: float | None = None) -> list[tuple[str, GuitarScore]]:
    """(role, part) for each part a band stream names, in vocabulary order: stringed parts with their strings in
    `tunings` (role -> (tuning, capo); standard guitar and 4-string bass by default), the kit as a drum part."""
    tunings = {**DEFAULT_TUNINGS, **(tunings or {})}
    out = []
    for role, sub in split_song(tok, ids).items():
        if role == "drums":
            gs = decode_drums(tok, sub)
        else:
            tuning, capo = tunings[role]
            gs = decode_guitar(tok, sub, tuning, capo, program=PROGRAMS[role], tempo=tempo, name=role.title())
        gs.extra["role"] = role
        out.append((role, gs))
    tempos = max((gs.score.tempos for _, gs in out), key=len, default=None)
    for _, gs in out:  # the Tempo tokens are in one part's stream: every part plays at the song's tempo
        gs.score.tempos = tempos.copy()
    return out
