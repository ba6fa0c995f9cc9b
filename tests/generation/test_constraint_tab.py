"""The sampler's guitar rules for tab tokens: one note per string at a time, by the string's name; a hammer-on only
from an earlier note on its string; no EOS in the middle of a note; a batch masks each row as it would alone.

Each rule is checked with both tab layouts: 2 (a String on every note) and 3 (a String only where a note leaves its
lowest-fret string; a note whose Duration is followed by anything else is on that string)."""

from __future__ import annotations

import itertools

import miditok
import pytest
import torch

from guitarformer.config import DataConfig, ModelConfig
from guitarformer.vocab.tab_tokens import implied_strings, lowest_fret_string
from guitarformer.vocab.tokenization import (
    bar_ids,
    build_tokenizer,
    decode_guitar,
    special_ids,
)
from guitarformer.generation.constraint.guitar import Asked, GuitarConstraint
from guitarformer.generation.constraint.repeats import END
from guitarformer.generation.decode.engine import StopTokens, generate
from guitarformer.generation.constraint.guards import GuardSpec
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.generation.constraint.strings import HAND_SPAN
from guitarformer.models import build_model
from guitarformer.music.guitar import MAX_FRET, STANDARD_TUNING, TUNINGS
from guitarformer.music.score import UNPLAYABLE


@pytest.fixture(scope="module", params=[3, 2], ids=["layout3", "layout2"])
def tok(request):
    return build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=request.param))


@pytest.fixture(scope="module")
def tok3():
    return build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=3))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def note(tok, pitch: int, duration: str, string: int, *tech: str, tuning=STANDARD_TUNING) -> list[str]:
    """A note's tokens as the tokenizer writes them: layout 3 leaves out the String of the lowest-fret string."""
    implied = implied_strings(tok) and string == lowest_fret_string(tuning, 0, pitch)
    return [f"Pitch_{pitch}", f"Duration_{duration}", *([] if implied else [f"String_{string}"]), *tech]


def mask_after(tok, tokens: list[str], tuning=STANDARD_TUNING, **kw) -> torch.Tensor:
    """The mask for the token after `tokens` (a piece in 4/4 from its first Bar)."""
    ids = [tok[t] for t in ["BOS_None", "Bar_None", "TimeSig_4/4", *tokens]]
    c = GuitarConstraint(tok, tuning, **kw)
    c.start(torch.tensor([ids]))
    return c.mask(torch.tensor([ids[-1]]))[0]


def allowed(tok, m: torch.Tensor, *names: str) -> list[bool]:
    return [bool(m[tok[n]]) for n in names]


def strings_after(tok, m: torch.Tensor, pitch: int, tuning=STANDARD_TUNING) -> set[int]:
    """The strings the note whose Duration came last may take: those whose String token is allowed, and with layout 3
    its lowest-fret string where the note may end without a String (Bend_1 stands for those tokens). The lowest
    string's own String token is never allowed there: one spelling per fingering."""
    got = {s for s in range(1, 9) if m[tok[f"String_{s}"]]}
    if implied_strings(tok):
        low = lowest_fret_string(tuning, 0, pitch)
        assert low not in got, (pitch, got)
        if m[tok["Bend_1"]]:
            got.add(low)
    return got


def test_a_string_still_ringing_takes_no_second_note(tok):
    """A2 rings on the A string for two beats (layout 3: its lowest-fret string, no String token); one beat in, D3
    (A string fret 5, D string open, low E fret 10) may go on the D or low E string but not the busy A string; once
    A2 has ended, the A string again."""
    ringing = ["Position_0", *note(tok, 45, "2.0.8", 5), "Position_8", "Pitch_50", "Duration_1.0.8"]
    assert strings_after(tok, mask_after(tok, ringing), 50) == {4, 6}  # not 1-3 either: they cannot play D3
    ended = ["Position_0", *note(tok, 45, "1.0.8", 5), "Position_8", "Pitch_50", "Duration_1.0.8"]
    assert strings_after(tok, mask_after(tok, ended), 50) == {4, 5, 6}


def test_a_pitch_needs_a_free_string_by_name(tok):
    """A2 played on the low E string (fret 5) holds that string: E2, which only the low E string plays, cannot
    start, though with A2 moved to the A string two notes would fit (what counting strings alone allows)."""
    low_a = ["Position_0", *note(tok, 45, "2.0.8", 6), "Position_8"]
    assert allowed(tok, mask_after(tok, low_a), "Pitch_40", "Pitch_41", "Pitch_52") == [False, False, True]
    a_string = ["Position_0", *note(tok, 45, "2.0.8", 5), "Position_8"]
    assert allowed(tok, mask_after(tok, a_string), "Pitch_40", "Pitch_41") == [True, True]


