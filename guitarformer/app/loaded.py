"""What a run (runs/run.py) can be asked for.

`run_info` tells a caller (the studio's form, `sample --help` in a script) which options this run
honours and with which values, before anything is sampled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from guitarformer.vocab.controls import option_controls
from guitarformer.vocab.infill import has_fill_tokens
from guitarformer.vocab.seen import Seen
from guitarformer.vocab.tab_tokens import has_controls, is_tab_tokenizer
from guitarformer.vocab.tokenization import bar_ids
from guitarformer.vocab.parts import band_roles
from guitarformer.music.guitar import GUITAR_PROGRAMS, TUNINGS
from guitarformer.runs import Run
from guitarformer.runs.run import seen_of_run

NO_CONTROLS = "this run was trained without control tokens (prepare with --set data.controls=true)"


@dataclass
class OptionInfo:
    """Whether a run honours an option, why not, and the values it knows (None: any value of the option's type)."""

    available: bool
    reason: str | None = None
    values: list[str] | None = None


@dataclass
class RunInfo:
    run_dir: Path
    kind: str
    step: int | None
    val_loss: float | None
    can_infill: bool
    tokenizer: str
    options: dict[str, OptionInfo]
    init: str | None = None  # the run it was fine-tuned from (train --init), if any


def _vocab_values(vocab: dict[str, int], token_type: str) -> list[str]:
    return sorted(t.split("_", 1)[1] for t in vocab if t.startswith(token_type + "_"))


def _control_options(tokenizer, seen: Seen) -> dict[str, OptionInfo]:
    """Each registered control's option and the values the run offers (`Control.offered`: those its training data
    held; the hand position: every one, as the sampler holds it)."""
    if not has_controls(tokenizer):
        return {name: OptionInfo(False, NO_CONTROLS) for name in option_controls()}
    out = {}
    for name, ctrl in option_controls().items():
        values = ctrl.offered(seen)
        out[name] = OptionInfo(True, None, values) if values else \
            OptionInfo(False, f"this run learned no {name.replace('_', ' ')} values ({seen.source})")
    return out


def run_info(loaded: Run) -> RunInfo:
    """What `loaded` is and which `sample` options it honours (OptionInfo per option)."""
    tok = loaded.tokenizer
    seen = loaded.seen or seen_of_run(loaded.dir, loaded.cfg, tok)
    meters = (seen.known("TimeSig") if seen.counts.get("TimeSig") else _vocab_values(tok.vocab, "TimeSig")) \
        if bar_ids(tok) else []
    tunings = seen.known("Tuning") if seen.counts.get("Tuning") else sorted(TUNINGS)
    always = OptionInfo(True)
    options = {"bars": always, "temperature": always, "top_p": always, "seed": always,
               "tempo": OptionInfo(True, None, None),  # any number in the range seen (conditioning.check_seen)
               "tuning": OptionInfo(True, None, tunings),
               # auto, none or letters (compose/form.py): any run (auto is none where its tunes are not at hand)
               "form": OptionInfo(True, None, None),
               # the sound the file names, not a control: the General MIDI guitars
               "program": OptionInfo(True, None, [str(p) for p in GUITAR_PROGRAMS]),
               "time_signature": OptionInfo(True, None, meters) if meters else
               OptionInfo(False, f"this run's tokens ({type(tok).__name__}) have no time signatures"),
               # the band (vocab/parts.py): the parts a run that learned it writes together
               "parts": OptionInfo(True, None, band_roles(tok)) if band_roles(tok) else
               OptionInfo(False, "this run's tokens carry one part (a band run writes guitar, bass and drums)"),
               **_control_options(tok, seen)}
    can_infill = is_tab_tokenizer(tok) and has_fill_tokens(tok) and loaded.cfg.data.infill > 0
    return RunInfo(loaded.run_dir, loaded.kind, loaded.step, loaded.val_loss, can_infill, type(tok).__name__,
                   options, loaded.cfg.train.init)


# How a guitarist names what a run learned, per option and value (the rest as the values are written)
_PLAIN = {"polyphony": {"single": "single notes", "dyads": "dyads", "chords": "chords"},
          "palm_mute": {"most": "palm mutes", "some": "palm mutes"},
          "tuning": {"standard": "standard tuning", "drop-d": "drop D", "drop-c": "drop C",
                     "seven-string": "7-string", "half-step-down": "half a step down", "d-standard": "D standard",
                     "open-g": "open G", "open-d": "open D", "dadgad": "DADGAD"}}


def plain_words(loaded: Run, info: RunInfo) -> str:
    """What a run plays, in a guitarist's words and without a path: which model, its styles, tunings and textures,
    and whether it rewrites bars ("The shipped model: rock, classical, reel, jig, ...; standard tuning, drop D;
    single notes, dyads, chords, palm mutes; rewrites chosen bars")."""
    shipped = loaded.dir.is_shipped
    who = "The shipped model" if shipped else f"Your run {loaded.run_dir.name}"
    def values(option: str) -> list[str]:
        o = info.options.get(option)
        return list(o.values or []) if o is not None and o.available else []
    plain = lambda option: [_PLAIN.get(option, {}).get(v, v) for v in values(option)]  # noqa: E731
    groups = [", ".join(values("style")), ", ".join(dict.fromkeys(plain("tuning"))),
              ", ".join(dict.fromkeys([*plain("polyphony"), *(p for p in plain("palm_mute") if p != "none")]))]
    return f"{who}: " + "; ".join(g for g in groups if g) + ("; rewrites chosen bars" if info.can_infill else "")
