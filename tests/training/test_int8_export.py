"""A model shipped beside another as int8 (runs/checkpoint.py `quantize_int8`): a quarter of float32's bytes,
loaded back as float32 through the same `load_checkpoint`, its logits close to the float model's."""

from __future__ import annotations

import torch

from guitarformer.config import ModelConfig
from guitarformer.models import build_model
from guitarformer.runs.checkpoint import INT8_SCALE, load_checkpoint, quantize_int8, save_checkpoint


def test_int8_weights_load_back_as_float_and_predict_alike(tmp_path):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=300, block_size=64, n_layer=2, n_head=2, n_embd=64, dropout=0.0)
    model = build_model(cfg).eval()
    weights = model.state_dict()
    q = quantize_int8(weights)
    assert all(q[k].dtype == torch.int8 for k in weights if weights[k].dim() >= 2)
    assert sum(k.endswith(INT8_SCALE) for k in q) == sum(w.dim() >= 2 for w in weights.values())
    stored = sum(t.numel() * t.element_size() for t in q.values())
    assert stored < 0.3 * sum(t.numel() * 4 for t in weights.values())
    save_checkpoint(tmp_path / "best.pt", {"model": q, "config": {"model": {}}})
    back = load_checkpoint(tmp_path / "best.pt")["model"]
    assert set(back) == set(weights) and all(back[k].dtype == torch.float32 for k in back)
    twin = build_model(cfg).eval()
    twin.load_state_dict(back)
    x = torch.randint(0, 300, (2, 32))
    with torch.no_grad():
        a, b = (torch.log_softmax(m(x)[0], -1) for m in (model, twin))
    assert float((a - b).abs().mean()) < 0.02
