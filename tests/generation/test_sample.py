"""Sampling: constrained decoding gives error-free, playable sequences for every tokenizer; the KV cache does
not change greedy output; the `sample` writer's options. Tiny untrained models only: no training needed."""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import miditok
import pytest
import symusic
import torch
from click.testing import CliRunner

from guitarformer.config import Config, DataConfig, ModelConfig
from guitarformer.music.guitar import MAX_FRET, STANDARD_TUNING, TUNINGS
from guitarformer.vocab.tokenization import bar_ids, build_tokenizer, decode, decode_guitar, encode, special_ids
from guitarformer.models import build_model
from guitarformer.models.kinds import Prompt, kind_of
from guitarformer.models.layers import KVCache
from guitarformer import runtime
from guitarformer.generation.constraint.guitar import HOST_ROWS, GuitarConstraint, constraint_device
from guitarformer.generation.decode import engine
from guitarformer.generation.decode.engine import StopTokens, generate
from guitarformer.generation.decode.sampling import SamplingParams
from guitarformer.compose.riffs import Draws, RiffSpec, generate_riffs

TOKENIZERS = ["REMI", "TSD", "MIDILike", "Structured", "TabREMI"]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "io"


@contextmanager
def decoding(cache: bool = True, capture: bool | None = None):
    """`generate` on another decoding path for the calls inside (engine._PATH: the hook of the module that owns it;
    no user option chooses it): `cache` False recomputes every step, `capture` True uses the static cache anywhere."""
    was, engine._PATH = engine._PATH, engine._Path(cache, capture)
    try:
        yield
    finally:
        engine._PATH = was


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny(tok, kind: str = "decoder", block_size: int = 96, seed: int = 0):
    """A 1-layer model of `kind`; "decoder-prev": a decoder reading the token before each position too;
    "decoder-copy": and mixing in the token after the latest earlier match (the default preset's shape);
    "encoder_decoder-copy": matching in the source, then the target so far."""
    torch.manual_seed(seed)
    prev, copy = kind in ("decoder-prev", "decoder-copy"), kind.endswith("-copy")
    kind = "decoder" if prev else kind.removesuffix("-copy")
    return build_model(ModelConfig(kind=kind, vocab_size=len(tok), block_size=block_size,
                                   src_block_size=32, n_layer=1, n_head=2, n_embd=32, dropout=0.0,
                                   prev_token=prev, copy=copy)).eval()


def until_eos(row: list[int], eos: int) -> list[int]:
    return row[: row.index(eos) + 1] if eos in row else row


def n_errors(tok, ids: list[int]) -> int:
    return round(tok.tokens_errors(miditok.TokSequence(ids=ids)) * len(ids))


def end_of_bar(score, n: int) -> int:
    """Tick where bar n ends, following the score's time signatures (4/4 before any)."""
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures)
    tick, num, den = 0, 4, 4
    for _ in range(n):
        for t, a, b in sigs:
            if t <= tick:
                num, den = a, b
        tick += score.ticks_per_quarter * 4 * num // den
    return tick


def as_played(tok, ids: list[int], tuning: tuple[int, ...], notes: list) -> list:
    """Tab tokens name each note's string: a note stops where the next one on its string starts, as on a guitar
    (the constraint lets a note ring into the next by up to one position: the tokenizer's rounding)."""
    gs = decode_guitar(tok, ids, tuning)
    if gs.frets is None:
        return notes
    by_string: dict[int, list] = {}
    for n, (s, _f) in zip(gs.track.notes, gs.frets):
        by_string.setdefault(s, []).append(n)
    out = []
    for same in by_string.values():
        same.sort(key=lambda n: n.time)
        for a, b in zip(same, same[1:] + [None]):
            end = a.end if b is None else min(a.end, b.time)
            out.append(symusic.Note(a.time, end - a.time, a.pitch, a.velocity))
    return out


