"""Control tokens: values computed from notes, their tokens in TabREMI, and their dropout in training windows."""

from __future__ import annotations

import random
from pathlib import Path

import miditok
import numpy as np
import pytest
import symusic
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.config import DataConfig
from guitarformer.vocab.controls import (
    BAR,
    DENSITY_THRESHOLDS,
    PIECE,
    PlayedNote,
    bar_controls,
    capo_value,
    control_index,
    control_names,
    controls_per_bar,
    estimate_key,
    notes_of,
    prompt_tokens,
    style_name,
    style_of,
    tuning_name,
)
from guitarformer.music.bars import bar_starts
from guitarformer.data.dataset import (
    ControlDropout,
    DecoderWindows,
    PairLayout,
    PitchShifter,
    Seq2SeqPairs,
    TokenSplit,
)
from guitarformer.vocab.tab_tokens import (
    TabREMI,
    bar_notes,
    control_params,
    control_styles,
    has_controls,
    insert_controls,
    strip_controls,
)
from guitarformer.vocab.tokenization import (
    build_tokenizer,
    decode_guitar,
    encode,
    load_tokenizer,
    tokenizer_params,
)
from guitarformer.errors import GuitarformerError, SkipFile
from guitarformer.fingering import fret
from guitarformer.music.guitar import STANDARD_TUNING, TUNINGS, pitch_of
from guitarformer.music.score import PLAIN, GuitarScore, Technique
from guitarformer.readers import read_guitar
from helpers.tiny_runs import token_dataset

PIECE_CONTROLS, BAR_CONTROLS, CONTROLS = control_names(PIECE), control_names(BAR), control_names()

FIX = Path(__file__).parents[1] / "fixtures"
TPQ = 480
BAR = 4 * TPQ  # 4/4


def ctrl_tokenizer(styles=("metal", "folk")) -> TabREMI:
    params = tokenizer_params(DataConfig(tokenizer="TabREMI"))
    return TabREMI(miditok.TokenizerConfig(**params, **control_params(list(styles))))


@pytest.fixture(scope="module")
def tok() -> TabREMI:
    return ctrl_tokenizer()


def fretted(path: Path):
    gs = read_guitar(path)[0]
    if gs.frets is None:
        gs.frets = fret(gs.track.notes, gs.tuning, gs.capo, program=gs.track.program)
    return gs


