"""metrics: likelihood of a trained model on a prepared dataset split (NLL, perplexity, accuracy)."""

from __future__ import annotations

from pathlib import Path


def evaluate_run(run_dir: Path | None, data: Path | None, split: str = "test", device: str = "auto") -> dict:
    """NLL per token, perplexity and token accuracy of a run's best checkpoint on a dataset split."""
    import torch

    from guitarformer.errors import GuitarformerError
    from guitarformer.sample import load_run
    from guitarformer.train import Data, evaluate, resolve_device, resolve_dtype

    dev = resolve_device(device)
    model, tokenizer, cfg = load_run(run_dir, None, str(dev))
    dataset = Path(data) if data else Path(cfg.data.dataset)
    from guitarformer.data.prepare import load_meta

    meta = load_meta(dataset)
    if meta["tokens"].get(split, 0) < 2:
        raise GuitarformerError(f"the {split} split of {dataset} is empty", "evaluate on --split val, or prepare more files")
    d = Data(cfg, dataset)
    from guitarformer.data.dataset import DecoderWindows, Seq2SeqPairs, TokenSplit
    from guitarformer.data.tokenization import bar_ids

    part = TokenSplit(dataset, split)
    if cfg.model.kind == "decoder":
        d.val = DecoderWindows(part, cfg.model.block_size)
    else:
        d.val = Seq2SeqPairs(part, cfg.model.src_block_size, cfg.model.block_size, bar_ids(tokenizer),
                             tokenizer["BOS_None"], tokenizer.pad_token_id)
    with torch.no_grad():
        res = evaluate(model, d, cfg.model.kind, dev, resolve_dtype(cfg.train.dtype, dev), cfg.train.batch_size)
    return {"split": split, "dataset": str(dataset), "nll": res["loss"], "ppl": res["ppl"],
            "accuracy": res["accuracy"], "tokens": res["tokens"]}