def test_hammer_on_only_from_an_earlier_note_on_the_string(tok):
    first = ["Position_0", *note(tok, 57, "0.4.8", 3)]  # nothing before it on the G string (its lowest-fret string)
    assert allowed(tok, mask_after(tok, first), "Tech_Hammer", "Tech_Vibrato", "Bend_2") == [False, True, True]
    legato = first + ["Position_4", *note(tok, 59, "0.4.8", 3)]  # G string fret 2 -> 4, right after
    assert allowed(tok, mask_after(tok, legato), "Tech_Hammer") == [True]
    assert allowed(tok, mask_after(tok, legato + ["Tech_SlideInBelow"]), "Tech_Hammer") == [True]
    other_string = first + ["Position_4", *note(tok, 64, "0.4.8", 2)]  # the B string was never played
    assert allowed(tok, mask_after(tok, other_string), "Tech_Hammer") == [False]
    long_after = first + ["Position_24", *note(tok, 59, "0.4.8", 3)]  # the G string fell silent 2.5 beats earlier
    assert allowed(tok, mask_after(tok, long_after), "Tech_Hammer") == [False]


def test_hammer_on_to_a_note_on_its_lowest_fret_string(tok):
    """Open G then G string fret 2: both on their lowest-fret string (layout 3 writes no String for either), so the
    hammer is judged on the G string right after the second note's Duration, and after a Bend that follows it. From
    the open B string (its own lowest-fret string) the G string has nothing before it."""
    legato = ["Position_0", *note(tok, 55, "0.4.8", 3), "Position_4", *note(tok, 57, "0.4.8", 3)]
    assert allowed(tok, mask_after(tok, legato), "Tech_Hammer") == [True]
    assert allowed(tok, mask_after(tok, legato + ["Bend_2"]), "Tech_Hammer") == [True]
    from_b = ["Position_0", *note(tok, 59, "0.4.8", 2), "Position_4", *note(tok, 57, "0.4.8", 3)]
    assert allowed(tok, mask_after(tok, from_b), "Tech_Hammer") == [False]
    assert allowed(tok, mask_after(tok, from_b + ["Tech_Vibrato"]), "Tech_Hammer") == [False]


def test_a_bend_only_after_a_whole_note(tok):
    """Layout 2: a note is whole after its String; layout 3: after its Duration already (on its lowest-fret string)."""
    assert not mask_after(tok, ["Position_0", "Pitch_57"])[tok["Bend_2"]]
    assert not mask_after(tok, ["Position_0"])[tok["Bend_2"]]
    assert mask_after(tok, ["Position_0", "Pitch_57", "Duration_0.4.8"])[tok["Bend_2"]] == implied_strings(tok)
    assert mask_after(tok, ["Position_0", *note(tok, 57, "0.4.8", 3)])[tok["Bend_2"]]
    assert mask_after(tok, ["Position_0", *note(tok, 57, "0.4.8", 4)])[tok["Bend_2"]]


def test_the_lowest_fret_string_is_written_by_leaving_the_string_out(tok3):
    """Layout 3: after E3's Duration String_4 (its lowest-fret string, the D string, fret 2) never comes; the tokens
    that end the note without a String (a Bend, a Tech, the next Pitch or Position, the end) come only while the D
    string is free. Open D ringing there for two beats: E3 one beat in goes on the A or low E string by name."""
    tok = tok3
    ends = ["Bend_1", "Tech_Vibrato", "Pitch_67", "Position_16", "EOS_None"]
    ringing = ["Position_0", *note(tok, 50, "2.0.8", 4), "Position_8", "Pitch_52", "Duration_1.0.8"]
    m = mask_after(tok, ringing)
    assert allowed(tok, m, "String_4", "String_5", "String_6") == [False, True, True]
    assert not any(allowed(tok, m, *ends))
    ended = ["Position_0", *note(tok, 50, "1.0.8", 4), "Position_8", "Pitch_52", "Duration_1.0.8"]
    m = mask_after(tok, ended)
    assert allowed(tok, m, "String_4", "String_5", "String_6") == [False, True, True]
    assert all(allowed(tok, m, *ends))
    lone = mask_after(tok, ["Position_0", "Pitch_40", "Duration_1.0.8"])  # E2: the low E string alone plays it
    assert not any(lone[tok[f"String_{s}"]] for s in range(1, 9)) and lone[tok["Bend_1"]]


