"""The sampler's guitar rules for tab tokens: one note per string at a time, by the string's name; a hammer-on only
from an earlier note on its string; no EOS in the middle of a note; a batch masks each row as it would alone."""

from __future__ import annotations

import itertools

import miditok
import pytest
import torch

from guitarformer.config import DataConfig, ModelConfig
from guitarformer.data.tokenization import (
    bar_ids,
    build_tokenizer,
    decode_guitar,
    special_ids,
)
from guitarformer.generation.constraint import GuitarConstraint
from guitarformer.generation.engine import generate
from guitarformer.generation.sampling import SamplingParams
from guitarformer.generation.strings import HAND_SPAN
from guitarformer.models import build_model
from guitarformer.music.guitar import MAX_FRET, STANDARD_TUNING, TUNINGS
from guitarformer.music.score import UNPLAYABLE


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(DataConfig(tokenizer="TabREMI"))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def note(pitch: int, duration: str, string: int, *tech: str) -> list[str]:
    return [f"Pitch_{pitch}", f"Duration_{duration}", f"String_{string}", *tech]


def mask_after(tok, tokens: list[str], tuning=STANDARD_TUNING) -> torch.Tensor:
    """The mask for the token after `tokens` (a piece in 4/4 from its first Bar)."""
    ids = [tok[t] for t in ["BOS_None", "Bar_None", "TimeSig_4/4", *tokens]]
    c = GuitarConstraint(tok, tuning)
    c.start(torch.tensor([ids]))
    return c.mask(torch.tensor([ids[-1]]))[0]


def allowed(tok, m: torch.Tensor, *names: str) -> list[bool]:
    return [bool(m[tok[n]]) for n in names]


def test_a_string_still_ringing_takes_no_second_note(tok):
    """A2 rings on the A string (String_5) for two beats; one beat in, D3 (A string fret 5, D string open, low E
    fret 10) may go on the D or low E string but not the busy A string; once A2 has ended, the A string again."""
    ringing = ["Position_0", *note(45, "2.0.8", 5), "Position_8", "Pitch_50", "Duration_1.0.8"]
    assert allowed(tok, mask_after(tok, ringing), "String_5", "String_4", "String_6") == [False, True, True]
    assert not any(allowed(tok, mask_after(tok, ringing), "String_1", "String_2", "String_3"))  # cannot play D3
    ended = ["Position_0", *note(45, "1.0.8", 5), "Position_8", "Pitch_50", "Duration_1.0.8"]
    assert allowed(tok, mask_after(tok, ended), "String_5", "String_4", "String_6") == [True, True, True]


def test_a_pitch_needs_a_free_string_by_name(tok):
    """A2 played on the low E string (fret 5) holds that string: E2, which only the low E string plays, cannot
    start, though with A2 moved to the A string two notes would fit (what counting strings alone allows)."""
    low_a = ["Position_0", *note(45, "2.0.8", 6), "Position_8"]
    assert allowed(tok, mask_after(tok, low_a), "Pitch_40", "Pitch_41", "Pitch_52") == [False, False, True]
    a_string = ["Position_0", *note(45, "2.0.8", 5), "Position_8"]
    assert allowed(tok, mask_after(tok, a_string), "Pitch_40", "Pitch_41") == [True, True]


def test_hammer_on_only_from_an_earlier_note_on_the_string(tok):
    first = ["Position_0", *note(57, "0.4.8", 3)]  # nothing before it on the G string
    assert allowed(tok, mask_after(tok, first), "Tech_Hammer", "Tech_Vibrato", "Bend_2") == [False, True, True]
    legato = first + ["Position_4", *note(59, "0.4.8", 3)]  # G string fret 2 -> 4, right after
    assert allowed(tok, mask_after(tok, legato), "Tech_Hammer") == [True]
    assert allowed(tok, mask_after(tok, legato + ["Tech_SlideInBelow"]), "Tech_Hammer") == [True]
    other_string = first + ["Position_4", *note(64, "0.4.8", 2)]  # the B string was never played
    assert allowed(tok, mask_after(tok, other_string), "Tech_Hammer") == [False]
    long_after = first + ["Position_24", *note(59, "0.4.8", 3)]  # the G string fell silent 2.5 beats earlier
    assert allowed(tok, mask_after(tok, long_after), "Tech_Hammer") == [False]


