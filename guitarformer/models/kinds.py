"""One interface for both model kinds: how a batch becomes a loss, how a prompt becomes the model's input.

Training, likelihood, sampling and infilling call `kind_of(model or config)` and use what it returns instead of
asking which kind they hold. Each kind knows:

- `inputs(batch)`: a batch in the layout its data source yields (decoder: x, y; encoder-decoder: src, src_mask,
  tgt, y) as `Inputs`, which calls a model (or its DDP / compiled wrapper) and gives (logits, loss).
- `continuation(src, src_mask, tgt, y)`: a batch of source/target pairs (data.dataset.Seq2SeqPairs) in its own
  layout, scoring the same target tokens either way (a decoder reads the source as its prefix).
- `prompt(context, head, bos)`: a prompt as `Prompt`, what generation.engine.generate takes: the ids it
  continues and, for an encoder-decoder, the source its encoder reads.
- `stepper(model, prompt)`: the decoding step, (new tokens, KV cache) -> logits, with the memory encoded once.

Shapes: B batch, S source tokens, T target tokens, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from guitarformer import IGNORE_INDEX
from guitarformer.config import ModelConfig
from guitarformer.errors import GuitarformerError
from guitarformer.models.decoder import PAD_ID, Decoder
from guitarformer.models.encoder_decoder import EncoderDecoder
from guitarformer.models.layers import KVCache, as_model_config

Step = Callable[[Tensor, KVCache | None], Tensor]  # (B, T) new tokens, cache -> logits (B, T, V)


@dataclass(frozen=True)
class Inputs:
    """A batch as one model kind takes it: `model(*args, targets=targets, **kwargs)`."""

    args: tuple[Tensor, ...]
    targets: Tensor | None = None
    kwargs: dict[str, Tensor] = field(default_factory=dict)

    def to(self, device) -> Inputs:
        """The same batch on `device` (non-blocking: pinned host tensors overlap the copy with compute)."""
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return Inputs(tuple(move(a) for a in self.args), None if self.targets is None else move(self.targets),
                      {k: move(v) for k, v in self.kwargs.items()})

    def __call__(self, model: nn.Module, with_loss: bool = True) -> tuple[Tensor, Tensor | None]:
        """(logits (B, T, V), mean cross-entropy or None) of `model` on this batch."""
        return model(*self.args, targets=self.targets if with_loss else None, **self.kwargs)


@dataclass(frozen=True)
class Prompt:
    """What the sampler continues: `ids` (B, T0); an encoder-decoder's encoder also reads `src` (B, S).

    `keep_front`: prompt tokens a sliding context keeps in front (BOS and the piece's controls). `pads` (B,): padding
    tokens in front of each row's ids (a prompt batched with its twin, `with_twin`; models.layers.KVCache)."""

    ids: Tensor
    src: Tensor | None = None
    src_key_mask: Tensor | None = None
    keep_front: int = 0
    pads: Tensor | None = None

    def with_twin(self, twin: Prompt) -> Prompt:
        """This prompt's B rows and then `twin`'s B rows as one batch (2B rows), each as the model would read it
        alone: the shorter ids padded in front (a decoder; each row keeps its own positions and never attends to the
        padding, and the padding is part of the kept front), or the shorter source padded behind, masked (an
        encoder-decoder, whose two prompts share their target ids). For classifier-free guidance, where `twin` is
        the same rows without what they are asked: one forward a step instead of two."""
        if self.src is not None or twin.src is not None:
            if self.src is None or twin.src is None or not torch.equal(self.ids, twin.ids):
                raise ValueError("an encoder-decoder's twin prompt differs in its source only")
            S = max(self.src.shape[1], twin.src.shape[1])
            src = torch.cat([F.pad(p.src, (0, S - p.src.shape[1]), value=PAD_ID) for p in (self, twin)])
            mask = torch.cat([F.pad(p.src_key_mask, (0, S - p.src.shape[1]), value=False) for p in (self, twin)])
            return Prompt(torch.cat([self.ids, twin.ids]), src, mask, self.keep_front)
        T = max(self.ids.shape[1], twin.ids.shape[1])
        pads = [T - p.ids.shape[1] for p in (self, twin)]
        ids = torch.cat([F.pad(p.ids, (k, 0), value=PAD_ID) for p, k in zip((self, twin), pads)])  # (2B, T)
        B = self.ids.shape[0]
        per_row = torch.tensor([pads[0]] * B + [pads[1]] * twin.ids.shape[0], device=ids.device)
        front = max(p.keep_front + k for p, k in zip((self, twin), pads))
        return Prompt(ids, keep_front=front, pads=per_row)

    def generate_kwargs(self) -> dict:
        """The keyword arguments of generation.engine.generate that carry this prompt beside its ids."""
        if self.src is None:
            return {"keep_front": self.keep_front}
        return {"src": self.src, "src_key_mask": self.src_key_mask}

    def history(self) -> Tensor:
        """(B, S + T0) every token the output continues in time: the constraint's state starts from these."""
        return self.ids if self.src is None else torch.cat([self.src, self.ids], 1)


def _rows(ids: Sequence[int], num: int, device) -> Tensor:
    return torch.tensor([list(ids)] * num, dtype=torch.long, device=device)


class DecoderKind:
    """A causal language model over one stream: the prompt is the context, the output continues it."""

    name = "decoder"
    model_class = Decoder
    streams = True  # reads one token stream: scored over a whole split, as training validates

    def inputs(self, batch: Sequence[Tensor]) -> Inputs:
        x, y = batch
        return Inputs((x,), y)

    def continuation(self, src: Tensor, src_mask: Tensor, tgt: Tensor, y: Tensor) -> Inputs:
        """The source tokens as the prefix, the target after them, only target positions scored (the
        teacher-forced `tgt` is the target itself shifted, so it is not needed here)."""
        rows, ys = [], []
        for s, m, t in zip(src, src_mask, y):
            s, t = s[m], t[t != IGNORE_INDEX]
            inp = torch.cat([s, t])[:-1]
            tt = torch.full_like(inp, IGNORE_INDEX)
            tt[len(s) - 1:] = t  # position len(s)-1 (the last source token) predicts the first target token
            rows.append(inp)
            ys.append(tt)
        L = max(len(r) for r in rows)
        x = torch.zeros(len(rows), L, dtype=torch.long)
        yy = torch.full((len(rows), L), IGNORE_INDEX, dtype=torch.long)
        for i, (r, t) in enumerate(zip(rows, ys)):  # right padding: causal attention never sees it
            x[i, : len(r)] = r
            yy[i, : len(t)] = t
        return Inputs((x,), yy)

    def continuation_lengths(self, cfg: ModelConfig, src: int | None, tgt: int | None) -> tuple[int, int]:
        """(source, target) tokens of a continuation pair: what fits the context, prefix and target together."""
        S = src or min(cfg.src_block_size, cfg.block_size // 2)
        T = tgt or cfg.block_size - S + 1
        if S + T - 1 > cfg.block_size:
            raise GuitarformerError(f"continuation source {S} + target {T} tokens exceed the decoder's context "
                                    f"{cfg.block_size}", "lower --cont-src / --cont-tgt")
        return S, T

    def prompt(self, context: Sequence[int], head: Sequence[int], bos: int, num: int = 1, device="cpu",
               keep_front: int = 0, src_block_size: int | None = None) -> Prompt:
        """`context` (which starts with BOS) and then `head` (the first tokens of the output) as one stream; the
        sampler's sliding window, not `src_block_size`, fits it to the context."""
        return Prompt(_rows([*context, *head], num, device), keep_front=keep_front)

    def prompt_room(self, cfg: ModelConfig) -> int:
        """Prompt tokens a continuation keeps: half the context, the other half for what it writes before the
        window slides."""
        return max(2, cfg.block_size // 2 - 1)

    def stepper(self, model: nn.Module, prompt: Prompt) -> Step:
        return lambda tokens, cache: model(tokens, cache=cache)[0]

    def heard(self, prompt_src: Sequence[int], row: Sequence[int]) -> list[int]:
        """The tokens a listener hears for an output row: the row holds the prompt already."""
        return list(row)


class EncoderDecoderKind:
    """An encoder over the source bars, a causal decoder writing the bars after them."""

    name = "encoder_decoder"
    model_class = EncoderDecoder
    streams = False  # reads source/target pairs: scored on continuation pairs only

    def inputs(self, batch: Sequence[Tensor]) -> Inputs:
        src, mask, tgt, y = batch
        return Inputs((src, tgt), y, {"src_key_mask": mask})

    def continuation(self, src: Tensor, src_mask: Tensor, tgt: Tensor, y: Tensor) -> Inputs:
        """Source through the encoder, the target teacher-forced after BOS: the pairs' own layout."""
        return self.inputs((src, src_mask, tgt, y))

    def continuation_lengths(self, cfg: ModelConfig, src: int | None, tgt: int | None) -> tuple[int, int]:
        """(source, target) tokens of a continuation pair: what the model was trained on."""
        S, T = src or cfg.src_block_size, tgt or cfg.block_size
        if S > cfg.src_block_size or T > cfg.block_size:
            raise GuitarformerError(f"continuation {S}/{T} tokens exceed the model's {cfg.src_block_size}/"
                                    f"{cfg.block_size}", "lower --cont-src / --cont-tgt")
        return S, T

    def prompt(self, context: Sequence[int], head: Sequence[int], bos: int, num: int = 1, device="cpu",
               keep_front: int = 0, src_block_size: int | None = None) -> Prompt:
        """`context` as the source (its last `src_block_size` tokens behind its first `keep_front`), and the target
        starting at BOS followed by `head`."""
        src = list(context)
        if src_block_size is not None and len(src) > src_block_size:
            src = src[:keep_front] + src[keep_front:][-(src_block_size - keep_front):]
        s = _rows(src, num, device)
        return Prompt(_rows([bos, *head], num, device), s, torch.ones_like(s, dtype=torch.bool))

    def prompt_room(self, cfg: ModelConfig) -> int:
        """Prompt tokens a continuation keeps: what the encoder reads."""
        return cfg.src_block_size

    def stepper(self, model: nn.Module, prompt: Prompt) -> Step:
        src, mask = prompt.src, prompt.src_key_mask
        if src.shape[0] > 1 and bool((src == src[:1]).all()) and (mask is None or bool((mask == mask[:1]).all())):
            # Rows of one source (infill's candidates, riffs continuing one file): encoded once, the same memory
            memory = model.encode(src[:1], None if mask is None else mask[:1]).repeat(src.shape[0], 1, 1)
        else:
            memory = model.encode(src, mask)  # once: every step attends to the same memory
        return lambda tokens, cache: model.decode(tokens, memory, mask, cache=cache, src=src)

    def heard(self, prompt_src: Sequence[int], row: Sequence[int]) -> list[int]:
        """The tokens a listener hears for an output row: the continuation comes after its source."""
        return [*prompt_src, *row]


ModelKind = DecoderKind | EncoderDecoderKind
KINDS: dict[str, ModelKind] = {k.name: k for k in (DecoderKind(), EncoderDecoderKind())}


def kind_of(what: nn.Module | ModelConfig | dict | str) -> ModelKind:
    """The kind of a model (its `config`), a ModelConfig, a config dict or a kind name."""
    name = what if isinstance(what, str) else (
        what.config.kind if isinstance(what, nn.Module) else as_model_config(what).kind)
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown model kind {name!r}: use {' or '.join(KINDS)}") from None