def test_a_note_without_a_string_holds_its_lowest_fret_string(tok):
    """F2 (the low E string only) struck: E2 cannot join it (no string left for it), whether the next token is the
    Pitch right after F2's Duration (layout 3: F2 is on the low E string once that Pitch comes) or one after a
    Position; A2 can (the A string); and nothing new goes on the low E string while F2 rings."""
    chord = ["Position_0", *note(tok, 41, "2.0.8", 6)]
    assert allowed(tok, mask_after(tok, chord), "Pitch_40", "Pitch_45") == [False, True]
    later = chord + ["Position_8"]
    assert allowed(tok, mask_after(tok, later), "Pitch_40", "Pitch_45") == [False, True]
    assert strings_after(tok, mask_after(tok, later + ["Pitch_45", "Duration_1.0.8"]), 45) == {5}
    # The state as the next token leaves it: A2 after F2 on the A string, D3 one beat later on the D string only.
    both = chord + [*note(tok, 45, "2.0.8", 5), "Position_8", "Pitch_50", "Duration_1.0.8"]
    assert strings_after(tok, mask_after(tok, both), 50) == {4}


def test_a_hand_span_counts_a_note_without_a_string(tok):
    """G2 on the low E string, fret 3 (its lowest fret), rings: a note struck with it fits one hand (frets 3 + 5 at
    most, open strings aside): B3 goes on the G string (fret 4) or the open B, not the D string (fret 9)."""
    m = mask_after(tok, ["Position_0", *note(tok, 43, "2.0.8", 6), "Pitch_59", "Duration_1.0.8"])
    assert strings_after(tok, m, 59) == {2, 3}


@pytest.mark.parametrize("name,layout", [("REMI", 3), ("TabREMI", 2), ("TabREMI", 3)])
def test_no_eos_in_the_middle_of_a_note(name, layout):
    """EOS after a Pitch or its Velocity would drop that note (a random model wrote `Bar TimeSig_3/2 Pitch_76
    EOS`); after a whole note it may come: for tab layout 2 after its String, for layout 3 after its Duration where
    it is on its lowest-fret string (E5: the high E string, fret 12). (TabREMI on data without dynamics has no
    Velocity.)"""
    t = build_tokenizer(DataConfig(tokenizer=name, tab_layout=layout))
    whole = {"REMI": ["Pitch_76", "Velocity_63", "Duration_1.0.8"], "TabREMI": note(t, 76, "1.0.8", 1)}[name]
    if name == "TabREMI":
        assert len(whole) == (3 if layout == 2 else 2)
    head = ["Position_0", *whole, "Position_8"]
    for k in range(1, len(whole)):
        assert not mask_after(t, head + whole[:k])[t["EOS_None"]], whole[:k]
    assert mask_after(t, head + whole)[t["EOS_None"]]


def test_a_dead_end_ends(tok):
    """A note forced where no string may take it (the prompt's F2 while E2 rings on the low E string, the only one
    that plays either): no String, and (layout 3) no token that would leave F2 on that string either; the row may
    only end, as every dead end of the constraint does."""
    m = mask_after(tok, ["Position_0", *note(tok, 40, "2.0.8", 6), "Position_8", "Pitch_41", "Duration_1.0.8"])
    assert m.nonzero().squeeze(1).tolist() == [tok["EOS_None"]]


def random_model(tok, block_size: int = 200):
    torch.manual_seed(1)
    return build_model(ModelConfig(prev_token=False, copy=False,
                                   vocab_size=len(tok), block_size=block_size, n_layer=1, n_head=2, n_embd=32,
                                   dropout=0.0)).eval()


