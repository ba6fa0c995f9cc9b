"""The model fingers other music (fingering/tab_model.py, `tab --run`, `eval --fingering`): playable choices that
follow the model, the same tokens whatever the batching, agreement counted on the same notes for the model and
fret(), and a clear error for runs that cannot finger. Tiny untrained models: what is checked is what the code
does with whatever the model says. Most tests run on both tab layouts (`tok` and `tab_run` are parametrized): 2, a
String on every note, and 3, a String only off the lowest-fret string, where the model's choice of that string is
its mass on ending the note."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import symusic
import torch
from click.testing import CliRunner
from helpers.tiny_runs import untrained_run

from guitarformer.cli import main
from guitarformer.config import DataConfig, ModelConfig
from guitarformer.vocab.tokenization import build_tokenizer, encode
from guitarformer.errors import GuitarformerError
from guitarformer.fingering.agreement import note_strings, part_ids, score_parts
from guitarformer.fingering import fret
from guitarformer.vocab.tab_tokens import MAX_STRINGS, lowest_fret_string
from guitarformer.fingering import tab_model as fingering
from guitarformer.fingering.tab_model import (
    TabVocab,
    _refinger,
    finger,
    log_likelihood,
    refinger,
    token_note_of,
)
from guitarformer.fingering.tab_rows import window_cuts, SlotCache, window_spans
from guitarformer.fingering.combined import finger_combined, string_logprobs
from guitarformer.models import build_model
from guitarformer.music.guitar import STANDARD_TUNING
from guitarformer.music.score import GuitarScore
from guitarformer.readers import read_guitar

FIXTURES = Path(__file__).parents[1] / "fixtures"
BLOCK = 40  # short windows: every fixture is cut into several


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module", params=[2, 3], ids=["layout2", "layout3"])
def tok(request):
    return build_tokenizer(DataConfig(tokenizer="TabREMI", tab_layout=request.param))


# A test for one layout only overrides the parameter of `tok` (and so of `model`, which is built for it).
ONLY_LAYOUT_2 = pytest.mark.parametrize("tok", [2], indirect=True, ids=["layout2"])
ONLY_LAYOUT_3 = pytest.mark.parametrize("tok", [3], indirect=True, ids=["layout3"])


def _layout3(tok) -> bool:
    return TabVocab(tok).implied


def _strip(tok, ids) -> list[int]:
    """The ids without String tokens: what refingering leaves as it was, in either layout."""
    strings = {tok[f"String_{s}"] for s in range(1, 9)}
    return [i for i in ids if i not in strings]


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    return build_model(ModelConfig(prev_token=False, copy=False,
                                   vocab_size=len(tok), block_size=BLOCK, n_layer=1, n_head=2, n_embd=32,
                                   dropout=0.0))


def _run(tmp_path_factory, tokenizer_name: str, layout: int = 3) -> Path:
    tk = build_tokenizer(DataConfig(tokenizer=tokenizer_name, tab_layout=layout))
    return untrained_run(tmp_path_factory.mktemp(f"run-{tokenizer_name}"), tk, BLOCK, seed=1)


@pytest.fixture(scope="module", params=[2, 3], ids=["layout2", "layout3"])
def tab_run(tmp_path_factory, request):
    return _run(tmp_path_factory, "TabREMI", request.param)


@pytest.fixture(scope="module")
def remi_run(tmp_path_factory):
    return _run(tmp_path_factory, "REMI")


@pytest.fixture(scope="module")
def parts():
    files = ["tabs/riff.txt", "tabs/drop_d.txt", "tabs/seven_string.txt", "io/drop_d_capo.gp5"]
    return [gs for f in files for gs in read_guitar(FIXTURES / f)]


def _playable(gs, frets) -> None:
    n = len(gs.tuning)
    by_onset: dict[int, list[int]] = {}
    for note, (s, f) in zip(gs.track.notes, frets):
        assert 1 <= s <= n and f >= 0, (note, s, f)
        assert gs.tuning[n - s] + gs.capo + f == note.pitch  # the string sounds the note's pitch
        by_onset.setdefault(note.time, []).append(s)
    for t, strings in by_onset.items():
        assert len(strings) == len(set(strings)), f"two notes at tick {t} on one string: {strings}"


def test_finger_gives_playable_fingerings(model, tok, parts):
    got = finger(model, tok, parts, batch_size=3)
    assert len(got) == len(parts)
    for gs, res in zip(parts, got):
        assert len(res.frets) == len(gs.track.notes)
        assert res.strings_chosen == len(gs.track.notes)  # every note reached the model
        _playable(gs, res.frets)


@ONLY_LAYOUT_2
@pytest.mark.parametrize("which", ["model", "copy_model"])
@pytest.mark.parametrize("wide", [False, True], ids=["one-window", "wide"])
def test_known_tokens_are_read_in_chunks_as_one_token_a_step_reads_them(tok, parts, monkeypatch, which, wide,
                                                                          request):
    """Layout 2 reads the teacher-forced tokens between two string choices in one forward (a CPU: one window a
    batch; `wide`: 16 windows, each chunk ending at any window's choice): the same strings and scores as reading
    one token a forward (the model split into one-token calls), in fewer forwards."""
    model = request.getfixturevalue(which)
    if wide:
        _wide_batches(monkeypatch)
    seqs = [encode(tok, replace(gs, frets=fret(list(gs.track.notes), gs.tuning, gs.capo))) for gs in parts]
    guitars = [(gs.tuning, gs.capo) for gs in parts]
    inner, calls = model.forward, []

    def counted(idx, targets=None, cache=None):
        calls.append(idx.shape[1])
        return inner(idx, targets, cache)

    def one_at_a_time(idx, targets=None, cache=None):
        return torch.cat([inner(idx[:, i:i + 1], targets, cache)[0] for i in range(idx.shape[1])], 1), None

    monkeypatch.setattr(model, "forward", counted)
    chunked = _refinger(model, tok, seqs, guitars, None, 64, None, 4)
    tokens = sum(calls)
    assert len(calls) < (tokens if wide else tokens / 2)  # a note is ~5 tokens, one String choice
    monkeypatch.setattr(model, "forward", one_at_a_time)
    stepped = _refinger(model, tok, seqs, guitars, None, 64, None, 4)
    assert chunked[0] == stepped[0]
    assert chunked[1] == pytest.approx(stepped[1], rel=1e-6)  # float32 logits summed in float64


def _favour(model, tok, string: int):
    """Make `model` say String_<string> is by far the likeliest next token, whatever it reads."""
    col = tok[f"String_{string}"]

    def forward(idx, targets=None, cache=None):
        if cache is not None:
            cache.advance(idx.shape[1])
        logits = torch.zeros(idx.shape[0], idx.shape[1], len(tok))
        logits[..., col] = 10.0
        logits[..., tok["String_1"]] = 5.0  # second choice
        return logits, None

    return forward


@pytest.mark.parametrize("string", [3, 5])
def test_the_choice_follows_the_model(model, tok, parts, monkeypatch, string):
    monkeypatch.setattr(model, "forward", _favour(model, tok, string))
    gs = parts[0]  # riff.txt, standard tuning: one note per onset
    res = finger(model, tok, [gs], beam=1)[0]  # the greedy choice
    n = len(gs.tuning)
    fits = [gs.tuning[n - string] + gs.capo <= note.pitch <= gs.tuning[n - string] + gs.capo + 24
            for note in gs.track.notes]
    assert any(fits) and not all(fits)
    for note, ok, (s, _) in zip(gs.track.notes, fits, res.frets):
        if ok:
            assert s == string, (note, s)
        elif _layout3(tok):  # the next choice: ending the note (the other 375 tokens at logit 0 outweigh String_1)
            assert s == lowest_fret_string(gs.tuning, gs.capo, note.pitch) != string
        else:  # the favourite cannot sound it: the model's next choice where that one can, else another
            assert s != string
            if gs.tuning[0] + 24 >= note.pitch >= gs.tuning[n - 1]:
                assert s == 1
    _playable(gs, res.frets)
    if _layout3(tok):  # String_<string> written exactly where the favourite is not the lowest-fret string
        ids = refinger(model, tok, *_seqs(tok, [gs]), beam=1)[0]
        low = [lowest_fret_string(gs.tuning, gs.capo, note.pitch) for note in gs.track.notes]
        assert ids.count(tok[f"String_{string}"]) == sum(ok and lo != string for ok, lo in zip(fits, low))
        assert ids.count(tok["String_1"]) == 0


def test_a_chord_never_doubles_the_favourite_string(model, tok, parts, monkeypatch):
    monkeypatch.setattr(model, "forward", _favour(model, tok, 6))
    gs = parts[1]  # drop_d.txt: three-note power chords that need strings 4, 5 and 6
    res = finger(model, tok, [gs])[0]
    _playable(gs, res.frets)
    assert res.fallback == 0


def _wide_batches(monkeypatch) -> None:
    """Batches of batch_size // beam windows on a CPU too (layout 2 reads one window a batch there)."""
    monkeypatch.setattr(fingering, "_windows_a_batch", lambda device, v, batch_size, beam: max(1, batch_size // beam))


def test_refinger_changes_only_string_tokens_and_not_with_the_batching(model, tok, parts, monkeypatch):
    _strings_compete(model, tok, monkeypatch)  # layout 3: else a random model ends every note, as fret() may
    _wide_batches(monkeypatch)
    seqs = [encode(tok, replace(gs, frets=fret(list(gs.track.notes), gs.tuning, gs.capo))) for gs in parts]
    if _layout3(tok):  # several windows per part (a note counts two tokens there)
        assert max(len(window_cuts(s, BLOCK, TabVocab(tok))) for s in seqs) > 2
    else:
        assert max(map(len, seqs)) > 2 * BLOCK  # several windows per part
    guitars = [(gs.tuning, gs.capo) for gs in parts]
    model.train()
    one = refinger(model, tok, seqs, guitars, batch_size=1)
    assert model.training  # given back in the mode it came in
    many = refinger(model, tok, seqs, guitars, batch_size=64)
    assert one == many
    strings = {tok[f"String_{s}"] for s in range(1, 9)}
    changed = 0
    for a, b, g in zip(seqs, one, guitars):
        assert _strip(tok, a) == _strip(tok, b)  # every other token as it was
        if _layout3(tok):  # Strings come and go: the notes' strings (written or implied) are what changes
            changed += sum(x[0] != y[0] for x, y in zip(note_strings(tok, a, g), note_strings(tok, b, g)))
            continue
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert x == y or (x in strings and y in strings)
            changed += x != y
    assert changed > 0  # a random model does not copy fret()'s strings


def test_agreement_is_counted_on_the_human_notes(tok, parts):
    gs = parts[0]  # riff.txt: its last note is dead ("x"), no fretted pitch
    fretted_pitch = [not (t.dead or t.harmonic == "natural") for t in gs.techniques]
    assert not all(fretted_pitch)
    p = part_ids(tok, gs, "riff", "tabs")
    assert p is not None and p.counted == fretted_pitch
    # fret()'s agreement in token space is the plain note-by-note one
    ours = fret(list(gs.track.notes), gs.tuning, gs.capo, program=gs.track.program)
    direct = sum(a == b for a, b, c in zip(ours, gs.frets, fretted_pitch) if c)
    human, fretted = note_strings(tok, p.human, p.guitar), note_strings(tok, p.fretted, p.guitar)
    assert sum(h[0] == f[0] for h, f, c in zip(human, fretted, p.counted) if c) == direct
    assert [h[0] for h in human] == [s for s, _ in gs.frets]


def test_eval_fingering_reports_per_folder(tab_run, tmp_path):
    out = tmp_path / "fingering.json"
    r = CliRunner().invoke(main, ["eval", "--run", str(tab_run), "--fingering", str(FIXTURES), "--json", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert set(res["sources"]) == {"io", "tabs"}
    for d in [*res["sources"].values(), res["pooled"]]:
        assert d["notes"] > 0 and 0 <= d["model_right"] <= d["notes"] and 0 <= d["fret_right"] <= d["notes"]
        assert d["model_accuracy"] == pytest.approx(d["model_right"] / d["notes"])
        # a note one of the two fingers right: at least each one's, at most both's together
        either = d["either_accuracy"] * d["notes"]
        assert max(d["model_right"], d["fret_right"]) <= round(either) <= d["model_right"] + d["fret_right"]
    assert res["pooled"]["notes"] == sum(d["notes"] for d in res["sources"].values())
    assert res["pooled"]["parts"] == sum(d["parts"] for d in res["sources"].values())
    skipped = {s["path"] for s in res["skipped"]}
    assert "io/corrupt.gp5" in skipped and "io/band.mid" in skipped  # unreadable, and no fingering: not fatal
    assert "pooled" in r.output


@pytest.mark.slow
def test_tab_with_a_run_renders_the_models_fingering(tab_run, tmp_path):
    f = FIXTURES / "tabs" / "riff.txt"
    r = CliRunner().invoke(main, ["tab", str(f), "--run", str(tab_run), "--width", "40"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    from guitarformer.render.ascii_tab import render_ascii_tab
    from guitarformer.runs import load_run

    loaded = load_run(tab_run)

    m, tk, _ = loaded.model, loaded.tokenizer, loaded.cfg
    parts = read_guitar(f)
    assert r.stdout == "\n".join(render_ascii_tab(gs, res.frets, width=40)
                                  for gs, res in zip(parts, finger(m, tk, parts)))
    # its config names no dataset: trained on the built-in corpus, whose strings are all fret()'s, and told so
    assert r.stderr.startswith("note: The model of run-TabREMI")
    assert "fret()'s fingering (the built-in corpus" in r.stderr
    plain = CliRunner().invoke(main, ["tab", str(f), "--width", "40"], catch_exceptions=False)
    assert plain.stdout != r.stdout and not plain.stderr  # the file's own fingering without --run
    out = tmp_path / "riff.gp5"
    r = CliRunner().invoke(main, ["tab", str(f), "--run", str(tab_run), "--out", str(out), "--bars", "1-2"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0
    r = CliRunner().invoke(main, ["tab", str(f), "--run", str(tab_run), "--position", "5"])
    assert r.exit_code == 2 and "--position" in r.output


def test_where_a_runs_strings_came_from(tmp_path):
    from guitarformer.app.tab import strings_taught_by
    from guitarformer.config import Config

    cfg = Config()
    assert strings_taught_by(cfg) == "fret()"  # the built-in corpus: MIDI and ABC, fingered by fret()
    cfg.data.dataset = str(tmp_path / "gone")
    assert strings_taught_by(cfg) is None  # its manifest is not at hand: nothing is claimed
    (tmp_path / "gone").mkdir()
    lines = [{"path": "a.mid", "status": "ok", "fingering": "fret()"},
             {"path": "b.gp5", "status": "skipped", "fingering": "source", "reason": "same notes as a.mid"}]
    (tmp_path / "gone" / "manifest.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    assert strings_taught_by(cfg) == "fret()"  # the one human tab was skipped: it taught nothing
    lines.append({"path": "c.txt", "status": "ok", "fingering": "source+fret()"})
    (tmp_path / "gone" / "manifest.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    assert strings_taught_by(cfg) == "people"


def test_a_remi_run_cannot_finger(remi_run):
    f = FIXTURES / "tabs" / "riff.txt"
    for args in (["tab", str(f), "--run", str(remi_run)], ["eval", "--run", str(remi_run), "--fingering",
                                                           str(FIXTURES / "tabs")]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, r.output
        assert "TabREMI" in r.output and "fix:" in r.output


def test_a_bpe_tokenizer_cannot_finger(model, tok):
    from guitarformer.fingering.tab_model import check_fingering_run

    bpe = copy.copy(tok)
    bpe.__dict__["_model"] = object()  # is_trained: a BPE model is present
    if not bpe.is_trained:
        pytest.skip("this miditok tells a trained tokenizer apart another way")
    with pytest.raises(GuitarformerError, match="BPE"):
        check_fingering_run(model, bpe)


# ---------------------------------------------------------------- beam search over the strings


def _seqs(tok, parts):
    return ([encode(tok, replace(gs, frets=fret(list(gs.track.notes), gs.tuning, gs.capo))) for gs in parts],
            [(gs.tuning, gs.capo) for gs in parts])


@pytest.fixture(scope="module")
def copy_model(tok):
    """The default preset's input and output: the token before each position, and the copy of models/copy.py."""
    torch.manual_seed(0)
    return build_model(ModelConfig(vocab_size=len(tok), block_size=BLOCK, n_layer=1, n_head=2, n_embd=32,
                                   dropout=0.0, prev_token=True, copy=True))


def _strings_compete(model, tok, monkeypatch) -> None:
    """Layout 3: raise a random model's String logits to about the mass of all other tokens, so that its choices
    mix written and implied strings (untouched, its mass on ending the note is about 98%: the lowest string
    always) and beam search's rows drift apart. Layout 2: the model as it is."""
    if not _layout3(tok):
        return
    inner = model.forward
    cols = [tok[f"String_{s}"] for s in range(1, 9)]

    def forward(idx, targets=None, cache=None):
        logits, loss = inner(idx, targets, cache)
        logits = logits.clone()
        logits[..., cols] += math.log(len(tok) - 8)
        return logits, loss

    monkeypatch.setattr(model, "forward", forward)


@pytest.mark.parametrize("beam", [2, 4])
@pytest.mark.parametrize("shape", ["plain", "copy"])
def test_beam_search_never_scores_below_greedy(model, copy_model, tok, parts, beam, shape, monkeypatch):
    if shape == "copy":  # its match state (tokens, n-gram hashes) moves with the rows beam search reorders
        model = copy_model
        with torch.no_grad():
            model.copy.by_length.weight.fill_(2.0)  # a gate that copies: a wrong row's state would show
    _strings_compete(model, tok, monkeypatch)
    seqs, guitars = _seqs(tok, parts)
    greedy = refinger(model, tok, seqs, guitars, batch_size=64, beam=1)
    wide, scored = _refinger(model, tok, seqs, guitars, None, 64, None, beam)
    ll_greedy, ll_wide = log_likelihood(model, tok, greedy), log_likelihood(model, tok, wide)
    for g, w in zip(ll_greedy, ll_wide):
        assert w >= g - 1e-6
    assert sum(ll_wide) > sum(ll_greedy) + 0.1  # a random model's first choices are not its best sequences
    # The beam's own running score (KV cache and constraint rows reordered as beams are re-ranked) is the
    # log-likelihood a plain forward pass gives its result.
    assert scored == pytest.approx(ll_wide, abs=1e-3)
    for a, b in zip(seqs, wide):
        assert _strip(tok, a) == _strip(tok, b)
    assert wide == refinger(model, tok, seqs, guitars, batch_size=beam, beam=beam)  # one window a batch: the same


@pytest.mark.parametrize("beam", [1, 4])
def test_beam_fingerings_are_playable(model, tok, parts, beam):
    for gs, res in zip(parts, finger(model, tok, parts, batch_size=16, beam=beam)):
        assert res.strings_chosen == len(gs.track.notes)
        _playable(gs, res.frets)


def _trap(tok, bait: int, good: int):
    """A model that reads only the last token: after anything but a String it prefers String_<bait> to
    String_<good>, but after String_<bait> every token but a String is very unlikely, so the teacher-forced
    tokens after a note on the bait string cost more than the bait gained."""
    strings = [tok[f"String_{s}"] for s in range(1, 9)]

    def forward(idx, targets=None, cache=None):
        if cache is not None:
            cache.advance(idx.shape[1])
        logits = torch.zeros(idx.shape[0], idx.shape[1], len(tok))
        logits[..., strings[bait - 1]] = 3.0
        logits[..., strings[good - 1]] = 2.0
        after_bait = (idx == strings[bait - 1]).unsqueeze(-1)
        penalty = torch.full((len(tok),), -8.0)
        penalty[strings] = 0.0
        return logits + after_bait * penalty, None

    return forward


@ONLY_LAYOUT_2  # layout 3's traps: test_layout3_beam_search_escapes_the_bait, ..._pays_for_a_string_that_helps
def test_greedy_takes_the_bait_and_beam_search_does_not(model, tok, parts, monkeypatch):
    gs = parts[0]  # riff.txt, standard tuning: one note per onset
    seqs, guitars = _seqs(tok, [gs])
    monkeypatch.setattr(model.config, "block_size", 4 * len(seqs[0]))  # one window: every note has a next token
    monkeypatch.setattr(model, "forward", _favour(model, tok, 6))
    good = refinger(model, tok, seqs, guitars, beam=1)[0]  # string 6 wherever the guitar lets it
    monkeypatch.setattr(model, "forward", _trap(tok, bait=5, good=6))
    greedy = refinger(model, tok, seqs, guitars, beam=1)[0]
    strings = [[s for s, _, _ in note_strings(tok, ids)] for ids in (good, greedy)]
    assert strings[0].count(6) >= 10 and strings[1].count(6) <= 1  # the greedy choice takes the bait
    for beam in (3, 4, 8):  # two rows besides the greedy one keep the good string through the next token
        wide = refinger(model, tok, seqs, guitars, beam=beam)[0]
        assert wide == good
        assert log_likelihood(model, tok, [wide])[0] > log_likelihood(model, tok, [greedy])[0] + 10


def test_the_constraint_rows_beam_search_reorders_are_all_its_per_row_state(tok, parts):
    from guitarformer.fingering.tab_rows import RowGroup

    seqs, _ = _seqs(tok, parts)
    n = min(map(len, seqs))
    ids = torch.tensor([s[:n] for s in seqs])  # one row per part, each with its own strings sounding
    perm = torch.tensor([2, 0, 0, 3, 1])[:len(seqs) + 1] % len(seqs)
    moved, replayed = RowGroup(tok, ((40, 45, 50, 55, 59, 64), 0), torch.device("cpu")), RowGroup(
        tok, ((40, 45, 50, 55, 59, 64), 0), torch.device("cpu"))
    assert len(moved.row_state) >= 8
    moved.constraint.start(ids)
    for obj, name in moved.row_state:
        setattr(obj, name, getattr(obj, name)[perm])
    replayed.constraint.start(ids[perm])
    for (obj, name), (obj2, _) in zip(moved.row_state, replayed.row_state):
        assert torch.equal(getattr(obj, name), getattr(obj2, name)), name
    last = ids[perm, -1]
    assert torch.equal(moved.constraint.mask(last), replayed.constraint.mask(last))


# ---------------------------------------------------------------- fret() + the model (fingering/combined.py)


def test_extra_costs_steer_fret(parts):
    gs = parts[0]  # riff.txt, standard tuning
    notes = list(gs.track.notes)
    plain = fret(notes, gs.tuning, gs.capo)
    on = {s for s, _ in plain if s > 0}
    avoid = max(on, key=lambda s: sum(x == s for x, _ in plain))  # fret()'s busiest string
    n = len(gs.tuning)
    extra = np.zeros((len(notes), n + 1))
    extra[:, n - avoid] = 100.0  # column 0 is the lowest string
    steered = fret(notes, gs.tuning, gs.capo, extra=extra)
    assert not any(s == avoid for s, _ in steered)
    _playable(gs, steered)
    with pytest.raises(ValueError, match="extra costs of shape"):
        fret(notes, gs.tuning, gs.capo, extra=extra[:, :n])


@ONLY_LAYOUT_2  # layout 3: test_layout3_string_logprobs_are_read_at_each_duration
def test_string_logprobs_are_each_windows_own_forward(model, tok, parts):
    seqs, _ = _seqs(tok, parts)
    got = string_logprobs(model, tok, seqs, batch_size=3)
    v = TabVocab(tok)
    cols = torch.tensor(v.string_ids)
    for seq, lp in zip(seqs, got):
        where = [j for j, t in enumerate(seq) if t in v.string_of]
        assert lp.shape == (len(where), MAX_STRINGS)
        want = {}
        for a, b in window_spans(seq, BLOCK, v):
            with torch.inference_mode():
                logits = model(torch.tensor([seq[a:b]]))[0][0]
            for j in range(a + 1, b):
                if seq[j] in v.string_of:
                    want[j] = logits[j - 1 - a, cols].float().log_softmax(-1).numpy()
        assert len(want) == len(where)  # no window starts on a String
        np.testing.assert_allclose(lp, np.stack([want[j] for j in where]), atol=1e-5)
    one = string_logprobs(model, tok, seqs, batch_size=1)  # padding in a batch changes nothing
    for a, b in zip(got, one):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_token_notes_map_back_to_the_score(tok, parts):
    for gs in parts:
        ids = encode(tok, gs)
        of, strings = token_note_of(tok, gs, ids)
        assert len(of) == len(gs.track.notes) and None not in of and len(set(of)) == len(of)
        assert [strings[k] for k in of] == [s for s, _ in gs.frets]  # each note's own string, from its tokens


@pytest.mark.parametrize("string", [3, 5])
def test_fret_plus_model_follows_the_model_as_its_weight_grows(model, tok, parts, monkeypatch, string):
    monkeypatch.setattr(model, "forward", _favour(model, tok, string))
    gs = parts[0]
    notes = list(gs.track.notes)
    assert finger_combined(model, tok, [gs], weight=0.0)[0] == fret(notes, gs.tuning, gs.capo,
                                                                      program=gs.track.program)
    got = finger_combined(model, tok, [gs], weight=50.0)[0]
    _playable(gs, got)
    n = len(gs.tuning)
    for note, (s, _) in zip(notes, got):
        if 0 <= note.pitch - gs.tuning[n - string] - gs.capo <= 24:
            assert s == string, (note, s)


# ---------------------------------------------------------------- layout 3: a String only off the lowest fret


def _logits_after(tok, rule):
    """A model that reads only the last token: `rule(last)` (B, T) -> logits (B, T, V)."""
    def forward(idx, targets=None, cache=None):
        if cache is not None:
            cache.advance(idx.shape[1])
        return rule(idx), None

    return forward


def _ends_notes(tok):
    """A model that always prefers ending the note: every String token far below every other token."""
    strings = [tok[f"String_{s}"] for s in range(1, 9)]

    def rule(idx):
        logits = torch.zeros(idx.shape[0], idx.shape[1], len(tok))
        logits[..., strings] = -10.0
        return logits

    return _logits_after(tok, rule)


def _lowest(gs) -> list[int]:
    return [lowest_fret_string(gs.tuning, gs.capo, note.pitch) for note in gs.track.notes]


@ONLY_LAYOUT_3
@pytest.mark.parametrize("beam", [1, 4])
def test_layout3_ending_the_note_gives_the_lowest_fret_string(model, tok, parts, monkeypatch, beam):
    monkeypatch.setattr(model, "forward", _ends_notes(tok))
    gs = parts[0]  # riff.txt: one note per onset, so every note may take its lowest-fret string
    seqs, guitars = [encode(tok, gs)], [(gs.tuning, gs.capo)]  # the human fingering as placeholders
    assert any(t in TabVocab(tok).string_of for t in seqs[0])  # some of its notes leave the lowest fret
    ids = refinger(model, tok, seqs, guitars, beam=beam)[0]
    assert ids == _strip(tok, seqs[0])  # no String written: every note on its lowest-fret string
    res = finger(model, tok, [gs], beam=beam)[0]
    assert [s for s, _ in res.frets] == _lowest(gs)
    assert res.fallback == 0 and res.strings_chosen == len(gs.track.notes)
    _playable(gs, res.frets)


@ONLY_LAYOUT_3
def test_layout3_agreement_counts_implied_strings(model, tok, parts, monkeypatch):
    """A model that ends every note agrees with the human exactly where the human played the lowest-fret string,
    which layout 3's human ids write no String for."""
    monkeypatch.setattr(model, "forward", _ends_notes(tok))
    gs = parts[0]
    p = part_ids(tok, gs, "riff", "tabs")
    on_lowest = [c and s == low for c, (s, _), low in zip(p.counted, gs.frets, _lowest(gs))]
    assert 0 < sum(on_lowest) < sum(p.counted)
    assert score_parts(model, tok, [p], beam=1)[0].model == sum(on_lowest)


def _two_voice_part():
    """Standard tuning, three onsets of two notes a beat apart, each note a quarter of a beat: (60, 62) and (64, 65)
    share their lowest-fret string (2, then 1), and at (65, 85) the 85 has string 1 only, which the 65 below it
    would take at its lowest fret."""
    score = symusic.Score(480)
    score.tempos.append(symusic.Tempo(0, 100))
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    track = symusic.Track(program=25)
    for k, pitches in enumerate([(60, 62), (64, 65), (65, 85)]):
        for p in pitches:
            track.notes.append(symusic.Note(k * 480, 120, p, 80))
    score.tracks.append(track)
    return GuitarScore(score=score, tuning=STANDARD_TUNING, capo=0, source_format="test")


@ONLY_LAYOUT_3
@pytest.mark.parametrize("beam", [1, 4])
def test_layout3_a_chord_never_doubles_an_implied_string(model, tok, monkeypatch, beam):
    monkeypatch.setattr(model, "forward", _ends_notes(tok))  # every note would end at its lowest fret
    gs = _two_voice_part()
    assert _lowest(gs) == [2, 2, 1, 1, 1, 1]
    res = finger(model, tok, [gs], beam=beam)[0]
    _playable(gs, res.frets)
    assert res.fallback == 0
    # The first of a pair keeps its lowest string (implied), the second takes the next string that plays it
    # (all Strings are equally unlikely: the first allowed); the 65 leaves string 1 to the 85 above it.
    assert [s for s, _ in res.frets] == [2, 3, 1, 2, 2, 1]
    ids = refinger(model, tok, *_seqs(tok, [gs]), beam=beam)[0]
    written = [t for t in ids if t in TabVocab(tok).string_of]
    assert written == [tok["String_3"], tok["String_2"], tok["String_2"]]


def _bait_or_end(tok, bait: int):
    """After anything but String_<bait>: String_<bait> at logit 3, the other tokens but Strings at a total mass of
    e^2 (ending the note: the lowest-fret string), the other Strings nowhere; after String_<bait> every token but a
    String is very unlikely, so the teacher-forced token after a note on the bait string costs more than the bait
    gained."""
    strings = [tok[f"String_{s}"] for s in range(1, 9)]
    other = 2.0 - math.log(len(tok) - len(strings))

    def rule(idx):
        logits = torch.full((idx.shape[0], idx.shape[1], len(tok)), other)
        logits[..., strings] = -20.0
        logits[..., strings[bait - 1]] = 3.0
        after_bait = (idx == strings[bait - 1]).unsqueeze(-1)
        penalty = torch.full((len(tok),), -8.0)
        penalty[strings] = 0.0
        return logits + after_bait * penalty

    return _logits_after(tok, rule)


@ONLY_LAYOUT_3
def test_layout3_beam_search_escapes_the_bait(model, tok, parts, monkeypatch):
    """Rows drift apart (the greedy row writes a String at most notes, the others none) and the best one wins."""
    gs = parts[0]
    seqs, guitars = _seqs(tok, [gs])
    monkeypatch.setattr(model.config, "block_size", 4 * len(seqs[0]))  # one window
    good = _strip(tok, seqs[0])  # every note at its lowest fret: no String
    monkeypatch.setattr(model, "forward", _bait_or_end(tok, bait=6))
    greedy = refinger(model, tok, seqs, guitars, beam=1)[0]
    assert greedy.count(tok["String_6"]) >= 10  # the greedy choice takes the bait wherever string 6 is not lowest
    for beam in (3, 4, 8):  # as in layout 2, two rows besides the greedy one keep the good string past the bait
        wide, scored = _refinger(model, tok, seqs, guitars, None, 64, None, beam)
        assert wide[0] == good
        assert scored == pytest.approx(log_likelihood(model, tok, wide), abs=1e-6)
        assert scored[0] > log_likelihood(model, tok, [greedy])[0] + 10


def _end_costs_the_next_token(tok, good: int):
    """After a Duration: ending the note looks likelier than String_<good> (PAD takes its mass: e^3 against e^2),
    but every token the part may read next is very unlikely; after anything else every token alike. So the
    greedy choice ends every note, and writing String_<good> pays off one token later."""
    strings = [tok[f"String_{s}"] for s in range(1, 9)]
    durations = torch.tensor(sorted(TabVocab(tok).duration))

    def rule(idx):
        after = torch.full((len(tok),), -10.0)
        after[tok.pad_token_id], after[strings[good - 1]] = 3.0, 2.0
        at_duration = torch.isin(idx, durations).unsqueeze(-1)
        return torch.where(at_duration, after, torch.zeros(len(tok)))

    return _logits_after(tok, rule)


@ONLY_LAYOUT_3
@pytest.mark.parametrize("beam", [4, 8])
def test_layout3_beam_search_pays_for_a_string_that_helps(model, tok, parts, monkeypatch, beam):
    """The other way round: the best row is the longer one, which writes a String at each note the greedy row
    ends at once; the ranking does not hold its extra tokens against it. (Ending a note shows its cost at once,
    in the token read after it, a String only one token later: with 2 or 3 rows the rows that end one of two
    notes fill the beam before the one that writes both Strings shows its worth.)"""
    gs = parts[0]
    seqs, guitars = _seqs(tok, [gs])
    # One window: at a window's end nothing is read after the last note, so there ending it is the better choice.
    monkeypatch.setattr(model.config, "block_size", 4 * len(seqs[0]))
    monkeypatch.setattr(model, "forward", _end_costs_the_next_token(tok, good=6))
    greedy = refinger(model, tok, seqs, guitars, beam=1)[0]
    assert greedy == _strip(tok, seqs[0])
    wide, scored = _refinger(model, tok, seqs, guitars, None, 64, None, beam)
    n = len(gs.tuning)
    only_6 = {note.time for note in gs.track.notes if note.pitch < gs.tuning[n - 5]}  # the open E: string 6 alone
    want = [6 if note.pitch <= gs.tuning[n - 6] + 24 and (note.time not in only_6 or low == 6) else low
            for note, low in zip(gs.track.notes, _lowest(gs))]
    assert [s for s, _, _ in note_strings(tok, wide[0], guitars[0])] == want
    assert wide[0].count(tok["String_6"]) == sum(w == 6 != low for w, low in zip(want, _lowest(gs))) >= 10
    assert scored == pytest.approx(log_likelihood(model, tok, wide), abs=1e-6)
    assert scored[0] > log_likelihood(model, tok, [greedy])[0] + 10


@ONLY_LAYOUT_3
def test_layout3_string_logprobs_are_read_at_each_duration(model, tok, parts):
    seqs, guitars = _seqs(tok, parts)
    got = string_logprobs(model, tok, seqs, batch_size=3, guitars=guitars)
    v = TabVocab(tok)
    cols = torch.tensor(v.string_ids)
    rest = torch.tensor(v.not_string)
    for seq, (tuning, capo), lp in zip(seqs, guitars, got):
        ends = [j for j, e in enumerate(v.note_ends(seq)) if e]
        assert lp.shape == (len(ends), MAX_STRINGS)
        want = {}
        for a, b in window_cuts(seq, BLOCK, v):
            with torch.inference_mode():
                logits = model(torch.tensor([seq[a:b]]))[0][0]
            for j in range(a, b):
                if j in ends:
                    row = logits[j - a, cols].clone()
                    row[lowest_fret_string(tuning, capo, v.note_pitch(seq, j)) - 1] = logits[j - a, rest].logsumexp(0)
                    want[j] = row.log_softmax(-1).numpy()
        assert sorted(want) == ends  # every note is read in the window that holds it
        np.testing.assert_allclose(lp, np.stack([want[j] for j in ends]), atol=1e-5)
    for a, b in zip(got, string_logprobs(model, tok, seqs, batch_size=1, guitars=guitars)):
        np.testing.assert_allclose(a, b, atol=1e-5)  # padding in a batch changes nothing
    with pytest.raises(ValueError, match="tuning, capo"):
        string_logprobs(model, tok, seqs)


@ONLY_LAYOUT_3
def test_layout3_windows_hold_a_string_for_every_note(tok, parts):
    """Cut on the ids without Strings, a note counting two tokens: a window with a String after every note still
    fits the block, and no window splits a note (its Pitch reads where its string is chosen)."""
    v = TabVocab(tok)
    for gs in parts:
        teach = _strip(tok, _seqs(tok, [gs])[0][0])
        ends = v.note_ends(teach)
        cuts = window_spans(teach, BLOCK, v, ends)
        assert len(cuts) > 1 and cuts[0][0] == 0 and cuts[-1][1] == len(teach)
        for (a, b), (c, _) in zip(cuts, cuts[1:] + [(len(teach), None)]):
            assert b == c and (b - a) + sum(ends[a:b]) <= BLOCK
            assert c == len(teach) or teach[c] not in v.duration | v.velocity


def test_a_tiny_decoder_fingers_a_tab_file(tmp_path, monkeypatch):
    """End to end on layout 3: a tiny random decoder reads riff.txt and gives every note a string that plays it;
    with its String logits raised to compete with ending the note, some notes get a written String and some
    the implied one, and `finger`'s strings are the ones the model's ids decode to."""
    tk = build_tokenizer(DataConfig(tokenizer="TabREMI"))
    assert TabVocab(tk).implied
    torch.manual_seed(3)
    m = build_model(ModelConfig(prev_token=False, copy=False,
                                vocab_size=len(tk), block_size=64, n_layer=1, n_head=2, n_embd=32, dropout=0.0))
    gs = read_guitar(FIXTURES / "tabs" / "riff.txt")[0]
    for compete in (False, True):
        if compete:
            _strings_compete(m, tk, monkeypatch)
        res = finger(m, tk, [gs])[0]
        _playable(gs, res.frets)
        assert res.fallback == 0 and res.strings_chosen == len(gs.track.notes)
        seqs, guitars = _seqs(tk, [gs])
        ids = refinger(m, tk, seqs, guitars)[0]
        decoded = tk.decode(ids, tuning=gs.tuning, capo=gs.capo)
        assert decoded.frets == res.frets
        written = sum(i in TabVocab(tk).string_of for i in ids)
        implied = sum(s == low for (s, _), low in zip(res.frets, _lowest(gs)))
        assert (written > 0 and implied > 0) if compete else (written == 0 and implied == len(gs.track.notes))


def test_a_beam_cache_in_slots_reads_as_its_rows_moved(tok):
    """`SlotCache`: after beam search's re-rankings (each row a copy of some earlier row), every row's logits are what
    the model gives that row's tokens read from scratch, and only a row's second and later descendants are copied
    (a model with prev_token and the copy head, whose per-row cache state moves with the keys and values)."""
    torch.manual_seed(0)
    m = build_model(ModelConfig(vocab_size=len(tok), block_size=BLOCK, n_layer=2, n_head=2, n_embd=32, dropout=0.0,
                                prev_token=True, copy=True)).eval()
    B, gen = 6, torch.Generator().manual_seed(1)
    rows = torch.randint(4, 7, (B, 5), generator=gen)  # few ids: the copy head finds repeats to match
    with torch.inference_mode():
        cache = SlotCache(m, B, BLOCK, torch.device("cpu"))
        cache.read(rows)
        for src in ([0, 0, 1, 2, 3, 4], [5, 5, 5, 0, 1, 1], [0, 1, 2, 3, 4, 5], [3, 2, 1, 0, 0, 4], [1, 1, 1, 1, 1, 1]):
            src = torch.tensor(src)
            copied = cache.reorder(src)
            assert copied == B - len(set(src.tolist()))
            rows = rows[src]
            new = torch.randint(4, 7, (B, 2), generator=gen)
            got = cache.read(new)
            rows = torch.cat([rows, new], 1)
            want = m(rows)[0][:, -2:]
            assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
