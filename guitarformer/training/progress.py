"""What a run shows while it trains: metrics.jsonl + TensorBoard scalars, and a sampled riff now and then."""

from __future__ import annotations

from guitarformer.config import Config
from guitarformer.generation.riffs import generate_riff
from guitarformer.render.audio import render_media


def log_riff(writer, model, tokenizer, cfg: Config, step: int, device) -> None:
    """A sampled riff in TensorBoard: piano roll image, audio and tab text. Never fails the run."""
    try:
        riff = generate_riff(model, tokenizer, cfg, device, seed=step, max_new_tokens=min(256, cfg.model.block_size))
        media = render_media(riff.gs, riff.frets)
        writer.add_image("sample/piano_roll", media["piano_roll"], step, dataformats="HW")
        if media.get("audio") is not None:
            writer.add_audio("sample/audio", media["audio"], step, sample_rate=media["sample_rate"])
        writer.add_text("sample/tab", "```\n" + media["tab"] + "\n```", step)
    except Exception as e:  # a sampling hiccup must not cost a training run
        writer.add_text("sample/error", f"could not render a sample: {type(e).__name__}: {e}", step)