def check_tab(tok, ids: list[int], tuning: tuple[int, ...], capo: int = 0) -> tuple[int, int, int]:
    """Assert that sampled ids are legal and playable (see `test_random_model_writes_playable_tab`); return (notes,
    chords, notes with a String token)."""
    assert tok.tokens_errors(miditok.TokSequence(ids=ids)) == 0, [tok[i] for i in ids]
    names = [tok[i] for i in ids]
    n_named = 0
    for a, b, c in zip(names, names[1:], names[2:]):
        if b.startswith("Duration_") and c.startswith("String_"):
            n_named += 1
            if implied_strings(tok):  # one spelling per fingering
                assert int(c.split("_")[1]) != lowest_fret_string(tuning, capo, int(a.split("_")[1])), (a, b, c)
    gs = decode_guitar(tok, ids, tuning, capo)
    notes = list(gs.track.notes)
    if not notes:
        return 0, 0, n_named
    assert gs.frets is not None and UNPLAYABLE not in gs.frets and len(gs.frets) == len(notes)
    assert all(0 <= f and f + capo <= MAX_FRET for _, f in gs.frets)
    by_string: dict[int, list] = {}
    for n, (s, _f), tech in zip(notes, gs.frets, gs.techniques):
        by_string.setdefault(s, []).append((n, tech))
    chords: dict[int, list[int]] = {}
    for n, (_s, f) in zip(notes, gs.frets):
        if f > 0:  # open strings aside, a chord's fretted notes fit one hand
            chords.setdefault(n.time, []).append(f)
    assert all(max(c) - min(c) <= HAND_SPAN for c in chords.values()), chords
    tpq = tok.time_division
    for same in by_string.values():
        same.sort(key=lambda x: x[0].time)
        for (a, _), (b, _) in itertools.pairwise(same):
            assert a.time < b.time and a.end - b.time <= tpq // 8, (a, b)
        for i, (b, tech) in enumerate(same):
            if tech.hammer:
                assert i > 0 and b.time - same[i - 1][0].end <= tpq, same[: i + 1]
    return len(notes), sum(len(c) > 1 for c in chords.values()), n_named


@pytest.mark.parametrize("tuning,capo", [("drop-d", 0), ("standard", 3)])
def test_random_model_writes_playable_tab(tok, tuning, capo):
    """An untrained model at a high temperature, only the constraint keeping it legal: no token errors, every note
    on a string that plays it, every chord within one hand's span, one note per string (a note may ring into the
    next on its string by one position at most, which the next cuts), every hammer-on from a note just before on its
    string. Layout 3: a String only where the note leaves its lowest-fret string (in this tuning and capo), and most
    notes write none."""
    sp = special_ids(tok)
    tuning = TUNINGS[tuning]
    g = torch.Generator().manual_seed(5)
    out = generate(random_model(tok), torch.full((24, 1), sp["bos"]), SamplingParams(200, temperature=1.5, max_bars=3),
                   generator=g, constraint=GuitarConstraint(tok, tuning, capo),
                   stops=StopTokens(eos_id=sp["eos"], bar_ids=bar_ids(tok)))
    n_notes = n_chords = n_named = 0
    for row in out.tolist():
        ids = row[: row.index(sp["eos"]) + 1] if sp["eos"] in row else row
        notes, chords, named = check_tab(tok, ids, tuning, capo)
        n_notes, n_chords, n_named = n_notes + notes, n_chords + chords, n_named + named
    assert n_notes > 50 and n_chords > 10
    assert n_named == n_notes if not implied_strings(tok) else 0 < n_named < n_notes


def test_a_repeated_bar_is_copied_with_its_unnamed_strings(tok):
    """A form's repeat (generation/constraint/repeats.py) forces an earlier bar's tokens again: with layout 3 its notes without a
    String are copied as they are (their Duration followed by what followed it there), on the same strings. Bar 2
    repeats bar 1 and bar 4 bar 2; a copy only stops where the state rules a token out (here: a Tempo, which a
    repeat does not restate, between two Positions), so most rows copy whole bars, and every riff stays playable."""
    sp = special_ids(tok)
    g = torch.Generator().manual_seed(5)
    c = GuitarConstraint(tok, asked=Asked(form=[[None, 0, None, 1]], prompt_opens_bar=False))
    out = generate(random_model(tok, 256), torch.full((12, 1), sp["bos"]),
                   SamplingParams(250, temperature=1.5, max_bars=4), generator=g, constraint=c,
                   stops=StopTokens(eos_id=sp["eos"], bar_ids=bar_ids(tok)))
    copies = unnamed = 0
    for row in out.tolist():
        ids = row[: row.index(sp["eos"]) + 1] if sp["eos"] in row else row
        check_tab(tok, ids, STANDARD_TUNING)
        bars: list[list[str]] = []
        for name in (tok[i] for i in ids[1:]):
            if name == "Bar_None":
                bars.append([])
            elif bars and name != "EOS_None" and not name.startswith("Tempo_"):
                bars[-1].append(name)
        for i, j in ((0, 1), (1, 3)):
            if j < len(bars) and bars[j] == bars[i]:
                copies += 1
                unnamed += sum(a.startswith("Duration_") and not b.startswith("String_")
                               for a, b in zip(bars[i], bars[i][1:] + ["EOS_None"]))
    assert copies >= 12
    assert (unnamed > 20) == implied_strings(tok) and (unnamed == 0) != implied_strings(tok)


