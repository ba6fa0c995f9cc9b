"""models/kinds.py: one interface for both model kinds (batches -> loss, prompts -> model input), and the one NLL loop."""

from __future__ import annotations

import pytest
import torch

from guitarformer import IGNORE_INDEX
from guitarformer.models import build_model, kind_of
from guitarformer.models.kinds import Prompt, KINDS, DecoderKind, EncoderDecoderKind
from guitarformer.models.loss import nll, token_stats
from test_models import tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _pairs():
    """Two source/target pairs as Seq2SeqPairs yields them: left-aligned sources with a mask, targets after BOS."""
    src = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0]])
    mask = torch.tensor([[True, True, True, True], [True, True, True, False]])
    y = torch.tensor([[10, 11, 12], [13, 14, IGNORE_INDEX]])
    tgt = torch.tensor([[1, 10, 11], [1, 13, 14]])
    return src, mask, tgt, y


def test_kind_of_reads_models_configs_and_names():
    for name, kind in KINDS.items():
        model = build_model(tiny(name))
        assert kind_of(model) is kind is kind_of(model.config) is kind_of(name)
        assert isinstance(model, kind.model_class)
    with pytest.raises(ValueError, match="unknown model kind"):
        kind_of("lstm")


def test_decoder_continuation_scores_the_target_after_its_source():
    x = DecoderKind().continuation(*_pairs())
    assert x.args[0].tolist() == [[1, 5, 6, 7, 10, 11], [1, 8, 9, 13, 0, 0]]
    # position len(src)-1 predicts the first target token; sources and padding are not scored
    assert x.targets.tolist() == [[-100, -100, -100, 10, 11, 12], [-100, -100, 13, 14, -100, -100]]


def test_both_kinds_score_the_same_target_tokens():
    counts = []
    for name in KINDS:
        torch.manual_seed(0)
        model = build_model(tiny(name)).eval()
        r = nll(model, [kind_of(name).continuation(*_pairs())], "cpu")
        counts.append(r["tokens"])
        assert r["nll"] > 0
    assert counts == [5, 5]


def test_nll_matches_the_models_own_loss_and_restores_training_mode():
    torch.manual_seed(0)
    model = build_model(tiny("encoder_decoder"))
    batch = EncoderDecoderKind().inputs(_pairs())
    model.eval()
    _, loss = batch(model)
    model.train()
    r = nll(model, [batch, batch], "cpu")
    assert model.training
    assert r["tokens"] == 10 and r["nll"] == pytest.approx(loss.item(), rel=1e-5)


def test_prompts_become_each_kinds_input_and_its_stepper_matches_forward():
    torch.manual_seed(0)
    dec, encdec = build_model(tiny("decoder")).eval(), build_model(tiny("encoder_decoder")).eval()
    context, head = [1, 5, 6, 7, 8], [3]
    p = kind_of(dec).prompt(context, head, bos=1, num=2, keep_front=1)
    assert p.ids.tolist() == [[1, 5, 6, 7, 8, 3]] * 2 and p.src is None
    assert p.generate_kwargs() == {"keep_front": 1}
    assert torch.allclose(kind_of(dec).stepper(dec, p)(p.ids, None), dec(p.ids)[0])

    q = kind_of(encdec).prompt(context, head, bos=1, num=2, keep_front=1, src_block_size=3)
    assert q.src.tolist() == [[1, 7, 8]] * 2 and q.ids.tolist() == [[1, 3]] * 2  # first token kept, then the last
    assert q.history().tolist() == [[1, 7, 8, 1, 3]] * 2
    assert set(q.generate_kwargs()) == {"src", "src_key_mask"}
    want = encdec(q.src, q.ids, src_key_mask=q.src_key_mask)[0]
    encoded, real_encode = [], encdec.encode
    encdec.encode = lambda src, mask=None: encoded.append(src.shape[0]) or real_encode(src, mask)
    got = kind_of(encdec).stepper(encdec, q)(q.ids, None)  # rows of one source: encoded once
    assert torch.allclose(got, want, atol=1e-6)
    other = Prompt(q.ids, torch.tensor([[1, 7, 8], [1, 8, 7]]), q.src_key_mask)
    kind_of(encdec).stepper(encdec, other)
    assert encoded == [1, 2]
    assert kind_of(encdec).heard([1, 7, 8], [1, 3]) == [1, 7, 8, 1, 3]
    assert kind_of(dec).heard([], [1, 3]) == [1, 3]


def test_token_stats_leaves_ignored_targets_out():
    logits = torch.zeros(1, 3, 4)
    logits[0, 0, 2] = 5.0
    a, correct, count = token_stats(logits, torch.tensor([[2, IGNORE_INDEX, 1]]))
    assert count == 2 and correct == 1 and a > 0
