"""What a run shows while it trains: metrics.jsonl + TensorBoard scalars, and a sampled riff now and then."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams as hparams_summaries

from guitarformer.config import Config
from guitarformer.compose.riffs import generate_riff
from guitarformer.render.media import render_media
from guitarformer.runs import RunDir


class RunLog:
    """Rank 0's logs of a run: TensorBoard under tb/ and one JSON line per record in metrics.jsonl.

    `scalars("val", step, loss=..)` writes TensorBoard tags val/loss .. and the line {"step", "kind": "val", ..}.
    A resumed run appends to both (TensorBoard drops the events past the checkpoint's step). Without a run_dir
    (the other ranks of a DDP run) every method does nothing.
    """

    def __init__(self, run_dir: Path | None, resumed_at: int | None = None):
        self.writer, self.metrics, self.last_step = None, None, resumed_at or 0
        if run_dir is None:
            return
        rd = RunDir(run_dir)
        self.writer = SummaryWriter(str(rd.tb_dir), purge_step=resumed_at)
        self.metrics = open(rd.metrics_path, "a")
        if resumed_at is None:
            self.writer.add_text("config", "```\n" + rd.config_path.read_text() + "\n```", 0)

    def scalars(self, kind: str, step: int, extra: dict | None = None, **vals) -> None:
        """Scalars under `kind/`; `extra` goes to the JSON line only (labels, not numbers to plot)."""
        if self.writer is None:
            return
        self.last_step = max(self.last_step, step)
        for k, v in vals.items():
            self.writer.add_scalar(f"{kind}/{k}", v, step)
        self.metrics.write(json.dumps({"step": step, "kind": kind, **vals, **(extra or {})}) + "\n")
        self.metrics.flush()

    def text(self, tag: str, text: str, step: int) -> None:
        if self.writer is not None:
            self.writer.add_text(tag, text, step)

    def riff(self, model, tokenizer, cfg: Config, step: int, device) -> None:
        if self.writer is not None:
            log_riff(self.writer, model, tokenizer, cfg, step, device)

    def close(self, hparams: dict, results: dict) -> None:
        if self.writer is None:
            return
        # The hparams summaries go into the run's own event file (add_hparams would make them a run of their own
        # beside it), with the results as scalars at the last step.
        for summary in hparams_summaries(hparams, results):
            self.writer.file_writer.add_summary(summary)
        for k, v in results.items():
            self.writer.add_scalar(k, v, self.last_step)
        self.writer.close()
        self.metrics.close()


def log_riff(writer, model, tokenizer, cfg: Config, step: int, device) -> None:
    """A sampled riff in TensorBoard: piano roll image, audio and tab text. Never fails the run.

    The run goes on as if no riff was drawn: the global random streams (dropout's) and the model's train/eval mode
    are as they were, so a run that samples and one resumed from its checkpoint train alike.
    """
    was_training = model.training
    cuda = [torch.device(device)] if torch.device(device).type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=cuda):  # sampling code may draw from (or lazily seed) the global RNG
            riff = generate_riff(model, tokenizer, cfg, device, seed=step,
                                 max_new_tokens=min(256, cfg.model.block_size))
        media = render_media(riff.gs, riff.frets)
        writer.add_image("sample/piano_roll", media["piano_roll"], step, dataformats="HW")
        if media.get("audio") is not None:
            writer.add_audio("sample/audio", media["audio"], step, sample_rate=media["sample_rate"])
        writer.add_text("sample/tab", "```\n" + media["tab"] + "\n```", step)
    except Exception as e:  # a sampling hiccup must not cost a training run
        writer.add_text("sample/error", f"could not render a sample: {type(e).__name__}: {e}", step)
    finally:
        model.train(was_training)