@pytest.mark.parametrize("bars, form", [(None, None), (1, None), (4, [[None, 0, None, 1]])])
def test_a_batch_masks_each_row_as_it_would_alone(tok, bars, form):
    """Rows at different places of different riffs (one at a String, one at a Tech, ...) must not leak state into
    each other: the batched masks equal each row's own, step by step. A row alone on a CPU remembers its string
    rules' answers by the string state they read (`StringState._remembered`), the batch makes them every step: so this
    also holds the remembered answers to the made ones, and the one-row shortcuts (a riff's last bar and its end:
    `bars`; a form's copies: `form`) to the rules they shortcut."""
    sp = special_ids(tok)
    g = torch.Generator().manual_seed(3)
    B, steps = 6, 150 if form is None else 400
    c = GuitarConstraint(tok, asked=Asked(form=form, prompt_opens_bar=form is None))
    last = torch.full((B,), sp["bos"])
    c.start(last.unsqueeze(1), bars)
    ids, masks = [last], []
    seen = torch.zeros(B, dtype=torch.long)  # Bars written
    ends = 0  # steps where a row's copy was whole: a Bar or the end next
    for _ in range(steps):
        ends += c.repeats is not None and END in c.repeats.wanted()
        masks.append(c.mask(last))
        logits = torch.randn(B, len(tok), generator=g) * 3
        logits[:, sp["eos"]] -= 10  # rows that go on (layout 3 may end after any Duration)
        if bars is not None:
            logits[:, c.grammar.bar_cols] -= 6  # and fill their bars to the end
        last = torch.multinomial(torch.softmax(logits.masked_fill(~masks[-1], float("-inf")), -1), 1, generator=g)[:, 0]
        seen += torch.isin(last, c.grammar.bar_cols)
        if bars is not None:  # a Bar past the limit ends the row, as in generate
            last = torch.where(seen > bars, sp["eos"], last)
        c.update(last)
        ids.append(last)
    ids = torch.stack(ids, 1)  # (B, steps + 1)
    if form is not None:  # rows copied bars: one token forced, step after step, then a Bar or the end
        assert sum(int((m.sum(1) == 1).sum()) for m in masks) > 50 and ends
    elif bars is not None:  # rows filled their last bar and ended there
        assert (ids == sp["eos"]).any(), seen
    else:
        assert (ids == tok["Tech_Hammer"]).any() and torch.isin(ids, c.grammar.string_cols).any()
    if implied_strings(tok) and bars is None:  # notes without a String, ended by each kind of token
        after = [tok[int(j)].split("_")[0] for b in range(B) for i, j in zip(ids[b], ids[b, 1:])
                 if tok[int(i)].startswith("Duration_")]
        assert {"String", "Pitch", "Position"} <= set(after), set(after)
    for b in range(B):
        alone = GuitarConstraint(tok, asked=Asked(form=form, prompt_opens_bar=form is None))
        alone.start(ids[b : b + 1, :1], bars)
        for t in range(steps):
            assert torch.equal(alone.mask(ids[b, t : t + 1])[0], masks[t][b]), (b, t, tok[int(ids[b, t])])
            alone.update(ids[b, t + 1 : t + 2])
        assert alone.strings.memos and c.strings.memos is None  # one row remembered, the batch did not


def test_remembered_answers_are_the_guitars_own(tok):
    """One row on a CPU remembers the string rules' answers for the process, per guitar (StringState._remembered): the
    same walk of tokens on three guitars that differ only in capo or tuning, one after the other, masks as rows that
    remember nothing do, step by step (an answer of another guitar would allow a fret this one lacks)."""
    sp = special_ids(tok)
    for tuning, capo in ((STANDARD_TUNING, 0), (STANDARD_TUNING, 3), (TUNINGS["drop-d"], 0)):
        g = torch.Generator().manual_seed(5)
        kept, fresh = GuitarConstraint(tok, tuning, capo), GuitarConstraint(tok, tuning, capo)
        last = torch.tensor([sp["bos"]])
        kept.start(last.unsqueeze(1))
        fresh.start(last.unsqueeze(1))
        fresh.strings.memos = None
        assert kept.strings.memos is not None
        for step in range(120):
            m = fresh.mask(last)
            assert torch.equal(kept.mask(last), m), (tuning, capo, step)
            logits = torch.randn(1, len(tok), generator=g) * 3
            logits[:, sp["eos"]] -= 10
            last = torch.multinomial(torch.softmax(logits.masked_fill(~m, float("-inf")), -1), 1, generator=g)[:, 0]
            kept.update(last)
            fresh.update(last)