def test_a_bend_only_after_a_whole_note(tok):
    assert not mask_after(tok, ["Position_0", "Pitch_57", "Duration_0.4.8"])[tok["Bend_2"]]
    assert not mask_after(tok, ["Position_0"])[tok["Bend_2"]]
    assert mask_after(tok, ["Position_0", *note(57, "0.4.8", 3)])[tok["Bend_2"]]


@pytest.mark.parametrize("name", ["REMI", "TabREMI"])
def test_no_eos_in_the_middle_of_a_note(name):
    """EOS after a Pitch or its Velocity would drop that note (a random model wrote `Bar TimeSig_3/2 Pitch_76
    EOS`); after a whole note it may come. (TabREMI on data without dynamics has no Velocity.)"""
    t = build_tokenizer(DataConfig(tokenizer=name))
    whole = ["Pitch_76", "Velocity_63", "Duration_1.0.8"] if name == "REMI" else ["Pitch_76", "Duration_1.0.8",
                                                                                 "String_1"]
    head = ["Position_0", *whole, "Position_8"]
    for k in range(1, len(whole)):
        assert not mask_after(t, head + whole[:k])[t["EOS_None"]], whole[:k]
    assert mask_after(t, head + whole)[t["EOS_None"]]


def test_random_model_writes_playable_tab(tok):
    """An untrained model at a high temperature, only the constraint keeping it legal: no token errors, every note
    on a string that plays it, every chord within one hand's span, one note per string (a note may ring into the next on its string by one position
    at most, which the next cuts), every hammer-on from a note just before on its string."""
    sp = special_ids(tok)
    tuning = TUNINGS["drop-d"]
    torch.manual_seed(1)
    model = build_model(ModelConfig(vocab_size=len(tok), block_size=200, n_layer=1, n_head=2, n_embd=32,
                                    dropout=0.0)).eval()
    g = torch.Generator().manual_seed(5)
    out = generate(model, torch.full((24, 1), sp["bos"]), SamplingParams(200, temperature=1.5, max_bars=3),
                   generator=g, constraint=GuitarConstraint(tok, tuning), eos_id=sp["eos"], bar_ids=bar_ids(tok))
    tpq = tok.time_division
    n_notes = n_hammers = n_chords = 0
    for row in out.tolist():
        ids = row[: row.index(sp["eos"]) + 1] if sp["eos"] in row else row
        assert tok.tokens_errors(miditok.TokSequence(ids=ids)) == 0, [tok[i] for i in ids]
        gs = decode_guitar(tok, ids, tuning)
        notes = list(gs.track.notes)
        if not notes:
            continue
        assert gs.frets is not None and UNPLAYABLE not in gs.frets and len(gs.frets) == len(notes)
        assert all(0 <= f <= MAX_FRET for _, f in gs.frets)
        by_string: dict[int, list] = {}
        for n, (s, _f), tech in zip(notes, gs.frets, gs.techniques):
            by_string.setdefault(s, []).append((n, tech))
        chords: dict[int, list[int]] = {}
        for n, (_s, f) in zip(notes, gs.frets):
            if f > 0:  # open strings aside, a chord's fretted notes fit one hand
                chords.setdefault(n.time, []).append(f)
        n_chords += sum(len(c) > 1 for c in chords.values())
        assert all(max(c) - min(c) <= HAND_SPAN for c in chords.values()), chords
        for same in by_string.values():
            same.sort(key=lambda x: x[0].time)
            for (a, _), (b, _) in itertools.pairwise(same):
                assert a.time < b.time and a.end - b.time <= tpq // 8, (a, b)
            for i, (b, tech) in enumerate(same):
                if tech.hammer:
                    n_hammers += 1
                    assert i > 0 and b.time - same[i - 1][0].end <= tpq, same[: i + 1]
        n_notes += len(notes)
    assert n_notes > 50 and n_chords > 10


