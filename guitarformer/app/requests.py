"""What a command is asked: one dataclass per command (prepare, info, train, eval, sample, infill, tab) and the files
it writes.

The CLI parses its options into these, the studio's JSON API and the Python API build them directly; every check
the command needs happens in the app functions, so all three callers get the same clear errors. A field left None
takes its value from the run's config (`sample` section) or the input file, as the docstrings say.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from guitarformer.vocab.controls import Controls, option_controls
from guitarformer.errors import GuitarformerError
from guitarformer.music.score import GuitarScore
from guitarformer.music.song import Song

# Output slot -> the suffixes it may carry and the example its error names.
SUFFIXES = {"midi": ((".mid", ".midi"), "riff.mid"), "tab": ((".txt", ".tab"), "riff.txt"),
            "gp": ((".gp5",), "riff.gp5"), "wav": ((".wav",), "riff.wav")}
KIND_OF_SUFFIX = {s: kind for kind, (suffixes, _) in SUFFIXES.items() for s in suffixes}
NAMES = {"midi": "MIDI file", "tab": "ASCII tab", "gp": "Guitar Pro 5 file", "wav": "WAV file"}
ARTICLE = {"midi": "a", "tab": "an", "gp": "a", "wav": "a"}


def _path(p) -> Path | None:
    return None if p is None else Path(p)


@dataclass
class Outputs:
    """The files a command writes, by kind (None: not written). `labels` names each slot in errors (the CLI's
    option names, e.g. {"midi": "--out"}); by default the slot's own name."""

    midi: Path | None = None
    tab: Path | None = None
    gp: Path | None = None
    wav: Path | None = None
    labels: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.midi, self.tab, self.gp, self.wav = (_path(p) for p in (self.midi, self.tab, self.gp, self.wav))

    def label(self, kind: str) -> str:
        return self.labels.get(kind, kind)

    def items(self) -> list[tuple[str, Path]]:
        """(kind, path) of every file asked for, in the order midi, tab, gp, wav."""
        return [(f.name, getattr(self, f.name)) for f in fields(self)
                if f.name in SUFFIXES and getattr(self, f.name) is not None]

    def __bool__(self) -> bool:
        return bool(self.items())


@dataclass
class Sampling:
    """How the tokens are drawn, as asked; None takes the run's config `sample` section (generation/decode/sampling.py
    `SamplingParams.from_config`)."""

    max_new_tokens: int | None = None  # None: the run's sample.max_new_tokens (`sample`: raised to fit `bars`)
    temperature: float | None = None  # None: the run's sample.temperature
    top_k: int | None = None  # None: the run's sample.top_k (0 = off)
    top_p: float | None = None  # None: the run's sample.top_p (1 = off)
    # Classifier-free guidance on the piece's controls (style, key, ...): logits c + g (c - u), u read without them;
    # 0 off; None: GUIDANCE (app/sample.py) where piece controls are asked. `sample` only.
    guidance: float | None = None
    compile: bool = False  # CPU: the one-token step compiled (generation/decode/compiled.py): seconds once per process


SAMPLING = tuple(f.name for f in fields(Sampling))