def notes_at(onsets, per_onset=1, fret_=3, tech=PLAIN):
    """Notes at these onsets (ticks), `per_onset` stacked on each."""
    return [PlayedNote(t, TPQ // 2, 50 + k * 5, 6 - k, fret_, tech) for t in onsets for k in range(per_onset)]


# ---------------------------------------------------------------- values from notes


def test_density_bins_count_onsets_per_quarter():
    low, high = DENSITY_THRESHOLDS
    def density(n_onsets, per_onset=1):
        step = BAR // n_onsets
        return bar_controls(notes_at(range(0, BAR, step)[:n_onsets], per_onset), TPQ, BAR)["Density"]
    below_low = max(1, int(low * 4) - 1) if low * 4 > 1 else 1
    assert density(below_low) == "low" and density(int(np.ceil(low * 4))) == "mid"
    assert density(int(np.ceil(high * 4))) == "high" and density(16) == "high"
    # a chord is one onset: three stacked notes do not make a bar denser
    assert density(below_low, per_onset=3) == "low"
    # the same notes in a bar twice as long are half as dense
    assert bar_controls(notes_at(range(0, BAR, BAR // 8)), TPQ, 4 * BAR)["Density"] == "low"


def test_polyphony_is_the_most_common_onset_size():
    assert bar_controls(notes_at([0, 480, 960]), TPQ, BAR)["Poly"] == "single"
    assert bar_controls(notes_at([0, 480, 960], 2), TPQ, BAR)["Poly"] == "dyads"
    assert bar_controls(notes_at([0, 480], 4), TPQ, BAR)["Poly"] == "chords"
    mixed = notes_at([0], 3) + notes_at([480, 960]) + notes_at([1440], 2)
    assert bar_controls(mixed, TPQ, BAR)["Poly"] == "single"
    tie = notes_at([0], 1) + notes_at([480], 3)
    assert bar_controls(tie, TPQ, BAR)["Poly"] == "chords"  # a tie goes to the larger


def test_hand_position_is_the_median_fretted_fret():
    def pos(frets):
        notes = [PlayedNote(i * 240, 240, 60, 2, f) for i, f in enumerate(frets)]
        return bar_controls(notes, TPQ, BAR).get("Pos")
    assert pos([0, 0, 2, 3]) == "0-4" and pos([0, 0, 0]) == "0-4"  # open strings do not pull the hand down
    assert pos([0, 7, 8, 9]) == "5-9" and pos([10, 12, 14, 0]) == "10-14" and pos([15, 17, 19]) == "15+"
    assert pos([-1, -1]) is None  # no known fret, no position


def test_palm_mute_and_technique_shares():
    pm, bend = Technique(palm_mute=True), Technique(bend=((0, 0), (0.5, 4)))
    def shares(techs):
        notes = [PlayedNote(i * 240, 240, 60, 2, 5, t) for i, t in enumerate(techs)]
        c = bar_controls(notes, TPQ, BAR)
        return c["PM"], c["Tech"]
    assert shares([PLAIN] * 4) == ("none", "none")
    assert shares([pm, PLAIN, PLAIN, bend]) == ("some", "some")
    assert shares([pm, pm, pm, PLAIN]) == ("most", "none")
    assert shares([bend, bend, Technique(hammer=True), pm]) == ("some", "most")


def test_key_estimate():
    def key(pitches, lengths=None):
        lengths = lengths or [TPQ] * len(pitches)
        return estimate_key([PlayedNote(i * TPQ, d, p) for i, (p, d) in enumerate(zip(pitches, lengths))])
    assert key([60, 62, 64, 65, 67, 69, 71, 72, 67, 64, 60]) == "C:major"
    # E minor riff: E G A B D, tonic held long
    assert key([40, 43, 45, 47, 50, 52, 40, 47], [4 * TPQ, TPQ, TPQ, 2 * TPQ, TPQ, TPQ, 4 * TPQ, 2 * TPQ]) == "E:minor"
    assert key([62, 64, 66, 67, 69, 71, 73, 74, 69, 66, 62]) == "D:major"
    assert estimate_key([]) is None
    assert estimate_key([PlayedNote(0, TPQ, 60, technique=Technique(dead=True))]) is None


def test_piece_values():
    assert tuning_name(STANDARD_TUNING) == "standard" and tuning_name(TUNINGS["drop-d"]) == "drop-d"
    assert tuning_name((40, 45, 50, 55, 59, 65)) == "other"
    assert capo_value(3) == "3" and capo_value(17) == "12"
    assert style_name("Death Metal_2") == "death-metal-2"
    with pytest.raises(GuitarformerError):
        style_name("__")
    assert style_of("/data/set/Metal Songs/a/b.gp5", "/data/set") == "metal-songs"
    assert style_of("/data/set/b.gp5", "/data/set") is None and style_of("/else/b.gp5", "/data/set") is None


def test_bars_from_time_signatures():
    assert bar_starts([(0, 4, 4)], TPQ, 3 * BAR) == [0, BAR, 2 * BAR]
    # 3/4 for two bars, then 6/8
    assert bar_starts([(0, 3, 4), (2 * 3 * TPQ, 6, 8)], TPQ, 12 * TPQ) == [0, 3 * TPQ, 6 * TPQ, 9 * TPQ]
    notes = notes_at(range(0, BAR, 120)) + notes_at([2 * BAR], 3)  # bar 2 empty
    per = controls_per_bar(notes, TPQ, [(0, 4, 4)])
    assert [p.get("Density") for p in per] == ["high", None, "low"] and per[2]["Poly"] == "chords"


# ---------------------------------------------------------------- tokens


def test_controls_off_by_default_and_saved_with_their_styles(tok, tmp_path):
    plain = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    assert not has_controls(plain) and not any(t.startswith("Ctrl") for t in plain.vocab)
    assert set(plain.vocab) < set(tok.vocab)
    assert {t: i for t, i in tok.vocab.items() if not t.startswith("Ctrl")} == plain.vocab  # old ids unchanged
    assert not any(t.startswith("Ctrl") for t in plain.tokens_types_graph)
    tok.save(tmp_path / "tokenizer.json")
    again = load_tokenizer(tmp_path / "tokenizer.json")
    assert control_styles(again) == ["folk", "metal"] and again.vocab == tok.vocab
    assert "CtrlStyle_metal" in again.vocab and "CtrlKey_F#:minor" in again.vocab


@pytest.mark.parametrize("name", ["tabs/riff.txt", "tabs/drop_d.txt", "tabs/seven_string.txt", "io/drop_d_capo.gp5",
                                  "io/band.mid"])
def test_insert_and_strip_round_trip(tok, name):
    gs = fretted(FIX / name)
    ids = encode(tok, gs)
    with_c = insert_controls(tok, ids, gs, style="metal")
    toks = [tok[i] for i in with_c]
    assert tok.tokens_errors(miditok.TokSequence(ids=with_c[1:-1])) == 0
    assert strip_controls(tok, with_c) == ids
    # piece controls right after BOS, in order; bar controls right after a Bar (or an earlier bar control)
    head = [t.split("_")[0] for t in toks[1:5]]
    assert head == ["CtrlTuning", "CtrlCapo", "CtrlKey", "CtrlStyle"]
    assert toks[2] == f"CtrlCapo_{gs.capo}" and toks[4] == "CtrlStyle_metal"
    for j, t in enumerate(toks):
        k = control_index(t)
        if k >= 0 and CONTROLS[k] in BAR_CONTROLS:
            prev = toks[j - 1]
            assert prev == "Bar_None" or control_index(prev) in range(len(PIECE_CONTROLS), k)
    n_bars = sum(t == "Bar_None" for t in toks)
    assert 0 < sum(t.startswith("CtrlDensity") for t in toks) <= n_bars
    # decoding ignores them: the same notes, strings, frets and techniques
    a, b = decode_guitar(tok, ids, gs.tuning, gs.capo), decode_guitar(tok, with_c, gs.tuning, gs.capo)
    def notes(gs):
        return [(n.time, n.duration, n.pitch) for n in gs.track.notes]
    assert notes(a) == notes(b)
    assert a.frets == b.frets and a.techniques == b.techniques


def test_inserted_values_describe_the_notes(tok):
    """The tuning control names the tuning; bar positions follow the frets the tab gives."""
    gs = fretted(FIX / "tabs" / "drop_d.txt")
    toks = [tok[i] for i in insert_controls(tok, encode(tok, gs), gs)]
    assert "CtrlTuning_drop-d" in toks and not any(t.startswith("CtrlStyle") for t in toks)
    notes = notes_of(gs)
    frets = sorted(n.fret for n in notes if n.fret > 0)
    positions = {t.split("_")[1] for t in toks if t.startswith("CtrlPos")}
    assert positions and all(p in ("0-4", "5-9", "10-14", "15+") for p in positions)
    if frets and max(frets) < 5:
        assert positions == {"0-4"}


def test_unknown_style_and_trained_tokenizer_are_refused(tok):
    gs = fretted(FIX / "tabs" / "riff.txt")
    with pytest.raises(GuitarformerError, match="folk, metal"):
        insert_controls(tok, encode(tok, gs), gs, style="polka")
    with pytest.raises(GuitarformerError, match="no control tokens"):
        plain = build_tokenizer(DataConfig(tokenizer="TabREMI"))
        insert_controls(plain, encode(plain, gs), gs)


def test_grammar_allows_controls_only_where_they_belong(tok):
    def errors(tokens):
        return tok.tokens_errors(miditok.TokSequence(ids=[tok[t] for t in tokens]))
    note = ["Position_0", "Pitch_52", "Duration_1.0.8", "String_2"]
    ok = ["CtrlTuning_standard", "CtrlKey_E:minor", "Bar_None", "CtrlDensity_high", "CtrlPM_most", "TimeSig_4/4",
          *note, "Bar_None", "CtrlPoly_chords", "TimeSig_4/4", *note]
    assert errors(ok) == 0
    assert errors(["Bar_None", "TimeSig_4/4", "CtrlDensity_low", *note]) > 0  # after TimeSig
    assert errors(["Bar_None", "CtrlKey_E:minor", "TimeSig_4/4", *note]) > 0  # a piece control in a bar
    assert errors(["Bar_None", "CtrlPM_most", "CtrlDensity_high", "TimeSig_4/4", *note]) > 0  # out of order
    assert errors(["Bar_None", "TimeSig_4/4", *note[:-1], "CtrlPoly_single", "String_2"]) > 0  # inside a note
    assert errors(["CtrlStyle_metal", "CtrlTuning_standard", "Bar_None", "TimeSig_4/4", *note]) > 0
    # the sampler's grammar, built from the same graph: after Bar a bar control may come, after Position none
    from guitarformer.generation.constraint.grammar import Grammar

    g = Grammar(tok)
    assert g.allowed[tok["Bar_None"], tok["CtrlDensity_low"]] and g.allowed[tok["CtrlDensity_low"], tok["TimeSig_4/4"]]
    assert not g.allowed[tok["Position_0"], tok["CtrlDensity_low"]]
    assert not g.allowed[tok["Bar_None"], tok["CtrlKey_E:minor"]]
    assert g.allowed[tok["CtrlStyle_metal"], tok["Bar_None"]]


def test_prompt_tokens_from_sampling_options(tok):
    piece, bar = prompt_tokens(tok.vocab, key="Em", density="high", poly="chords", pos=7, pm="high",
                               style="Metal", tuning="drop d", capo=None)
    assert [tok[i] for i in piece] == ["CtrlTuning_drop-d", "CtrlKey_E:minor", "CtrlStyle_metal"]
    assert [tok[i] for i in bar] == ["CtrlDensity_high", "CtrlPoly_chords", "CtrlPos_5-9", "CtrlPM_most"]
    assert [tok[i] for i in prompt_tokens(tok.vocab, key="Bb:major")[0]] == ["CtrlKey_A#:major"]
    with pytest.raises(GuitarformerError, match="folk, metal"):
        prompt_tokens(tok.vocab, style="polka")
    with pytest.raises(GuitarformerError, match="unknown control"):
        prompt_tokens(tok.vocab, loudness="high")
    with pytest.raises(GuitarformerError, match="without"):
        prompt_tokens(build_tokenizer(DataConfig(tokenizer="TabREMI")).vocab, key="E:minor")


@pytest.mark.slow
def test_real_files_round_trip(tok, shared_guitar):
    """Real GP and ASCII tabs: controls inserted, the grammar holds, stripping gives the ids back."""
    files = sorted(p for p in shared_guitar.rglob("*") if p.suffix.lower() in (".gp3", ".gp4", ".gp5", ".txt"))
    random.Random(1).shuffle(files)
    parts = 0
    unread: dict[str, str] = {}
    for f in files[:40]:
        try:
            read = read_guitar(f)
        except SkipFile:  # readable, not a guitar part
            continue
        except Exception as e:  # counted and reported: a reader failing here is a finding, not noise
            unread[f.name] = f"{type(e).__name__}: {e}"
            continue
        for gs in read[:2]:
            if not gs.track.notes or not gs.frets:
                continue
            ids = encode(tok, gs)
            with_c = insert_controls(tok, ids, gs)
            assert tok.tokens_errors(miditok.TokSequence(ids=with_c[1:-1])) == 0, f
            assert strip_controls(tok, with_c) == ids
            toks = [tok[i] for i in with_c]
            assert toks[1].startswith("CtrlTuning")
            assert sum(t.startswith("CtrlDensity") for t in toks) >= 1
            parts += 1
    print(f"controls on real files: {parts} parts; {len(unread)} files failed to read: {unread}")
    assert parts >= 10 and len(unread) <= 2, unread


# ---------------------------------------------------------------- dropout in training windows


def _dataset(tmp_path: Path, tok, seqs: list[list[int]]) -> Path:
    """A dataset folder (tiny_runs.token_dataset) holding `seqs`."""
    return token_dataset(tmp_path / "ds", tok, seqs)


@pytest.fixture(scope="module")
def ctrl_seqs(tok):
    out = []
    for name, style in (("tabs/riff.txt", "metal"), ("tabs/drop_d.txt", "folk"), ("tabs/seven_string.txt", None),
                        ("io/drop_d_capo.gp5", "metal")):
        gs = fretted(FIX / name)
        out.append(insert_controls(tok, encode(tok, gs), gs, style))
    return out


def _is_slice(part: list[int], whole: list[int]) -> bool:
    n = len(part)
    return any(whole[i: i + n] == part for i in range(len(whole) - n + 1))


def _in_order(part: list[int], whole: list[int]) -> bool:
    it = iter(whole)
    return all(any(i == j for j in it) for i in part)


def _check_window(tok, w: list[int], stream_plain: list[int], heads: list[list[int]]):
    """A window is a run of the stream without controls, with controls only where the grammar puts them."""
    toks = [tok[i] for i in w]
    body = [i for i in w if control_index(tok[i]) < 0]
    assert _is_slice(body, stream_plain)
    lead = 0
    while lead < len(toks) and control_index(toks[lead]) in range(len(PIECE_CONTROLS)):
        lead += 1
    assert lead == 0 or any(_in_order(w[:lead], h) for h in heads)  # some of a piece's own controls, in order
    for j in range(lead + 1, len(toks)):  # the stream's first token may be anything: it starts mid-piece
        k = control_index(toks[j])
        if k < 0:
            continue
        prev = toks[j - 1]
        if CONTROLS[k] in PIECE_CONTROLS:
            assert prev == "BOS_None" or control_index(prev) in range(k), toks[j - 2: j + 1]
        else:
            assert prev == "Bar_None" or control_index(prev) in range(len(PIECE_CONTROLS), k), toks[j - 2: j + 1]


def test_dropout_windows_stay_valid(tok, ctrl_seqs, tmp_path):
    d = _dataset(tmp_path, tok, ctrl_seqs)
    split = TokenSplit(d, "train")
    stream = [int(i) for i in split.tokens]
    plain = [i for i in stream if control_index(tok[i]) < 0]
    heads = [[i for i in s[1:6] if control_index(tok[i]) in range(len(PIECE_CONTROLS))] for s in ctrl_seqs]
    windows = DecoderWindows(split, 64, control_dropout=0.5)
    assert windows.controls is not None
    gen = torch.Generator().manual_seed(0)
    seen = {c: [0, 0] for c in CONTROLS if c != "Capo"}  # windows holding / lacking each type
    fronted = 0
    for _ in range(12):
        x, y = windows.batch(8, gen)
        assert x.shape == y.shape == (8, 64) and torch.equal(x[:, 1:], y[:, :-1])
        for row in torch.cat([x[:, :1], y], 1).tolist():
            _check_window(tok, row, plain, heads)
            types = {CONTROLS[control_index(tok[i])] for i in row if control_index(tok[i]) >= 0}
            fronted += control_index(tok[row[0]]) in range(len(PIECE_CONTROLS))
            for c in seen:
                seen[c][c in types] += 1
    assert all(has and lacks for has, lacks in seen.values()), seen  # each type both given and dropped
    assert fronted > 0  # windows from the middle of a piece start with its controls

    none_dropped = DecoderWindows(split, 64, control_dropout=0.0)
    x, y = none_dropped.batch(16, torch.Generator().manual_seed(1))
    for row in torch.cat([x[:, :1], y], 1).tolist():
        _check_window(tok, row, plain, heads)
        assert control_index(tok[row[0]]) in range(len(PIECE_CONTROLS)) or row[:2] == stream[
            stream.index(row[0]): stream.index(row[0]) + 2] or row[0] == tok["BOS_None"]
    all_dropped = DecoderWindows(split, 64, control_dropout=1.0)
    x, _ = all_dropped.batch(16, torch.Generator().manual_seed(2))
    assert not any(control_index(tok[i]) >= 0 for i in x.flatten().tolist())


def test_a_plain_share_of_windows_drops_every_control(tok, ctrl_seqs, tmp_path):
    """data.control_plain: that share of windows has no control at all (the plain stream `sample` without options
    asks for), the others draw per type as before; with no plain share the draws are the old ones exactly."""
    split = TokenSplit(_dataset(tmp_path, tok, ctrl_seqs), "train")
    old = DecoderWindows(split, 64, control_dropout=0.5)
    zero = DecoderWindows(split, 64, control_dropout=0.5, control_plain=0.0)
    a, b = old.batch(8, torch.Generator().manual_seed(5)), zero.batch(8, torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    half = DecoderWindows(split, 64, control_dropout=0.0, control_plain=0.5)  # kept all, or dropped all
    x, y = half.batch(64, torch.Generator().manual_seed(6))
    bare = sum(not any(control_index(tok[i]) >= 0 for i in row) for row in torch.cat([x[:, :1], y], 1).tolist())
    assert 16 <= bare <= 48, bare
    every = DecoderWindows(split, 64, control_dropout=0.0, control_plain=1.0)
    x, _ = every.batch(16, torch.Generator().manual_seed(7))
    assert not any(control_index(tok[i]) >= 0 for i in x.flatten().tolist())


def test_unscored_controls_are_read_but_never_targets(tok, ctrl_seqs, tmp_path):
    """data.control_targets false: the windows and pairs are the same draws, the controls still in the inputs, but
    no control token is a target (the sampler writes them), and every other target is scored as before; the
    validation windows alike."""
    split = TokenSplit(_dataset(tmp_path, tok, ctrl_seqs), "train")
    is_ctrl = torch.tensor([control_index(tok[i]) >= 0 for i in range(len(tok))])
    scored = DecoderWindows(split, 64, control_dropout=0.3, infill=0.3)
    unscored = DecoderWindows(split, 64, control_dropout=0.3, infill=0.3, control_targets=False)
    (x, y), (x2, y2) = (w.batch(32, torch.Generator().manual_seed(3)) for w in (scored, unscored))
    assert torch.equal(x, x2) and is_ctrl[x].any()
    ctrl_targets = (y >= 0) & is_ctrl[y.clamp(min=0)]
    assert ctrl_targets.any() and not ((y2 >= 0) & is_ctrl[y2.clamp(min=0)]).any()
    assert torch.equal(y2, y.masked_fill(ctrl_targets, IGNORE_INDEX))
    val = [y for _, y in DecoderWindows(split, 48, control_targets=False).eval_batches(4)]
    assert not any(((y >= 0) & is_ctrl[y.clamp(min=0)]).any() for y in val)
    layout = PairLayout(32, 32, [tok["Bar_None"]], tok["BOS_None"], tok.pad_token_id)
    pairs = [Seq2SeqPairs(split, layout, control_targets=t) for t in (True, False)]
    a, b = (p.batch(32, torch.Generator().manual_seed(4)) for p in pairs)
    assert all(torch.equal(u, v) for u, v in zip(a[:3], b[:3]))
    pair_ctrl = (a[3] >= 0) & is_ctrl[a[3].clamp(min=0)]
    assert pair_ctrl.any() and torch.equal(b[3], a[3].masked_fill(pair_ctrl, IGNORE_INDEX))


def test_piece_starts_open_windows_at_a_pieces_bos(tok, ctrl_seqs, tmp_path):
    """data.piece_starts: that share of a decoder's windows opens at a piece's BOS, nothing before it (as a riff
    without a prompt begins), the others drawn anywhere as before; 0 draws exactly the batches it always did."""
    split = TokenSplit(_dataset(tmp_path, tok, ctrl_seqs * 3), "train")
    bos = tok["BOS_None"]
    firsts = {int(split.sequence(i)[1]) for i in range(split.num_sequences)}  # what follows each BOS

    def batch(dropout=0.0, **kw):  # dropout 0: no window runs out of split and starts earlier to fill up
        return DecoderWindows(split, 48, control_dropout=dropout, **kw).batch(64, torch.Generator().manual_seed(5))

    x, y = batch(piece_starts=1.0)
    assert (x[:, 0] == bos).all() and {int(t) for t in y[:, 0]} <= firsts
    x, _ = batch(piece_starts=0.25)
    opened = int((x[:, 0] == bos).sum())
    assert 4 <= opened <= 32, opened  # about a quarter of 64 (a window drawn anywhere rarely starts at a BOS)
    a, b = batch(0.3), batch(0.3, piece_starts=0.0)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_validation_windows_are_deterministic_and_score_each_token_once(tok, ctrl_seqs, tmp_path):
    split = TokenSplit(_dataset(tmp_path, tok, ctrl_seqs), "train")
    windows = DecoderWindows(split, 48)
    first = [(x.clone(), y.clone()) for x, y in windows.eval_batches(4)]
    again = list(windows.eval_batches(4))
    assert len(first) == len(again) and all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
                                            for a, b in zip(first, again))
    scored = [i for _, y in first for row in y.tolist() for i in row if i != IGNORE_INDEX]
    stream = [int(i) for i in split.tokens]
    plain = [i for i in stream[1:] if control_index(tok[i]) < 0]
    assert [i for i in scored if control_index(tok[i]) < 0] == plain  # every note token once, in order
    assert len(list(windows.eval_batches(4, max_batches=1))) == 1


def test_seq2seq_pairs_with_controls(tok, ctrl_seqs, tmp_path):
    split = TokenSplit(_dataset(tmp_path, tok, ctrl_seqs), "train")
    pairs = Seq2SeqPairs(split, PairLayout(32, 32, [tok["Bar_None"]], tok["BOS_None"], tok.pad_token_id))
    assert pairs.controls is not None
    src, mask, tgt, y = pairs.batch(16, torch.Generator().manual_seed(0))
    assert src.shape == (16, 32) and tgt.shape == (16, 32)
    for s, m, t in zip(src.tolist(), mask.tolist(), y.tolist()):
        s = [i for i, keep in zip(s, m) if keep]
        assert t[0] == tok["Bar_None"]  # a target starts at a bar, with no piece controls before it
        assert not any(control_index(tok[i]) in range(len(PIECE_CONTROLS)) for i in t if i != IGNORE_INDEX)
        assert s  # a source: the piece's start, or its kept controls and the bars before
    a = [tuple(t.clone() for t in b) for b in pairs.eval_batches(8)]
    b = list(pairs.eval_batches(8))
    assert all(torch.equal(p, q) for x, z in zip(a, b) for p, q in zip(x, z))


def test_transposition_moves_the_key_control(tok):
    shifter = PitchShifter(tok, 2)
    e_minor = tok["CtrlKey_E:minor"]
    assert tok[int(shifter.tables[1][e_minor])] == "CtrlKey_F:minor"
    assert tok[int(shifter.tables[-2][tok["CtrlKey_C:major"]])] == "CtrlKey_A#:major"
    assert shifter.tables[2][tok["CtrlDensity_low"]] == tok["CtrlDensity_low"]


def _low_riff() -> GuitarScore:
    """Two bars in drop D with capo 2: frets 3-4 on the low strings (the low D string at fret 1, below E2), then
    frets 2-4 with an open string."""
    tuning, capo = TUNINGS["drop-d"], 2
    score = symusic.Score(TPQ)
    score.tempos.append(symusic.Tempo(0, 100))
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    tr = symusic.Track(program=25)
    frets = [(6, 1), (6, 3), (5, 4), (4, 3), (5, 2), (4, 0), (3, 4), (2, 3)]
    for k, (s, f) in enumerate(frets):
        tr.notes.append(symusic.Note(k * TPQ, TPQ, pitch_of(s, f, tuning, capo), 90))
    score.tracks.append(tr)
    return GuitarScore(score=score, tuning=tuning, capo=capo, frets=frets)


def test_transposition_keeps_every_control_true(tok):
    """Transposed windows keep their strings, move their frets, and each bar's CtrlPos (and the key) says what
    the moved notes are, as insert_controls would compute it from them; a drop-D riff below E2 is also seen at
    its own pitch."""
    gs = _low_riff()
    ids = insert_controls(tok, encode(tok, gs), gs)
    shifter = PitchShifter(tok, 12)
    window = np.array(ids)
    shifts, positions = set(), set()
    for seed in range(80):
        out = shifter(window, torch.Generator().manual_seed(seed)).tolist()
        shift = next(int(tok[b].split("_")[1]) - int(tok[a].split("_")[1]) for a, b in zip(ids, out)
                     if tok[a].startswith("Pitch_"))
        shifts.add(shift)
        bars, lengths, tpq = bar_notes(tok, out, gs.tuning, gs.capo)
        asked = [tok[i] for i in out if tok[i].startswith("CtrlPos_")]
        true = [f"CtrlPos_{bar_controls(b, tpq, n)['Pos']}" for b, n in zip(bars, lengths) if b]
        assert asked == true, (shift, asked, true)
        assert [n.string for b in bars for n in b] == [s for s, _ in gs.frets]  # the strings stay
        positions.update(asked)
        key = next(tok[i] for i in out if tok[i].startswith("CtrlKey_"))
        assert key == f"CtrlKey_{estimate_key([n for b in bars for n in b])}"
    assert 0 in shifts and min(shifts) == 0  # its own pitch; never down (a fret 0 would leave the neck)
    assert len(positions) >= 3  # the hand position moved with the shifts: 0-4, 5-9, 10-14 at least


def test_windows_without_controls_are_unchanged(tmp_path):
    plain = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    gs = fretted(FIX / "tabs" / "riff.txt")
    split = TokenSplit(_dataset(tmp_path, plain, [encode(plain, gs)] * 3), "train")
    windows = DecoderWindows(split, 16)
    assert windows.controls is None and ControlDropout.of_split(split) is None
    x, _ = windows.batch(4, torch.Generator().manual_seed(0))
    starts = torch.randint(0, len(split) - 16, (4,), generator=torch.Generator().manual_seed(0)).tolist()
    assert x.tolist() == [[int(i) for i in split.tokens[s: s + 16]] for s in starts]


def test_meter_tokens_are_remis_own(tok):
    from guitarformer.vocab.controls import meter_tokens

    ids = meter_tokens(tok.vocab, "7/8", 160)
    toks = [tok[i] for i in ids]
    assert toks[:2] == ["TimeSig_7/8", "Position_0"] and toks[2].startswith("Tempo_")
    nearest = min((float(t.split("_")[1]) for t in tok.vocab if t.startswith("Tempo_")), key=lambda v: abs(v - 160))
    assert float(toks[2].split("_")[1]) == nearest
    piece, bar = prompt_tokens(tok.vocab, density="low")
    prompt = [tok["BOS_None"], *piece, tok["Bar_None"], *bar, *ids]
    assert tok.tokens_errors(miditok.TokSequence(ids=prompt[1:] + [tok["Pitch_52"], tok["Duration_1.0.8"],
                                                                   tok["String_2"]])) == 0
    with pytest.raises(GuitarformerError, match="4/4"):
        meter_tokens(tok.vocab, "11/16")