def test_a_batch_masks_each_row_as_it_would_alone(tok):
    """Rows at different places of different riffs (one at a String, one at a Tech, ...) must not leak state into
    each other: the batched masks equal each row's own, step by step."""
    sp = special_ids(tok)
    g = torch.Generator().manual_seed(3)
    B, steps = 6, 150
    c = GuitarConstraint(tok)
    last = torch.full((B,), sp["bos"])
    c.start(last.unsqueeze(1))
    ids, masks = [last], []
    for _ in range(steps):
        masks.append(c.mask(last))
        logits = torch.randn(B, len(tok), generator=g) * 3
        last = torch.multinomial(torch.softmax(logits.masked_fill(~masks[-1], float("-inf")), -1), 1, generator=g)[:, 0]
        c.update(last)
        ids.append(last)
    ids = torch.stack(ids, 1)  # (B, steps + 1)
    assert (ids == tok["Tech_Hammer"]).any() and (ids == tok["String_1"]).any()
    for b in range(B):
        alone = GuitarConstraint(tok)
        alone.start(ids[b : b + 1, :1])
        for t in range(steps):
            assert torch.equal(alone.mask(ids[b, t : t + 1])[0], masks[t][b]), (b, t, tok[int(ids[b, t])])
            alone.update(ids[b, t + 1 : t + 2])


def test_an_asked_time_signature_and_tempo_hold_in_every_bar():
    """`sample --time-signature 7/8 --tempo 140` puts them in the prompt; the constraint then rules out every other
    time signature and tempo, so bars the model opens later cannot drift back to what the corpus prefers."""
    import torch

    from guitarformer.config import DataConfig
    from guitarformer.data.tokenization import build_tokenizer
    from guitarformer.generation.constraint import GuitarConstraint

    tok = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    tempo = next(t for t in tok.vocab if t.startswith("Tempo_"))
    c = GuitarConstraint(tok, fixed=[tok["TimeSig_7/8"], tok[tempo]])
    c.start(torch.tensor([[tok["BOS_None"], tok["Bar_None"]]]))
    m = c.mask(torch.tensor([tok["Bar_None"]]))[0]
    sigs = [t for t, i in tok.vocab.items() if t.startswith("TimeSig_") and m[i]]
    assert sigs == ["TimeSig_7/8"]
    assert not any(m[i] for t, i in tok.vocab.items() if t.startswith("Tempo_") and t != tempo)
    free = GuitarConstraint(tok)
    free.start(torch.tensor([[tok["BOS_None"], tok["Bar_None"]]]))
    assert sum(bool(free.mask(torch.tensor([tok["Bar_None"]]))[0][i]) for t, i in tok.vocab.items()
               if t.startswith("TimeSig_")) > 1


def test_an_asked_hand_position_holds_every_note_the_sampler_writes():
    """`--position 7` on a run with controls asks for CtrlPos_5-9; the constraint then lets a note take only a
    string where its fret is 5-9 (or an open string), and does not start a pitch no string can play there."""
    import torch

    from guitarformer.config import DataConfig
    from guitarformer.data.controls import position_frets
    from guitarformer.data.tokenization import build_tokenizer
    from guitarformer.generation.constraint import GuitarConstraint

    tok = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    assert position_frets("5-9") == (5, 9) and position_frets("15+") == (15, 24)
    start = [tok["BOS_None"], tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"]]
    dur = next(t for t in tok.vocab if t.startswith("Duration_"))

    def strings_for(pitch, region):
        c = GuitarConstraint(tok, region=region)
        c.start(torch.tensor([start + [tok[f"Pitch_{pitch}"], tok[dur]]]))
        m = c.mask(torch.tensor([tok[dur]]))[0]
        return [s for s in range(1, 7) if m[tok[f"String_{s}"]]]

    # G3 (55): fret 15 on the low E, 10 on A, 5 on D, 0 on the G string
    assert strings_for(55, None) == [3, 4, 5, 6]
    assert strings_for(55, (5, 9)) == [3, 4]  # the open G string and fret 5 on D
    c = GuitarConstraint(tok, region=(5, 9))
    c.start(torch.tensor([start]))
    m = c.mask(torch.tensor([tok["Position_0"]]))[0]
    assert not m[tok["Pitch_41"]] and m[tok["Pitch_45"]]  # F2: fret 1 only; A2: fret 5 on the low E (or open A)
