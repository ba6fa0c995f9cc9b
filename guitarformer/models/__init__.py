"""The two model families, `build_model(cfg)`, which picks one from a ModelConfig or a plain dict, and the one
interface that training, likelihood and sampling use for either (`kind_of`, models/kinds.py)."""

from __future__ import annotations

from torch import nn

from guitarformer.config import ModelConfig
from guitarformer.models.decoder import Decoder
from guitarformer.models.encoder_decoder import EncoderDecoder
from guitarformer.models.kinds import Inputs, Prompt, kind_of
from guitarformer.models.layers import KVCache, as_model_config

__all__ = ["Decoder", "EncoderDecoder", "Inputs", "KVCache", "Prompt", "build_model", "kind_of"]


def build_model(cfg: ModelConfig | dict) -> nn.Module:
    """Decoder for kind "decoder", EncoderDecoder for kind "encoder_decoder"; anything else raises ValueError."""
    mc = as_model_config(cfg)
    return kind_of(mc).model_class(mc)
