"""A one-token decoding step captured as a CUDA graph: one replay per token instead of a kernel launch (and the
Python around it) per op, which is what a batch-1 step costs on a GPU.

The step runs against a static KV cache (models.layers.KVCache with static=True): every tensor it reads or writes
keeps its address and shape from one token to the next, and the position to write lives on the device, so the
same graph serves every step. The model's own forward is what is captured: there is no second decoding path.
"""

from __future__ import annotations

import torch
from torch import Tensor

from guitarformer.models.kinds import Step
from guitarformer.models.layers import KVCache


class CapturedStep:
    """`step(tokens (B, 1), cache) -> logits (B, 1, V)` replayed from a CUDA graph.

    Capture after the prompt has filled `cache` (an eager step allocates its buffers). Each call copies the tokens
    into the graph's input, replays it (the graph advances the device position) and advances the host count,
    which a replay cannot do. The logits returned are the graph's output buffer: read them before the next call.
    The cache may be `reset()` and refilled eagerly (a sliding window): the graph keeps pointing at its buffers.
    """

    def __init__(self, step: Step, cache: KVCache, batch_size: int, device: torch.device) -> None:
        if not cache.static or cache.pos is None:
            raise ValueError("a captured step needs a static KV cache (new_cache(..., static=True))")
        self.cache = cache
        self.tokens = torch.zeros(batch_size, 1, dtype=torch.long, device=device)
        self.graph = torch.cuda.CUDAGraph()
        pos, length = cache.pos.clone(), cache.length
        last = cache.last.clone() if cache.last is not None else None  # model.prev_token: the prompt's last token

        def rewind() -> None:  # what a warm-up or capture step wrote on the side of the cache it reads back
            cache.pos.copy_(pos)
            if last is not None:
                cache.last.copy_(last)

        # Warm-up on a side stream (cuBLAS workspaces, the allocator), as torch.cuda.graphs asks. The warm-up steps
        # write keys/values at the next position, which the first real step overwrites before anything reads them.
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                step(self.tokens, cache)
                rewind()
        torch.cuda.current_stream(device).wait_stream(side)
        with torch.cuda.graph(self.graph):
            self.logits: Tensor = step(self.tokens, cache)  # (B, 1, V)
        rewind()
        cache.length = length  # the Python side ran once per warm-up step and once at capture

    def __call__(self, tokens: Tensor, cache: KVCache) -> Tensor:
        if cache is not self.cache:
            raise ValueError("a captured step replays against the cache it was captured with")
        self.tokens.copy_(tokens)
        self.graph.replay()
        cache.length += tokens.shape[1]  # the graph advanced cache.pos on the device
        return self.logits
