"""The two model families and `build_model(cfg)`, which picks one from a ModelConfig or a plain dict."""

from __future__ import annotations

from torch import nn

from guitarformer.config import ModelConfig
from guitarformer.models.decoder import Decoder
from guitarformer.models.encoder_decoder import EncoderDecoder
from guitarformer.models.layers import KVCache, as_model_config

__all__ = ["Decoder", "EncoderDecoder", "KVCache", "build_model"]


def build_model(cfg: ModelConfig | dict) -> nn.Module:
    """Decoder for kind "decoder", EncoderDecoder for kind "encoder_decoder"; anything else raises ValueError."""
    mc = as_model_config(cfg)
    if mc.kind == "decoder":
        return Decoder(mc)
    if mc.kind == "encoder_decoder":
        return EncoderDecoder(mc)
    raise ValueError(f"unknown model kind {mc.kind!r}: use decoder or encoder_decoder")
