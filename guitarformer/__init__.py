"""guitarformer: guitar music generation with Transformers (tabs and MIDI in, riffs out).

The public API, in the order the data flows::

    import guitarformer as gf

    parts = gf.read_guitar("song.gp5")                  # [GuitarScore]: one per guitar part
    parts = gf.read_guitar_contained("upload.gp")       # the same under size, time and memory limits (untrusted files)
    song = gf.read_song("band.gp5")                     # Song: every part (guitars, bass, drums) on one bar grid
    frets = gf.fret(parts[0].track.notes, parts[0].tuning)  # a (string, fret) per note, where the file has none
    gf.write_ascii_tab(parts[0], "song.txt")            # also write_midi, write_gp5
    run = gf.load_run("runs/20261122-101500")         # Run: model, tokenizer, cfg, its folder and what it learned
    riffs = gf.generate_riffs(run.model, run.tokenizer, run.cfg, gf.SamplingParams(max_bars=8), gf.Draws(num=4, seed=0))
    model = gf.build_model(run.cfg.model)              # a fresh Decoder or EncoderDecoder
    ids = gf.generate(model, [[1]], gf.SamplingParams(max_new_tokens=64))  # token ids, KV-cached

The commands, as the CLI runs them (guitarformer.app: one function per command over a request)::

    res = gf.sample(gf.SampleRequest.of(bars=8, key="E:minor", outputs=gf.Outputs(midi="riff.mid")), run)
    res = gf.infill(gf.InfillRequest("song.gp5", bars=(5, 8), outputs=gf.Outputs(gp="new.gp5")), run)
    print(gf.tab(gf.TabRequest("song.gp5")).text)
    ds = gf.prepare(gf.PrepareRequest(["my-tabs"], out="data/prepared/mine")).path
    res = gf.train(gf.TrainRequest(data=ds, max_steps=200))   # also gf.evaluate(gf.EvalRequest(...)), gf.info

Each name is imported on first use, so `import guitarformer` stays cheap (no torch until a model is needed).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any, Callable

__version__ = "0.1.0"

IGNORE_INDEX = -100  # target id the loss skips (padding, the source half of a pair)

_API = {
    "GuitarScore": "guitarformer.music.score",
    "Technique": "guitarformer.music.score",
    "TUNINGS": "guitarformer.music.guitar",
    "read_guitar": "guitarformer.readers",
    "read_song": "guitarformer.readers",
    "read_song_contained": "guitarformer.readers.contained",
    "Song": "guitarformer.music.song",
    "read_guitar_contained": "guitarformer.readers.contained",
    "fret": "guitarformer.fingering",
    "write_midi": "guitarformer.render.midi",
    "write_ascii_tab": "guitarformer.render.ascii_tab",
    "render_ascii_tab": "guitarformer.render.ascii_tab",
    "write_gp5": "guitarformer.render.gp5",
    "build_model": "guitarformer.models",
    "load_run": "guitarformer.runs",
    "generate": "guitarformer.generation.decode.engine",
    "SamplingParams": "guitarformer.generation.decode.sampling",
    "Run": "guitarformer.runs",
    "run_info": "guitarformer.app",
    "Outputs": "guitarformer.app",
    "SampleRequest": "guitarformer.app",
    "InfillRequest": "guitarformer.app",
    "TabRequest": "guitarformer.app",
    "sample": "guitarformer.app",
    "infill": "guitarformer.app",
    "tab": "guitarformer.app",
    "read_user_file": "guitarformer.app",
    "write_score": "guitarformer.app",
    "PrepareRequest": "guitarformer.app",
    "TrainRequest": "guitarformer.app",
    "EvalRequest": "guitarformer.app",
    "InfoRequest": "guitarformer.app",
    "prepare": "guitarformer.app",
    "train": "guitarformer.app",
    "evaluate": "guitarformer.app",
    "info": "guitarformer.app",
    "generate_riffs": "guitarformer.compose.riffs",
    "Draws": "guitarformer.compose.riffs",
    "RiffSpec": "guitarformer.compose.riffs",
    "Controls": "guitarformer.vocab.controls",
    "GuitarConstraint": "guitarformer.generation.constraint.guitar",
    "load_config": "guitarformer.config",
    "GuitarformerError": "guitarformer.errors",
}

__all__ = sorted(_API) + ["IGNORE_INDEX", "__version__"]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from guitarformer.app import (
        EvalRequest,
        InfillRequest,
        InfoRequest,
        Outputs,
        PrepareRequest,
        SampleRequest,
        TabRequest,
        TrainRequest,
        evaluate,
        infill,
        info,
        prepare,
        read_user_file,
        run_info,
        sample,
        tab,
        train,
        write_score,
    )
    from guitarformer.config import load_config
    from guitarformer.runs import Run, load_run
    from guitarformer.errors import GuitarformerError
    from guitarformer.fingering import fret
    from guitarformer.generation.constraint.guitar import GuitarConstraint
    from guitarformer.generation.decode.engine import generate
    from guitarformer.vocab.controls import Controls
    from guitarformer.compose.riffs import Draws, RiffSpec, generate_riffs
    from guitarformer.generation.decode.sampling import SamplingParams
    from guitarformer.models import build_model
    from guitarformer.music.guitar import TUNINGS
    from guitarformer.music.score import GuitarScore, Technique
    from guitarformer.music.song import Song
    from guitarformer.readers import read_guitar, read_song
    from guitarformer.readers.contained import read_guitar_contained, read_song_contained
    from guitarformer.render.ascii_tab import render_ascii_tab, write_ascii_tab
    from guitarformer.render.gp5 import write_gp5
    from guitarformer.render.midi import write_midi


def lazy_names(package: str, api: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A package's module `__getattr__` (PEP 562) importing each of its `api` names ({name: module}) on first use into
    `namespace` (the package's globals), so later lookups skip it; here and guitarformer.app.

    A name may be its module's own name (guitarformer.app.sample's `sample`): importing that submodule binds the
    submodule to the package under the name, which would then hide the function from `from package import name`.
    The package's module class keeps the function there instead, as an eager `from .sample import sample` did."""

    class LazyPackage(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if isinstance(value, types.ModuleType) and api.get(name) == value.__name__ and hasattr(value, name):
                value = getattr(value, name)  # the submodule `name` was just imported: its export stays the name
            super().__setattr__(name, value)

    sys.modules[package].__class__ = LazyPackage

    def __getattr__(name: str) -> Any:
        module = api.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__


__getattr__ = lazy_names(__name__, _API, globals())


def __dir__() -> list[str]:
    return __all__