def max_sounding(notes) -> int:
    """Most notes sounding at one instant."""
    events = sorted([(n.time, 1) for n in notes] + [(n.time + n.duration, -1) for n in notes], key=lambda e: (e[0], e[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


@pytest.mark.parametrize("name", TOKENIZERS)
def test_random_model_at_high_temperature_writes_valid_playable_sequences(name):
    """An untrained model at temperature 1.5 is the hardest case: only the constraint keeps it legal."""
    tok = build_tokenizer(DataConfig(tokenizer=name))
    sp = special_ids(tok)
    model = tiny(tok)
    tuning = TUNINGS["drop-d"]
    g = torch.Generator().manual_seed(7)
    for bars in (None, 2):
        c = GuitarConstraint(tok, tuning)
        out = generate(model, torch.full((32, 1), sp["bos"]), SamplingParams(160, temperature=1.5, max_bars=bars),
                       generator=g, constraint=c, stops=StopTokens(eos_id=sp["eos"], bar_ids=bar_ids(tok)))
        n_notes = 0
        for row in out.tolist():
            ids = until_eos(row, sp["eos"])
            assert n_errors(tok, ids) == 0, [tok[i] for i in ids]
            score = decode(tok, ids)
            notes = list(score.tracks[0].notes)
            n_notes += len(notes)
            assert all(min(tuning) <= n.pitch <= max(tuning) + MAX_FRET for n in notes)
            played = as_played(tok, ids, tuning, notes) if name == "TabREMI" else notes
            assert max_sounding(played) <= len(tuning)
            if bars is not None:
                assert score.end() <= end_of_bar(score, bars), f"{name}: {score.end()} ticks past {bars} bars"
        assert n_notes > 0


@pytest.mark.parametrize("name", ["REMI", "TabREMI"])
def test_generate_leaves_the_constraint_where_its_tokens_put_it(name):
    """`generate` updates the constraint with every token it writes, the last one too (it launches the next step
    before the update, so a GPU computes while the host's constraint works): afterwards the constraint allows what
    a fresh one, replaying the rows written, allows; whether the budget or EOS ended the call."""
    tok = build_tokenizer(DataConfig(tokenizer=name))
    sp = special_ids(tok)
    model = tiny(tok)
    for eos, n in ((None, 40), (sp["eos"], 200)):
        c = GuitarConstraint(tok)
        out = generate(model, torch.full((3, 1), sp["bos"]), SamplingParams(n, temperature=1.5),
                       generator=torch.Generator().manual_seed(3), constraint=c, stops=StopTokens(eos_id=eos))
        fresh = GuitarConstraint(tok)
        fresh.start(out)
        assert torch.equal(c.mask(out[:, -1], 8), fresh.mask(out[:, -1], 8))
        assert torch.equal(c.time.now, fresh.time.now)


@pytest.mark.parametrize("name", ["TSD", "MIDILike"])
def test_one_row_at_its_bar_limit_gets_the_full_masks(name):
    """A row past its bar limit, or with no room left for a note before it, takes `mask`'s one-row shortcuts (one
    comparison read on the host); its masks equal the full computation's (as on a GPU): step by step along riffs
    whose time steps are drawn more often, so they get there, and at every tick around the limit after a time step
    (on the grid a row reaches the limit's last room and the limit at once; off it, a tick may sit in between)."""
    tok = build_tokenizer(DataConfig(tokenizer=name))
    sp = special_ids(tok)
    g = torch.Generator().manual_seed(5)
    past = 0
    for seed in range(4):
        fast, full = GuitarConstraint(tok), GuitarConstraint(tok)
        full._host = False
        prompt = torch.full((1, 1), sp["bos"])
        fast.start(prompt, 2)
        full.start(prompt, 2)
        last = prompt[:, 0]
        for step in range(100):
            past += int(fast.time.now >= fast.time.limit())
            m = full.mask(last, 100 - step)
            assert torch.equal(fast.mask(last, 100 - step), m), (name, seed, step)
            logits = torch.randn(1, len(tok), generator=g) * 3
            logits[:, fast.grammar.shift_cols] += 3
            logits[:, sp["eos"]] -= 10
            last = torch.multinomial(torch.softmax(logits.masked_fill(~m, float("-inf")), -1), 1, generator=g)[:, 0]
            fast.update(last)
            full.update(last)
    assert past
    fast, full = GuitarConstraint(tok), GuitarConstraint(tok)  # in 4/4, where the shortest step is 2 ticks
    full._host = False
    for c in (fast, full):
        c.start(torch.full((1, 1), sp["bos"]), 2)
    shift = fast.grammar.shift_cols[:1]
    limit, shortest = int(fast.time.limit()), int(fast.time.shortest())
    assert shortest >= 2
    room = 0
    for tick in range(limit - shortest - 2, limit + 2):
        for c in (fast, full):
            c.time.now = torch.tensor([tick])
        m = full.mask(shift)
        assert torch.equal(fast.mask(shift), m), tick
        if tick > limit - shortest:  # no room for the shortest note
            assert not m[0, fast.grammar.pitch_cols].any(), tick
        else:
            room += int(m[0, fast.grammar.pitch_cols].any())
    assert room or name == "MIDILike", "no tick before the limit's last room allowed a note"


@pytest.mark.parametrize("name", TOKENIZERS)
def test_cpu_shortcuts_give_exactly_the_full_masks(name):
    """On CPU the constraint skips blocks the grammar rules out and tokens that change no state; the masks must
    equal the ones the full computation (as on a GPU) gives, step by step, with and without a bar limit."""
    tok = build_tokenizer(DataConfig(tokenizer=name))
    sp = special_ids(tok)
    g = torch.Generator().manual_seed(11)
    for bars, B in ((None, 1), (3, 1), (None, 8), (3, 8)):  # one row skips most often
        fast, full = GuitarConstraint(tok), GuitarConstraint(tok)
        full._host = False
        prompt = torch.full((B, 1), sp["bos"])
        fast.start(prompt, bars)
        full.start(prompt, bars)
        last = prompt[:, 0]
        for step in range(120):
            m = full.mask(last, 120 - step)
            assert torch.equal(fast.mask(last, 120 - step), m), (name, bars, step)
            logits = torch.randn(B, len(tok), generator=g) * 3
            last = torch.multinomial(torch.softmax(logits.masked_fill(~m, float("-inf")), -1), 1, generator=g)[:, 0]
            fast.update(last)
            full.update(last)
            string_fields = ("pending", "slot_end", "slot_pitch")
            if fast.grammar.tab:
                string_fields += ("slot_free", "pending_end", "pending_free", "string_end", "string_free",
                                  "string_pitch", "hammer_ok")
            for part, names in (("time", ("now", "bar_start", "bars", "pos", "tpb", "bar_ticks", "tpp", "started",
                                           "had_ts")), ("strings", string_fields)):
                for field in names:
                    a, b = getattr(getattr(fast, part), field), getattr(getattr(full, part), field)
                    assert torch.equal(a, b), (name, part, field, step)
            assert torch.equal(fast.notes_here, full.notes_here)


def test_strings_are_respected_not_just_note_counts():
    """F2 (low E string only) and A2 (E or A string) ring: B2 needs one of those two strings, so it is
    blocked though only two notes sound; D3 fits the D string."""
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    c = GuitarConstraint(tok, STANDARD_TUNING)
    ids = [tok["BOS_None"], tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"], tok["Pitch_41"],
           tok["Velocity_63"], tok["Duration_2.0.8"], tok["Position_4"], tok["Pitch_45"], tok["Velocity_63"],
           tok["Duration_2.0.8"]]
    c.start(torch.tensor([ids]))
    m = c.mask(torch.tensor([ids[-1]]))[0]
    assert not m[tok["Pitch_47"]] and not m[tok["Pitch_43"]]
    assert not m[tok["Pitch_41"]] and not m[tok["Pitch_45"]]  # never re-strike a sounding pitch
    assert m[tok["Pitch_50"]] and m[tok["Pitch_64"]]
    assert not m[tok["Pitch_39"]] and not m[tok["Pitch_89"]]  # outside standard tuning
    assert not m[tok["Position_3"]] and not m[tok["Position_4"]] and m[tok["Position_5"]]  # forward only
    assert not m[tok["Position_32"]]  # past the end of a 4/4 bar
    assert not m[tok["TimeSig_3/4"]]  # a time signature only right after Bar


def test_small_models_decode_on_one_cpu_thread_unless_asked_and_restore_the_setting(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    model = tiny(tok)
    seen = []
    model.register_forward_pre_hook(lambda m, a: seen.append(torch.get_num_threads()))
    torch.set_num_threads(2)
    try:
        generate(model, torch.full((2, 1), special_ids(tok)["bos"]), SamplingParams(4))
        assert seen == [1] * 4 and torch.get_num_threads() == 2  # the prompt, then one forward per new token
        runtime.set_threads(2, 0)  # --threads 2: the command's count holds in every step
        seen.clear()
        generate(model, torch.full((2, 1), special_ids(tok)["bos"]), SamplingParams(4))
        assert seen == [2] * 4
    finally:
        runtime.set_threads(0, 0)
        torch.set_num_threads(1)


@pytest.mark.parametrize("kind", ["decoder", "encoder_decoder"])
def test_generate_runs_in_eval_mode_and_gives_the_model_back_in_its_own(kind):
    """Training samples a riff mid-run: dropout must be off while sampling and back on for the steps after."""
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    model = tiny(tok, kind, block_size=48)
    seen = []
    model.register_forward_pre_hook(lambda m, a: seen.append(m.training))
    if kind == "encoder_decoder":
        model.decoder[0].register_forward_pre_hook(lambda m, a: seen.append(m.training))
    bos = special_ids(tok)["bos"]
    src = torch.randint(5, len(tok), (20,)).tolist() if kind == "encoder_decoder" else []
    prompt = kind_of(kind).prompt(src or [bos], [], bos, num=2)
    for mode in (True, False):
        model.train(mode)
        seen.clear()
        generate(model, prompt, SamplingParams(6))
        assert seen and not any(seen)
        assert model.training is mode and all(m.training is mode for m in model.modules())
    model.train()
    with pytest.raises(IndexError):  # a failing call (a token id past the vocabulary) gives the mode back too
        generate(model, replace(prompt, ids=torch.full((2, 1), len(tok) + 5)), SamplingParams(6))
    assert model.training


@pytest.mark.parametrize("kind", ["decoder", "decoder-prev", "decoder-copy", "encoder_decoder",
                                  "encoder_decoder-copy"])
def test_greedy_is_identical_with_and_without_cache(kind):
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    sp = special_ids(tok)
    model = tiny(tok, kind, block_size=48)
    ids = torch.tensor([[sp["bos"], tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"]]] * 2)
    prompt = ids
    if kind.startswith("encoder_decoder"):
        prompt = Prompt(ids, torch.randint(5, len(tok), (2, 20)), torch.ones(2, 20, dtype=torch.bool))
    runs = []
    # The cache, recomputing everything, and the static cache a captured step uses (on a CPU it runs eagerly).
    for use_cache, capture in ((True, False), (False, None), (True, True)):
        # 80 new tokens > block_size 48: the cached paths also slide their window once.
        with decoding(use_cache, capture):
            runs.append(generate(model, prompt, SamplingParams(80, temperature=0), constraint=GuitarConstraint(tok)))
    assert runs[0].shape == (2, 84)
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0], runs[2])


@pytest.mark.parametrize("kind", ["decoder", "decoder-copy"])
def test_guidance_leans_from_the_unconditioned_twin(kind):
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    sp = special_ids(tok)
    model = tiny(tok, kind, block_size=48)
    body = [tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"]]
    cond = Prompt(torch.tensor([[sp["bos"], tok["Pitch_60"], *body]] * 2), keep_front=2)  # a stand-in control
    twin = Prompt(torch.tensor([[sp["bos"], *body]] * 2), keep_front=1)
    greedy = SamplingParams(80, temperature=0, guidance=0.0)
    plain = generate(model, cond, greedy)
    assert torch.equal(generate(model, cond, greedy, guide=twin), plain)  # guidance 0: off
    runs = []
    for c in (True, False):
        with decoding(cache=c):
            runs.append(generate(model, cond, replace(greedy, guidance=50.0), guide=twin))
    assert torch.equal(runs[0], runs[1])  # cache and recomputation agree, window slides included (80 > 48)
    with decoding(capture=True):
        static = generate(model, cond, replace(greedy, guidance=50.0), guide=twin)
    assert torch.equal(static, runs[0])  # the static cache (a CUDA graph's, eager here): its padded prompt and slides
    assert not torch.equal(runs[0], plain)
    with torch.inference_mode():  # the first guided token is argmax of c + 50 (c - u)
        c = model(cond.ids)[0][:, -1].float()
        u = model(twin.ids)[0][:, -1].float()
    assert torch.equal(runs[0][:, cond.ids.shape[1]], (c + 50.0 * (c - u)).argmax(-1))


@pytest.mark.parametrize("pos", ["rope", "learned"])
@pytest.mark.parametrize("kind", ["decoder", "decoder-prev", "decoder-copy"])
@pytest.mark.parametrize("static", [False, True])
def test_a_prompt_and_its_twin_in_one_batch_read_as_each_alone(kind, pos, static):
    """Prompt.with_twin: the shorter twin padded in front reads, row for row, what it reads alone (its own
    positions, no padding key seen, the token before it, its matches), through the prompt and one-token steps."""
    if static and kind == "decoder-copy":
        pytest.skip("model.copy decodes with a dynamic cache")
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    torch.manual_seed(1)
    model = tiny(tok, kind, block_size=64)
    if pos == "learned":
        model = build_model(replace(model.config, pos="learned")).eval()
    body = torch.randint(5, len(tok), (2, 12))
    body[:, 6:] = body[:, :6]  # a repeat, so model.copy has matches to find
    cond_ids = torch.cat([torch.tensor([[1, 7, 9, 11]] * 2), body], 1)  # BOS and three stand-in controls
    twin_ids = torch.cat([cond_ids[:, :1], body], 1)
    cond, twin = Prompt(cond_ids, keep_front=4), Prompt(twin_ids, keep_front=1)
    both = cond.with_twin(twin)
    assert both.ids.shape == (4, 16) and both.pads.tolist() == [0, 0, 3, 3] and both.keep_front == 4
    steps = torch.randint(5, len(tok), (2, 6))
    with torch.inference_mode():
        alone = [model(torch.cat([p.ids, steps], 1))[0] for p in (cond, twin)]  # no cache: the whole sequence
        cache = model.new_cache(4, 64, static=static, pads=both.pads)
        got = [model(both.ids, cache=cache)[0][:, -1]]
        for t in range(steps.shape[1]):
            got.append(model(steps[:, t:t + 1].repeat(2, 1), cache=cache)[0][:, -1])
        if not static:  # the sampler's way: each prompt read alone into a cache of its own, the two stacked
            parts = [model.new_cache(2, 64), model.new_cache(2, 64)]
            first = torch.cat([model(p.ids, cache=c)[0][:, -1] for p, c in zip((cond, twin), parts)])
            stacked = KVCache.stack(parts, both.pads)
            got_stacked = [first] + [model(steps[:, t:t + 1].repeat(2, 1), cache=stacked)[0][:, -1]
                                     for t in range(steps.shape[1])]
            for a, b in zip(got, got_stacked):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    for t, g in enumerate(got):
        torch.testing.assert_close(g[:2], alone[0][:, cond_ids.shape[1] - 1 + t], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(g[2:], alone[1][:, twin_ids.shape[1] - 1 + t], atol=1e-5, rtol=1e-5)
    assert torch.isfinite(got[0]).all()  # padding queries see themselves: no NaN in the cache


@pytest.mark.parametrize("kind", ["decoder", "decoder-copy"])
def test_rows_of_one_long_prompt_share_its_cache_and_sample_what_their_own_caches_do(kind, monkeypatch):
    """engine._Reader: B rows of one prompt long enough ((B - 1) x its tokens >= SHARED_KEYS_MIN, infill's candidates)
    read it once into a cache they share (KVCache.sharing); each row then draws what it draws with a cache of its own,
    through the constraint and past a slide of the window (a fresh cache of the rows' own, no longer one prompt)."""
    from guitarformer.generation.decode import engine
    from guitarformer.models import layers

    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    model = tiny(tok, kind, block_size=64)
    eos = special_ids(tok)["eos"]
    riff = [i for i in encode(tok, symusic.Score(str(FIXTURES / "riff_piano_program.mid"))) if i != eos]
    ids = (riff + riff[1:])[:40]  # the riff twice, behind one BOS: a prompt the copy finds repeats in
    shared = []
    real = layers.KVCache.sharing.__func__
    monkeypatch.setattr(layers.KVCache, "sharing",
                        classmethod(lambda cls, one, B: shared.append(B) or real(cls, one, B)))

    def draw(rows: int, n: int = 48) -> torch.Tensor:
        gens = [torch.Generator().manual_seed(r) for r in range(rows)]
        return generate(model, torch.tensor([ids] * rows), SamplingParams(n, top_k=20), generator=gens,
                        constraint=GuitarConstraint(tok))

    together = draw(8)  # 40 + 48 tokens: the window slides past 64
    assert together.shape[1] == 88
    assert shared == [8]
    monkeypatch.setattr(engine, "SHARED_KEYS_MIN", 10**9)
    assert torch.equal(draw(8), together)
    assert shared == [8]
    monkeypatch.setattr(engine, "SHARED_KEYS_MIN", 200)
    draw(2, 4)  # (2 - 1) x 40 keys saved: below the minimum, each row its own cache
    assert shared == [8]


@pytest.mark.parametrize("kind", ["encoder_decoder", "encoder_decoder-copy"])
def test_guidance_twin_of_an_encoder_decoder_reads_its_source_without_the_controls(kind):
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    sp = special_ids(tok)
    model = tiny(tok, kind, block_size=48)
    body = torch.randint(5, len(tok), (2, 20))
    src_c = torch.cat([torch.full((2, 1), sp["bos"]), torch.full((2, 1), tok["Pitch_60"]), body], 1)
    src_u = torch.cat([src_c[:, :1], src_c[:, 2:]], 1)
    ids = torch.tensor([[sp["bos"], tok["Bar_None"]]] * 2)
    cond = Prompt(ids, src_c, torch.ones_like(src_c, dtype=torch.bool))
    twin = Prompt(ids, src_u, torch.ones_like(src_u, dtype=torch.bool))
    greedy = SamplingParams(60, temperature=0, guidance=0.0)
    plain = generate(model, cond, greedy)
    assert torch.equal(generate(model, cond, greedy, guide=twin), plain)
    runs = []
    for c in (True, False):
        with decoding(cache=c):
            runs.append(generate(model, cond, replace(greedy, guidance=50.0), guide=twin))
    assert torch.equal(runs[0], runs[1])  # window slide included (60 > 48)
    with torch.inference_mode():  # the first guided token is argmax of c + 50 (c - u), u read from the twin's source
        c = kind_of(model).stepper(model, cond)(cond.ids, None)[:, -1].float()
        u = kind_of(model).stepper(model, twin)(twin.ids, None)[:, -1].float()
    assert not torch.allclose(c, u)
    assert torch.equal(runs[0][:, ids.shape[1]], (c + 50.0 * (c - u)).argmax(-1))


def _three_rows_on_cuda(kind: str):
    """(tokenizer, its special ids, a tiny model of `kind` on CUDA, a 3-row prompt opening a 4/4 bar as it reads it)."""
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    sp = special_ids(tok)
    model = tiny(tok, kind, block_size=48).cuda()
    ids = torch.tensor([[sp["bos"], tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"]]] * 3)
    if kind.startswith("encoder_decoder"):
        return tok, sp, model, Prompt(ids, torch.randint(5, len(tok), (3, 20)), torch.ones(3, 20, dtype=torch.bool))
    return tok, sp, model, ids


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (tools/gpu_checks.sh runs this)")
@pytest.mark.parametrize("kind", ["decoder", "decoder-prev", "decoder-copy", "encoder_decoder",
                                  "encoder_decoder-copy"])
def test_captured_step_on_cuda_samples_what_the_eager_step_samples(kind):
    """The CUDA-graph step (generation/decode/captured.py): the same riffs from the same seeds, window slide included."""
    tok, _, model, prompt = _three_rows_on_cuda(kind)
    runs = []
    for capture in (False, True):
        with decoding(capture=capture):
            runs.append(generate(model, prompt, SamplingParams(80), generator=torch.Generator().manual_seed(0),
                                 constraint=GuitarConstraint(tok, device="cuda")))
    assert torch.equal(runs[0], runs[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (tools/gpu_checks.sh runs this)")
@pytest.mark.parametrize("kind", ["decoder-copy", "encoder_decoder"])
def test_a_compiled_step_on_cuda_samples_what_the_captured_step_samples(kind):
    """`SamplingParams(compile=True)` on CUDA: the step compiled, then captured (compiled.HeldStep): greedy riffs as
    the plain captured step writes them (fused kernels move logits by float rounding only), window slide included."""
    tok, sp, model, prompt = _three_rows_on_cuda(kind)
    runs = [generate(model, prompt, SamplingParams(80, temperature=0, compile=compile),
                     constraint=GuitarConstraint(tok, device="cpu")) for compile in (False, True)]
    assert torch.equal(runs[0], runs[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (tools/gpu_checks.sh runs this)")
@pytest.mark.parametrize("kind", ["decoder", "decoder-prev", "decoder-copy"])
def test_captured_step_on_cuda_samples_guided_riffs_as_the_eager_step(kind):
    """Guidance's twin in the batch under a CUDA graph: its padding mask and per-row positions replay from the
    device, greedy tokens as the eager dynamic cache gives them (window slide included)."""
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    sp = special_ids(tok)
    model = tiny(tok, kind, block_size=48).cuda()
    body = [tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"]]
    cond = Prompt(torch.tensor([[sp["bos"], tok["Pitch_60"], *body]] * 2), keep_front=2)
    twin = Prompt(torch.tensor([[sp["bos"], *body]] * 2), keep_front=1)
    runs = []
    for capture in (False, True):
        with decoding(capture=capture):
            runs.append(generate(model, cond, SamplingParams(80, temperature=0, guidance=3.0), guide=twin))
    assert torch.equal(runs[0], runs[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (tools/gpu_checks.sh runs this)")
@pytest.mark.parametrize("kind", ["decoder", "decoder-copy", "encoder_decoder"])
def test_a_constraint_on_the_host_chooses_what_it_chooses_on_the_gpu(kind):
    """A model on the GPU with its constraint on the host (what `sample` does for small batches: constraint_device)
    picks the tokens the constraint on the GPU picks (greedy: the same logits, the same masks), bar limit and window
    slide included; a CUDA generator with a host constraint is refused with what to do."""
    tok, sp, model, prompt = _three_rows_on_cuda(kind)
    assert constraint_device("cuda", 3) == torch.device("cpu")
    runs = [generate(model, prompt, SamplingParams(80, temperature=0, max_bars=3),
                     stops=StopTokens(eos_id=sp["eos"], bar_ids=[tok["Bar_None"]]),
                     constraint=GuitarConstraint(tok, device=where))
            for where in ("cuda", constraint_device("cuda", 3))]
    assert runs[0].device.type == runs[1].device.type == "cuda"
    # The same tokens; the host notices every row done at once, the GPU every 8 steps: a run may end earlier
    # (the later one's extra columns are the EOS padding of finished rows).
    n = min(r.shape[1] for r in runs)
    assert torch.equal(runs[0][:, :n], runs[1][:, :n])
    assert all(bool((r[:, n:] == sp["eos"]).all()) for r in runs)
    with pytest.raises(ValueError, match="CPU generators"):
        generate(model, prompt, SamplingParams(4), generator=torch.Generator(device="cuda").manual_seed(0),
                 constraint=GuitarConstraint(tok, device="cpu"))


def test_constraint_device_keeps_small_batches_of_a_gpu_model_on_the_host():
    assert constraint_device("cpu", 1) == torch.device("cpu")
    assert constraint_device("cuda", 1) == constraint_device("cuda:0", HOST_ROWS) == torch.device("cpu")
    assert constraint_device("cuda", HOST_ROWS + 1) == torch.device("cuda")


def test_same_seed_same_riffs_and_encoder_decoder_encodes_the_prompt(monkeypatch):
    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    cfg = Config()
    cfg.model = ModelConfig(prev_token=False, copy=False,
                            kind="encoder_decoder", vocab_size=len(tok), block_size=64, src_block_size=32,
                            n_layer=1, n_head=2, n_embd=32, dropout=0.0)
    model = tiny(tok, "encoder_decoder", 64)
    prompt = [tok["BOS_None"], tok["Bar_None"], tok["TimeSig_4/4"], tok["Position_0"], tok["Pitch_52"],
              tok["Velocity_63"], tok["Duration_1.0.8"]]
    seen = []
    real_encode = model.encode
    monkeypatch.setattr(model, "encode", lambda src, mask=None: seen.append(src.clone()) or real_encode(src, mask))
    a = generate_riffs(model, tok, cfg, SamplingParams(40, top_p=0.95), Draws(3, 5), RiffSpec(prompt=prompt))
    b = generate_riffs(model, tok, cfg, SamplingParams(40, top_p=0.95), Draws(3, 5), RiffSpec(prompt=prompt))
    assert [r.ids for r in a] == [r.ids for r in b]
    assert seen and seen[0].tolist() == [prompt]  # the prompt is the encoder's source, encoded once for 3 rows
    assert all(r.ids[0] == tok["BOS_None"] for r in a)  # the target starts fresh
    # the continuation is heard after its source: the prompt's E3 is the first note
    assert a[0].gs.track.notes[0].pitch == 52


@pytest.mark.parametrize("name", ["REMI", "TSD"])
def test_encoder_decoder_constraint_starts_from_the_source(name):
    """A 3/4 source whose last chord rings into the next bar: the continuation, heard after the source,
    keeps the source's bar length, never stacks more than six sounding notes, and ends within its bars."""
    tok = build_tokenizer(DataConfig(tokenizer=name))
    sp = special_ids(tok)
    s = symusic.Score(tok.time_division)
    s.tempos.append(symusic.Tempo(0, 120))
    s.time_signatures.append(symusic.TimeSignature(0, 3, 4))
    tr = symusic.Track(program=25)
    tpq = tok.time_division
    tr.notes.extend(symusic.Note(t * tpq, tpq, 60 + t, 90) for t in range(5))
    tr.notes.extend(symusic.Note(5 * tpq, 3 * tpq, p, 90) for p in (40, 47, 52, 55, 59, 64))  # into bar 3
    s.tracks.append(tr)
    src_ids = [i for i in encode(tok, s) if i != sp["eos"]]
    torch.manual_seed(0)
    model = build_model(ModelConfig(prev_token=False, copy=False,
                                    kind="encoder_decoder", vocab_size=len(tok), block_size=96,
                                    src_block_size=len(src_ids), n_layer=1, n_head=2, n_embd=32)).eval()
    g = torch.Generator().manual_seed(3)
    src = torch.tensor([src_ids] * 16)
    c = GuitarConstraint(tok)
    prompt = Prompt(torch.full((16, 1), sp["bos"]), src, torch.ones_like(src, dtype=torch.bool))
    out = generate(model, prompt, SamplingParams(90, temperature=1.5, max_bars=2),
                   generator=g, constraint=c, stops=StopTokens(eos_id=sp["eos"], bar_ids=bar_ids(tok)))
    c2 = GuitarConstraint(tok)
    c2.start(torch.tensor([src_ids + [sp["bos"]]]), 2)
    assert int(c2.time.bar_ticks[0]) == 3 * tpq and int(c2.notes_here[0]) == 6  # the source's 3/4 and its chord
    for row in out.tolist():
        body = src_ids + until_eos(row, sp["eos"])[1:]  # the target's BOS is not part of the music
        assert n_errors(tok, body) == 0, [tok[i] for i in body]
        score = decode(tok, body)
        notes = list(score.tracks[0].notes)
        assert max_sounding(notes) <= 6
        assert score.end() <= end_of_bar(score, 4)  # 2 source bars + 2 new ones (REMI may change meter at a Bar)


def test_constraint_state_is_cheap_at_batch_32():
    import time

    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    c = GuitarConstraint(tok)
    ids = torch.full((32, 1), tok["BOS_None"])
    c.start(ids, max_bars=4)
    last = ids[:, 0]
    t = time.perf_counter()
    for _ in range(50):
        c.update(last)
        c.mask(last, 100)
    assert (time.perf_counter() - t) / 50 < 0.02  # ~1 ms in practice; generous for a loaded CI box


# ---------------------------------------------------------------- the `sample` command


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from guitarformer.runs.checkpoint import save_checkpoint

    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    cfg = Config()
    cfg.model = ModelConfig(prev_token=False, copy=False,
                            vocab_size=len(tok), block_size=96, n_layer=1, n_head=2, n_embd=32, dropout=0.0)
    cfg.sample.max_new_tokens = 120
    run = tmp_path_factory.mktemp("run")
    tok.save(run / "tokenizer.json")
    save_checkpoint(run / "ckpt" / "last.pt", {"config": copy.deepcopy(cfg).to_dict(),
                                                "model": tiny(tok, block_size=96).state_dict()})
    return run


def sample_cli(*args, cwd):
    from guitarformer.cli import main

    return CliRunner().invoke(main, ["sample", *map(str, args)], catch_exceptions=False)


def test_sample_batches_bars_tempo_program_tuning(run_dir, tmp_path):
    out = tmp_path / "riff.mid"
    r = sample_cli("--run", run_dir, "--out", out, "--num-samples", 5, "--batch-size", 2, "--bars", 2,
                   "--tempo", 90, "--program", 27, "--tuning", "drop-d", "--temperature", 1.5, "--seed", 1,
                   "--tab", tmp_path / "riff.txt", cwd=tmp_path)
    assert r.exit_code == 0, r.output
    files = sorted(tmp_path.glob("riff_*.mid"))
    assert len(files) == 5 and len(sorted(tmp_path.glob("riff_*.txt"))) == 5
    assert r.output.count("bars,") == 5 and "range" in r.output
    run_line, *riff_lines = r.output.splitlines()
    assert run_line.startswith(f"run {run_dir} (last.pt")  # the summary names the run it used
    assert all(line.split(": ")[1].split(" bars")[0] in ("1", "2") for line in riff_lines)
    lo, hi = min(TUNINGS["drop-d"]), max(TUNINGS["drop-d"]) + MAX_FRET
    for f in files:
        s = symusic.Score(str(f))
        assert len(s.tracks) == 1 and s.tracks[0].program == 27
        assert len(s.tempos) >= 1 and abs(s.tempos[0].qpm - 90) < 0.5
        assert len(s.time_signatures) >= 1
        assert s.end() <= end_of_bar(s, 2)  # --bars 2
        assert all(lo <= n.pitch <= hi for n in s.tracks[0].notes)


def test_wav_without_any_synth_is_one_clear_error(run_dir, tmp_path, monkeypatch):
    import guitarformer.render.soundfont as soundfont

    monkeypatch.setenv("PATH", str(tmp_path))  # no fluidsynth on this PATH
    monkeypatch.setattr(soundfont, "available", lambda: False)  # and soundfile as if it could not load
    from guitarformer.cli import main

    r = CliRunner().invoke(main, ["sample", "--run", str(run_dir), "--out", str(tmp_path / "x.mid"),
                                  "--wav", str(tmp_path / "x.wav")])
    assert r.exit_code != 0
    assert "soundfile" in r.output and "fix:" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "x.mid").exists()  # failed before generating anything


def _sample_wav(run_dir, tmp_path):
    """`sample --wav x.wav` of a short riff: the WAV's frames (one channel's worth per frame) and its rate."""
    import wave

    import numpy as np

    from guitarformer.cli import main

    wav = tmp_path / "x.wav"
    r = CliRunner().invoke(main, ["sample", "--run", str(run_dir), "--out", str(tmp_path / "x.mid"),
                                  "--wav", str(wav), "--max-new-tokens", "120", "--seed", "2"])
    assert r.exit_code == 0, r.output
    with wave.open(str(wav)) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).reshape(w.getnframes(), -1)
        return frames, w.getframerate()


def test_wav_with_nothing_installed(run_dir, tmp_path, monkeypatch):
    """No fluidsynth program, no system soundfont: --wav plays the bundled soundfont in process and writes the
    riff's length of sound (its last onset heard, at most the release and the half-second tail after its end)."""
    import numpy as np

    from guitarformer.render.soundfont import RELEASE_SECONDS

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("GUITARFORMER_SOUNDFONT", raising=False)
    frames, rate = _sample_wav(run_dir, tmp_path)
    seconds = len(frames) / rate
    notes = [n for t in symusic.Score(str(tmp_path / "x.mid"), ttype="second").tracks for n in t.notes]
    assert notes, "the riff has notes"
    assert max(n.time for n in notes) < seconds <= max(n.time + n.duration for n in notes) + RELEASE_SECONDS + 0.5
    assert np.sqrt(np.mean(np.square(frames / 32768.0))) > 0.05  # normal loudness, not silence


@pytest.mark.parametrize("fixture", ["drop_d_capo.gp5", "riff_piano_program.mid", "drop_d_capo.gp3"])
def test_tab_command_reads_midi_and_guitar_pro(fixture):
    from guitarformer.cli import main

    r = CliRunner().invoke(main, ["tab", str(FIXTURES / fixture)])
    assert r.exit_code == 0, r.output
    assert r.output.count("|") > 6 and any(ch.isdigit() for ch in r.output)


def test_wav_with_fluidsynth_renders_audio(run_dir, tmp_path, monkeypatch):
    """Where the in-process synthesizer cannot run (no soundfile) but FluidSynth and a GM soundfont are installed,
    --wav uses them."""
    import shutil

    import numpy as np

    import guitarformer.render.soundfont as soundfont
    from guitarformer.errors import GuitarformerError
    from guitarformer.render.audio import find_synth

    monkeypatch.setattr(soundfont, "available", lambda: False)
    if shutil.which("fluidsynth") is None:
        pytest.skip("fluidsynth is not installed")
    try:
        assert find_synth().program is not None
    except GuitarformerError:
        pytest.skip("no General MIDI soundfont found")
    frames, rate = _sample_wav(run_dir, tmp_path)
    assert len(frames) > rate // 4  # at least a quarter of a second
    assert np.abs(frames).max() > 0  # not silence


def test_sample_tab_in_a_requested_position(run_dir, tmp_path):
    """--position reaches the fingering of the written tab and GP5: same notes, the hand near that fret. The
    fingering weighs the position against moving the hand (so not every note sits in the window), and an untrained
    model's riffs jump about; so over several riffs: none is fingered farther from the window than without
    --position (the window's cost only adds to the fingering's), and overall the notes are nearer it and more of
    them as near as any string allows."""
    from guitarformer.readers import read_guitar

    def away(x):  # frets outside 9..12; an open string counts 1 that high up
        return 1 if x == 0 else max(9 - x, 0, x - 12)

    riffs = {}
    for pos in (None, 9):
        d = tmp_path / f"p{pos}"
        extra = [] if pos is None else ["--position", pos]
        r = sample_cli("--run", run_dir, "--out", d / "riff.mid", "--seed", 10, "--temperature", 1.2,
                       "--num-samples", 6, "--gp", d / "riff.gp5", *extra, cwd=tmp_path)
        assert r.exit_code == 0, r.output
        riffs[pos] = [read_guitar(f)[0] for f in sorted(d.glob("riff_*.gp5"))]
    assert len(riffs[9]) == len(riffs[None]) == 6
    total = {None: 0, 9: 0}
    nearest = {None: 0, 9: 0}
    for here, free in zip(riffs[9], riffs[None]):
        pitches = [n.pitch for n in here.track.notes]
        assert pitches == [n.pitch for n in free.track.notes] and pitches  # the same riff
        best = [min(away(p - o) for o in here.tuning if 0 <= p - o <= MAX_FRET) for p in pitches]
        for pos, gs in ((9, here), (None, free)):
            frets = [f for _, f in gs.frets]
            total[pos] += sum(map(away, frets))
            nearest[pos] += sum(away(f) == b for f, b in zip(frets, best))
        assert sum(away(f) for _, f in here.frets) <= sum(away(f) for _, f in free.frets), (here.frets, free.frets)
    assert total[9] < total[None] and nearest[9] > nearest[None], (total, nearest)


@pytest.mark.parametrize("tokenizer", ["REMI", "TabREMI"])
def test_the_bars_asked_are_the_bars_written(tokenizer):
    """A model may end a riff after one note (EOS is likely for an untrained one); with `bars` the constraint holds
    the end back until the last asked bar is open and has a note, so `--bars 4` gives four bars of music."""
    tok = build_tokenizer(DataConfig(tokenizer=tokenizer))
    cfg = Config()
    model = tiny(tok, "decoder", block_size=256)
    eos, bar = special_ids(tok)["eos"], tok["Bar_None"]
    with torch.no_grad():  # make the untrained model want to end: EOS is its likeliest token everywhere
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.clone())
        model.lm_head.weight[eos] += 5 * model.lm_head.weight.abs().max()
    riffs = generate_riffs(model, tok, cfg, SamplingParams(200, top_p=0.95, max_bars=4), Draws(4, 2))
    for r in riffs:
        bars = [i for i, t in enumerate(r.ids) if t == bar]
        assert len(bars) == 4, [tok[t] for t in r.ids]
        assert any(tok[t].startswith("Pitch_") for t in r.ids[bars[-1]:])  # the last bar holds a note


def test_a_grammar_is_built_once_per_tokenizer():
    """Grammar.of: a constraint reuses its tokenizer's read-only tables; another tokenizer (even an equal one) and
    another device get their own, and what is reused is what a fresh build gives."""
    from guitarformer.generation.constraint.grammar import Grammar

    tok, other = build_tokenizer(DataConfig(tokenizer="REMI")), build_tokenizer(DataConfig(tokenizer="REMI"))
    g = GuitarConstraint(tok).grammar
    assert Grammar.of(tok) is g and GuitarConstraint(tok).grammar is g
    assert Grammar.of(other) is not g
    assert torch.equal(Grammar(tok).allowed, g.allowed) and Grammar(tok).types == g.types


@pytest.mark.slow
@pytest.mark.usefixtures("cxx")
def test_sample_compile_writes_the_riffs_the_eager_steps_write(tmp_path, monkeypatch):
    """`sample --compile` (generation/decode/compiled.py, through the app layer): the same riff, file for file, from the
    shipped model (a trained model's peaked choices: the compiled kernels' last bits never flip a draw)."""
    from guitarformer.cli import main
    from guitarformer.generation.decode.compiled import CompiledStep
    from guitarformer.runs.rundir import has_pretrained

    if not has_pretrained():
        pytest.skip("no shipped model in this checkout")
    steps = []
    step = CompiledStep.__call__
    monkeypatch.setattr(CompiledStep, "__call__", lambda self, *a: steps.append(1) or step(self, *a))
    files = []
    for flag in ([], ["--compile"]):
        out = tmp_path / f"riff{len(files)}"
        r = CliRunner().invoke(main, ["sample", "--run", "pretrained", "--bars", "4", "--seed", "5", "--out",
                                      f"{out}.mid", "--tab", f"{out}.txt", "--device", "cpu", *flag])
        assert r.exit_code == 0, r.output
        files.append((Path(f"{out}.mid").read_bytes(), Path(f"{out}.txt").read_text()))
        assert bool(steps) == bool(flag)  # the compiled step drew the second riff, and only that one
    assert files[0] == files[1]


def test_compile_leaves_batches_of_more_rows_to_the_eager_cache(monkeypatch):
    """From COMPILED_ROWS + 1 rows the eager step is as fast as a compiled one (and each batch shape would be
    another compile), so `compile` decodes them eagerly (the same tokens as without it)."""
    from guitarformer.generation.decode import engine

    tok = build_tokenizer(DataConfig(tokenizer="REMI"))
    model = tiny(tok, "decoder-copy", block_size=48)
    made = []
    monkeypatch.setattr(engine, "CompiledStep", lambda *a: made.append(a) or pytest.fail("compiled"))
    ids = torch.tensor([[special_ids(tok)["bos"], tok["Bar_None"]]] * (engine.COMPILED_ROWS + 1))
    greedy = SamplingParams(20, temperature=0)
    out = generate(model, ids, replace(greedy, compile=True))
    assert not made and torch.equal(out, generate(model, ids, greedy))