def _split_options(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """`options` (one flat set of names, as the studio's JSON and scripts give them) as `cls`'s fields: the sampling
    options as its `sampling`, the control options (vocab/controls.py) as its `controls`, where it has them."""
    names = {f.name for f in fields(cls)}
    own = {k: v for k, v in options.items() if k in names}
    sampling = {k: options[k] for k in SAMPLING if k in options}
    controls = {k: options[k] for k in option_controls() if k in options}
    rest = set(options) - set(own) - set(sampling) - set(controls)
    if rest or (controls and "controls" not in names):
        raise TypeError(f"{cls.__name__} has no options {sorted(rest or controls)}")
    if sampling:
        own["sampling"] = Sampling(**sampling)
    if controls:
        own["controls"] = Controls(**controls)
    return own


@dataclass
class SampleRequest:
    """`sample`: riffs from a run, or the continuation of a file (`prompt`): the source (nothing, or a file to
    continue), the `controls` asked, the `sampling` and the `outputs`, and how the riffs are drawn and written."""

    outputs: Outputs = field(default_factory=Outputs)
    run: Path | None = None  # a run directory (default: the newest under ./runs)
    checkpoint: Path | None = None  # a checkpoint file instead of a run
    device: str = "auto"
    threads: int = 0  # CPU threads (0: chosen per step, one for small ones; runtime.set_threads)
    num_samples: int = 1
    batch_size: int | None = None  # riffs generated together (speed and memory, never the riffs)
    bars: int | None = None  # new bars (after the prompt with one); None: until the model ends
    sampling: Sampling = field(default_factory=Sampling)
    seed: int = 0
    prompt: Path | None = None  # a file to continue: the riff is the file with the new bars after it
    track: str | None = None  # the prompt's part to continue: its number (1-based) or name; None: the first
    tracks: str = "guitar"  # the parts `track` chooses among: "guitar" or "all"
    tempo: float | None = None
    tuning: str | tuple[int, ...] | None = None  # a name or the open strings low to high
    program: int | None = None
    position: int | None = None  # re-finger the tab in this position (index finger at this fret)
    # A run with controls (vocab/controls.py's registry: key, style, density, ...). The bar controls take one value
    # for every bar or one per bar range: "1-4:low,5-8:high" (bars from 1; bars past the ranges get none asked).
    controls: Controls = field(default_factory=Controls)
    time_signature: str | None = None  # "7/8"; "auto": drawn per riff (app/sample.py `_meters`); "none": the
    # model's own; None: the run's sample.time_signature, else the model's own
    guard: bool = True  # steer key, density and a style's meter in the sampler (generation/constraint/guards.py)
    # Which bars repeat an earlier bar (compose/form.py): "auto", a real tune's form, drawn per riff (of the asked
    # style where one is asked); "none", the model alone; or letters, one per phrase: "AABB". None: auto where the run
    # has its tunes' forms and does not copy by itself (app/sample.py `_forms`), else none, without a warning.
    form: str | None = None
    # The band (a run that learned it, data/parts.py): the parts to write, "guitar,bass,drums" or some of them; with
    # `accompany`, a file whose other parts they are written for (default: every band part the file lacks).
    parts: str | None = None
    accompany: Path | None = None

    def __post_init__(self) -> None:
        self.accompany = _path(self.accompany)

    @classmethod
    def of(cls, **options: Any) -> "SampleRequest":
        """A request from one flat set of options (`bars=8, key="E:minor", temperature=0.9`): the control options
        go into `controls`, the sampling ones into `sampling`."""
        return cls(**_split_options(cls, options))


MAX_CANDIDATES = 16  # fills `infill` samples at once, at most


@dataclass
class InfillRequest:
    """`infill`: bars `bars` (first, last; 1-based, inclusive, as `tab` numbers them) of `song` written again."""

    song: Path | GuitarScore | Song  # a file, one part, or a song's parts in memory (`track` chooses among them)
    bars: tuple[int, int]
    outputs: Outputs = field(default_factory=Outputs)
    track: str | None = None  # the part to fill (a file with several): its number (1-based) or name
    tracks: str = "guitar"  # the parts `track` chooses among: "guitar" or "all"
    run: Path | None = None
    checkpoint: Path | None = None
    device: str = "auto"
    threads: int = 0  # CPU threads (0: chosen per step, one for small ones; runtime.set_threads)
    seed: int = 0
    sampling: Sampling = field(default_factory=Sampling)  # max_new_tokens None: twice what the bars take in the song
    candidates: int = 8  # fills sampled at once, the one fitting the bars around best kept (docs/results/INFILL.md)

    @classmethod
    def of(cls, **options: Any) -> "InfillRequest":
        """A request from one flat set of options (`song=..., bars=(5, 8), temperature=0.9`)."""
        return cls(**_split_options(cls, options))


@dataclass
class TabRequest:
    """`tab`: a playable tab of a file, as text (and written to `outputs.tab` / `outputs.gp`)."""

    file: Path
    outputs: Outputs = field(default_factory=Outputs)
    track: str | None = None
    tracks: str = "guitar"
    bars: tuple[int, int] | None = None
    tuning: str | tuple[int, ...] | None = None
    width: int = 80
    position: int | None = None
    program: int | None = None
    run: Path | None = None  # a tab-token decoder that fingers the notes instead of fret()
    checkpoint: Path | None = None
    device: str = "auto"
    threads: int = 0  # CPU threads (0: chosen per step, one for small ones; runtime.set_threads)


def check_outputs(outputs: Outputs, allowed: tuple[str, ...]) -> None:
    """Every path has its kind's suffix, is no folder and is not shared with another output, and its folder exists
    (created here, missing folders and all); `allowed`: the kinds this command writes."""
    seen: dict[Path, str] = {}
    for kind, path in outputs.items():
        flag = outputs.label(kind)
        if kind not in allowed:
            raise GuitarformerError(f"{flag} {path}: this command does not write {ARTICLE[kind]} {NAMES[kind]}",
                                    f"leave out {flag}")
        suffixes, example = SUFFIXES[kind]
        if path.is_dir():
            raise GuitarformerError(f"{flag} {path} is a folder", f"give {flag} a file name, e.g. {path / example}")
        if path.suffix.lower() not in suffixes:
            raise GuitarformerError(f"{flag} {path}: {flag} writes {ARTICLE[kind]} {NAMES[kind]}, named {' or '.join(suffixes)}, "
                                    f"not {path.suffix or 'without a suffix'}", f"name it like {example}")
        key = path.expanduser().resolve()
        if key in seen:
            raise GuitarformerError(f"{seen[key]} and {flag} both name {path}: one would overwrite the other",
                                    "give each output its own file name")
        seen[key] = flag
    for kind, path in outputs.items():  # before the slow part, as every file is written after it
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            flag = outputs.label(kind)
            raise GuitarformerError(f"cannot create the folder for {flag} {path}: {e.strerror or e}",
                                    f"choose a {flag} path in a writable folder") from None


def outputs_by_suffix(label: str, paths: list[Path | None], allowed: tuple[str, ...], **named: Path | None) -> Outputs:
    """Outputs from options that take any format (`--out song.gp5`): each path goes to the kind its suffix names
    (one of `allowed`), beside the `named` ones ({kind: path}, their options' labels `--<kind>`)."""
    out = Outputs(**named, labels={k: f"--{k}" for k in named})
    for path in paths:
        if path is None:
            continue
        path = Path(path)
        kind = KIND_OF_SUFFIX.get(path.suffix.lower())
        if kind not in allowed:
            names = ", ".join(f"{SUFFIXES[k][0][0]} ({NAMES[k]})" for k in allowed)
            raise GuitarformerError(f"{label} {path}: cannot write {path.suffix or 'a file without a suffix'}",
                                    f"name it {names}")
        if getattr(out, kind) is not None:
            raise GuitarformerError(f"{label} {path} and {out.label(kind)} {getattr(out, kind)} both ask for an "
                                    f"output of one kind ({NAMES[kind]})",
                                    f"leave out {out.label(kind)}, or give {label} another format")
        setattr(out, kind, path)
        out.labels[kind] = label
    return out


# ---------------------------------------------------------------- prepare, info, train, eval


@dataclass
class PrepareRequest:
    """`prepare`: files and folders tokenized into a dataset folder; no `inputs`: the built-in corpus into the cache."""

    inputs: list[Path] = field(default_factory=list)
    out: Path | None = None  # the dataset folder (default: data/prepared/<name>; no inputs: the cache's)
    config: str | None = None  # a config name or YAML file (its data section is used)
    tokenizer: str | None = None  # TabREMI, REMI, TSD, MIDILike, Structured (default: the config's)
    bpe_vocab: int | None = None  # miditok BPE to this vocabulary size (0: base tokens; default: the config's)
    overrides: list[str] = field(default_factory=list)  # "section.key=value"
    like: str | None = None  # tokenize as this run did (`pretrained`, a run folder or checkpoint), new styles added
    force: bool = False  # replace a dataset in `out` prepared with other token settings
    tracks: str = "guitar"  # MIDI: "guitar" tracks (programs 24-31) or "all" non-drum tracks
    include_bass: bool = False
    workers: int = 0  # processes (0: all cores)
    progress: bool = False  # a progress bar on stderr

    def __post_init__(self) -> None:
        self.inputs, self.out = [Path(p) for p in self.inputs], _path(self.out)


@dataclass
class InfoRequest:
    """`info`: a summary of a prepared dataset or a run folder (None: the built-in corpus most recently prepared)."""

    dataset: Path | None = None

    def __post_init__(self) -> None:
        self.dataset = _path(self.dataset)


@dataclass
class TrainRequest:
    """`train`: a run trained from a config (or continued, `resume`; or fine-tuned from another's weights, `init`).
    A field left None takes the config's value."""

    config: str | None = None  # a config name or YAML file (default decoder-small)
    model_kind: str | None = None  # "decoder" or "encoder-decoder" (alone, the latter picks encdec-small)
    data: Path | None = None  # a prepared dataset folder (default: the built-in corpus)
    run_dir: Path | None = None  # default runs/<timestamp>
    force: bool = False  # start afresh in a run_dir that holds a run
    max_steps: int | None = None
    device: str | None = None
    resume: Path | None = None  # continue this run exactly
    init: str | None = None  # fine-tune from this run's weights (`pretrained`, a run folder or checkpoint)
    overrides: list[str] = field(default_factory=list)  # "section.key=value"
    threads: int = 0  # CPU threads (0: chosen for the work)
    progress: bool = False  # a progress bar on stderr

    def __post_init__(self) -> None:
        self.data, self.run_dir, self.resume = _path(self.data), _path(self.run_dir), _path(self.resume)


@dataclass
class EvalRequest:
    """`eval`: likelihood against an n-gram, music and playability metrics of a run; with `fingering`, only how
    often the model fingers the tabs under that folder as their authors did."""

    run: Path | None = None  # a run folder or `pretrained` (default: the newest run, else the shipped model)
    data: Path | None = None  # default: the run's dataset
    split: str = "test"
    reference: Path | None = None  # real guitar files for the music metrics (default: the split decoded back)
    num_samples: int = 32
    max_new_tokens: int | None = None
    samples: bool = True  # False: likelihood only
    ngram_order: int = 5
    cont_src: int | None = None
    cont_tgt: int | None = None
    seed: int = 0
    json: Path | None = None  # every number written here
    device: str = "auto"
    fingering: Path | None = None  # only the fingering agreement with the tabs under this folder
    batch_size: int = 64  # with `fingering`: the most rows fingered together
    threads: int = 0
    progress: bool = False  # each stage said as it starts

    def __post_init__(self) -> None:
        self.run, self.data, self.reference = _path(self.run), _path(self.data), _path(self.reference)
        self.json, self.fingering = _path(self.json), _path(self.fingering)


Say = Callable[[str, bool], None]  # a line a command says as it works, and whether it is a warning (stderr)


class Voice:
    """The lines a command says, kept in order (`lines` for stdout, `warnings` for stderr) and passed to `say` as
    they come, where one is given (the CLI's echo: a summary printed before the error that follows it)."""

    def __init__(self, say: Say | None = None) -> None:
        self.say, self.lines, self.warnings = say, [], []

    def __call__(self, line: str, err: bool = False) -> None:
        (self.warnings if err else self.lines).append(line)
        if self.say is not None:
            self.say(line, err)
