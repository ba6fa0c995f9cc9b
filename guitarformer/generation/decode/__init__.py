"""The decoding loop: a model and a prompt in, token ids out. engine.py (`generate`, the step loop with its KV cache
and the constraint's mask), sampling.py (`SamplingParams`, `sample_next`: filters and classifier-free guidance),
captured.py and compiled.py (CUDA-graph captured and torch.compile'd steps)."""