def test_an_asked_time_signature_and_tempo_hold_in_every_bar():
    """`sample --time-signature 7/8 --tempo 140` puts them in the prompt; the constraint then rules out every other
    time signature and tempo, so bars the model opens later cannot drift back to what the corpus prefers."""
    tok = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    tempo = next(t for t in tok.vocab if t.startswith("Tempo_"))
    c = GuitarConstraint(tok, asked=Asked(fixed=[tok["TimeSig_7/8"], tok[tempo]]))
    c.start(torch.tensor([[tok["BOS_None"], tok["Bar_None"]]]))
    m = c.mask(torch.tensor([tok["Bar_None"]]))[0]
    sigs = [t for t, i in tok.vocab.items() if t.startswith("TimeSig_") and m[i]]
    assert sigs == ["TimeSig_7/8"]
    assert not any(m[i] for t, i in tok.vocab.items() if t.startswith("Tempo_") and t != tempo)
    free = GuitarConstraint(tok)
    free.start(torch.tensor([[tok["BOS_None"], tok["Bar_None"]]]))
    assert sum(bool(free.mask(torch.tensor([tok["Bar_None"]]))[0][i]) for t, i in tok.vocab.items()
               if t.startswith("TimeSig_")) > 1


def test_an_asked_hand_position_holds_every_note_the_sampler_writes(tok):
    """`--position 7` on a run with controls asks for CtrlPos_5-9; the constraint then lets a note take only a
    string where its fret is 5-9 (or an open string), and does not start a pitch no string can play there. With
    layout 3 a note ends without a String only where its lowest-fret string's fret is in the region; the same for a
    region the guards hold per bar."""
    from guitarformer.vocab.controls import position_frets

    assert position_frets("5-9") == (5, 9) and position_frets("15+") == (15, 24)
    start = [tok["BOS_None"], tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"]]
    dur = next(t for t in tok.vocab if t.startswith("Duration_"))

    def strings_for(pitch, region, guard=False):
        c = GuitarConstraint(tok, asked=Asked(region=None if guard else region,
                                              guards=GuardSpec(regions=[region]) if guard else None))
        c.start(torch.tensor([start + [tok[f"Pitch_{pitch}"], tok[dur]]]))
        return sorted(strings_after(tok, c.mask(torch.tensor([tok[dur]]))[0], pitch))

    # G3 (55): fret 15 on the low E, 10 on A, 5 on D, 0 on the G string; A3 (57): 2 on G (its lowest), 7 on D
    assert strings_for(55, None) == [3, 4, 5, 6]
    for guard in (False, True):
        assert strings_for(55, (5, 9), guard) == [3, 4]  # the open G string and fret 5 on D
        assert strings_for(57, (5, 9), guard) == [4]  # not fret 2 on G: layout 3 must name the D string
    for guard in (False, True):  # the constraint's own region, and the guards' per bar
        c = GuitarConstraint(tok, asked=Asked(region=None if guard else (5, 9),
                                              guards=GuardSpec(regions=[(5, 9)]) if guard else None))
        c.start(torch.tensor([start]))
        m = c.mask(torch.tensor([tok["Position_0"]]))[0]
        assert not m[tok["Pitch_41"]] and m[tok["Pitch_45"]]  # F2: fret 1 only; A2: fret 5 on the low E (or open A)


def test_cpu_shortcuts_keep_the_unnamed_strings(tok):
    """On CPU the constraint skips tokens that change no state; with layout 3 a Tech or Bend right after a Duration
    does change it (the note takes its lowest-fret string then), so the skipping state and the full one (as on a
    GPU) must agree on every string field, step by step."""
    sp = special_ids(tok)
    g = torch.Generator().manual_seed(7)
    B = 8
    fast, full = GuitarConstraint(tok), GuitarConstraint(tok)
    full._host = False
    prompt = torch.full((B, 1), sp["bos"])
    fast.start(prompt, 4)
    full.start(prompt, 4)
    last, kinds = prompt[:, 0], set()
    fields = ("pending", "slot_end", "slot_free", "pending_end", "pending_at", "string_end", "string_free",
              "string_pitch", "hammer_ok")
    for step in range(150):
        m = full.mask(last)
        assert torch.equal(fast.mask(last), m), step
        logits = torch.randn(B, len(tok), generator=g) * 3
        logits[:, sp["eos"]] -= 10
        nxt = torch.multinomial(torch.softmax(logits.masked_fill(~m, float("-inf")), -1), 1, generator=g)[:, 0]
        kinds |= {tok[int(j)].split("_")[0] for i, j in zip(last, nxt) if tok[int(i)].startswith("Duration_")}
        last = nxt
        fast.update(last)
        full.update(last)
        for field in fields:
            assert torch.equal(getattr(fast.strings, field), getattr(full.strings, field)), (field, step)
    if implied_strings(tok):  # each way a note ends after its Duration came up
        assert {"String", "Pitch", "Position"} <= kinds and kinds & {"Tech", "Bend"}, kinds
    else:
        assert kinds == {"String"}


@pytest.mark.parametrize("name", ["REMI", "TabREMI"])
def test_grammar_cuts_select_their_columns(name):
    """The constraint masks through `<kind>_at` (a slice where the ids are one run): each selects exactly
    `<kind>_cols`, in their order, with and without controls."""
    from guitarformer.generation.constraint.grammar import Grammar

    for controls in (False, True):
        g = Grammar(build_tokenizer(DataConfig(tokenizer=name, controls=controls)))
        m = torch.randn(2, g.V)
        for kind in ("pitch", "off", "dur", "pos", "shift", "ts", "bar", "time", "string", "note_end"):
            cols = getattr(g, f"{kind}_cols")
            assert torch.equal(m[:, getattr(g, f"{kind}_at")], m[:, cols]), (name, controls, kind)
        assert torch.equal(torch.arange(129)[g.pitch_val_at], g.pitch_cols_val)


@pytest.mark.parametrize("tuning, capo, region", [(STANDARD_TUNING, 0, None), ((38, 45, 50, 55, 59, 64), 2, None),
                                                  ((35, 40, 45, 50, 55, 59, 64), 0, (5, 9)), ((28, 33, 38, 43), 0, None)])
def test_the_hand_rule_is_what_it_says(tok3, tuning, capo, region):
    """StringState._playable against its definition, note by note: pitch p may take string k at `now` iff k can
    play it (in the asked region), nothing sounds on k, and, unless p is k's open string, its fret and the frets of
    the fretted notes still sounding on other strings lie within HAND_SPAN; random states, every pitch the tokenizer
    writes."""
    from guitarformer.generation.constraint.grammar import NO_PITCH, Grammar
    from guitarformer.generation.constraint.strings import StringState
    from guitarformer.music.guitar import fret_of

    g = Grammar.of(tok3)
    st = StringState(g, tuning, capo, MAX_FRET, region=region)
    n, gen = len(tuning), torch.Generator().manual_seed(0)
    B = 40
    free_at = torch.randint(0, 12, (B, n), generator=gen)
    pitch = torch.randint(tuning[0] - 2, tuning[-1] + 20, (B, n), generator=gen)
    pitch[torch.rand(B, n, generator=gen) < 0.3] = NO_PITCH
    now = torch.randint(0, 12, (B,), generator=gen)
    got = st._playable(now, strings=(free_at, pitch))
    pending = torch.randint(tuning[0], tuning[-1] + 24, (B,), generator=gen)
    got_one = st._playable(now, pending, strings=(free_at, pitch))[:, 0]

    def fret(p: int, k: int) -> int:  # -1: string k+1 cannot play p (or not in the region)
        f = fret_of(p, k + 1, tuning, capo) if p != NO_PITCH else -1
        ok = f >= 0 and f + capo <= MAX_FRET and (region is None or f == 0 or region[0] <= f <= region[1])
        return f if ok else -1

    for b in range(B):
        held = [fret(int(pitch[b, k]), k) for k in range(n) if free_at[b, k] > now[b]]
        fretted = [f for f in held if f > 0]
        for i, p in enumerate(g.pitch_cols_val.tolist()):  # `got` answers for the pitches of the Pitch columns
            for k in range(n):
                f = fret(p, k)
                want = f >= 0 and free_at[b, k] <= now[b] and (
                    f == 0 or max(fretted + [f]) - min(fretted + [f]) <= HAND_SPAN)
                assert bool(got[b, i, k]) == want, (b, p, k)
                if p == int(pending[b]):
                    assert bool(got_one[b, k]) == want, (b, p, k)


def test_constraint_tables_are_built_once_per_guitar(tok3):
    """A constraint's read-only tables come from its grammar's `derived` cache: shared by every constraint for the
    same guitar, their own for another tuning, capo or region, and the same as a grammar of its own builds."""
    from guitarformer.generation.constraint import grammar as grammar_mod
    from guitarformer.generation.constraint.grammar import Grammar
    from guitarformer.generation.constraint.strings import StringState

    a, b = GuitarConstraint(tok3), GuitarConstraint(tok3)
    assert a.strings.W is b.strings.W and a.strings.lowest is b.strings.lowest and a.time.ticks is b.time.ticks
    c = GuitarConstraint(tok3, capo=2, asked=Asked(region=(3, 7)))
    assert not torch.equal(c.strings.frets, a.strings.frets) and c.time.ticks is a.time.ticks
    fresh = StringState(Grammar(tok3), STANDARD_TUNING, 2, MAX_FRET, region=(3, 7))
    for name in ("W", "Wt", "unplayable", "win_size", "fits", "frets", "frets_named", "span", "span_cols", "lowest"):
        assert torch.equal(getattr(fresh, name), getattr(c.strings, name)), name
    g = Grammar.of(tok3)
    for capo in range(grammar_mod.DERIVED_KEPT + 3):  # a page's many asks: only the last few guitars are kept
        StringState(g, STANDARD_TUNING, capo % 12, MAX_FRET, region=(capo, capo + 4))
    assert len(g._derived) == grammar_mod.DERIVED_KEPT


@pytest.mark.parametrize("tuning, capo, region", [
    (STANDARD_TUNING, 0, None),
    (TUNINGS["drop-d"], 5, None),
    ((28, 33, 38, 43), 0, None),  # four strings (a bass)
    (TUNINGS["seven-string"], 3, None),
    (STANDARD_TUNING, 2, (3, 7)),  # an asked hand position
], ids=["standard", "drop-d-capo5", "4-string", "7-string-capo3", "region"])
def test_the_hand_rule_as_its_definition_reads(tok3, tuning, capo, region):
    """`_playable` (read from the `span` table) against the rule written out note by note, over random string states:
    pitch p may go on string k iff k plays it (from the capo, within the frets and the asked region, or open),
    nothing sounds on k, and p is an open string or its fret and the fretted notes sounding on the other strings lie
    within HAND_SPAN frets of each other."""
    from guitarformer.generation.constraint.grammar import Grammar
    from guitarformer.generation.constraint.strings import StringState
    from guitarformer.music.guitar import fret_of

    s = StringState(Grammar.of(tok3), tuning, capo, MAX_FRET, region=region)
    n, B, now = len(tuning), 256, 100
    s.reset(B, torch.device("cpu"))
    pitches = torch.arange(129)[s.grammar.pitch_val_at].tolist()

    def fret(p: int, k: int) -> int:  # string index k (String_{k+1}); -1: it cannot play p here
        f = fret_of(p, k + 1, tuning, capo)
        if f < 0 or f + capo > MAX_FRET or (region is not None and f and not region[0] <= f <= region[1]):
            return -1
        return f

    gen = torch.Generator().manual_seed(sum(tuning) + capo)
    state = []  # per row, per string: the fret sounding there, or None
    for r in range(B):
        row = []
        for k in range(n):
            plays = [p for p in pitches if fret(p, k) >= 0]
            p = plays[int(torch.randint(len(plays), (1,), generator=gen))]
            sounding = bool(torch.rand(1, generator=gen) < 0.4)
            s.string_pitch[r, k] = p if sounding or torch.rand(1, generator=gen) < 0.5 else 128
            s.string_free[r, k] = now + 1 + int(torch.randint(50, (1,), generator=gen)) if sounding else \
                int(torch.randint(now + 1, (1,), generator=gen))
            row.append(fret(p, k) if sounding else None)
        state.append(row)
    got = s._playable(torch.full((B,), now))
    want = torch.zeros_like(got)
    for r, row in enumerate(state):
        for i, p in enumerate(pitches):
            for k in range(n):
                F = fret(p, k)
                if F < 0 or row[k] is not None:
                    continue
                fretted = [f for j, f in enumerate(row) if j != k and f]
                want[r, i, k] = F == 0 or max(fretted + [F]) - min(fretted + [F]) <= HAND_SPAN
    assert got.shape == (B, len(pitches), n)
    assert torch.equal(got, want), (got != want).nonzero()[:5]
    assert 0.05 < want.float().mean() < 0.95  # the states ask both ways
