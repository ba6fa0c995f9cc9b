"""Typed configuration: dataclasses loaded from YAML, `--set a.b=c` overrides, values type-checked.

The dataclass defaults are the default preset: `Config()` equals `load_config("decoder-small")` (tests/test_config.py
checks). A run's saved config is read through runs/migrate.py, which fills what runs saved before a setting existed
did, so a later default never changes an older run. Every
change to a loaded config goes through `apply_overrides` (strings from --set) or `set_values` (typed values from
CLI options and the run itself), and both validate the whole config again."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from guitarformer.errors import GuitarformerError

PACKAGE_CONFIG_DIR = Path(__file__).resolve().parent / "configs"  # shipped in the wheel; ./configs links here
DEFAULT_CONFIG = "decoder-small"


@dataclass
class DataConfig:
    dataset: str | None = None  # prepared dataset folder; None = the built-in corpus
    tokenizer: str = "TabREMI"  # TabREMI (REMI + string and techniques per note) | REMI | TSD | MIDILike | Structured
    num_velocities: int = 16
    use_tempos: bool = True
    use_time_signatures: bool = True
    bpe_vocab_size: int = 0  # 0 = base vocabulary; >0 trains miditok's BPE/Unigram to this size at prepare time
    bpe_model: str = "BPE"  # BPE | Unigram
    transpose: int = 0  # on-the-fly augmentation: random shift in [-transpose, +transpose] semitones
    corpus_limit: int = 0  # built-in corpus: keep the first N tunes (0 = all); for quick tests
    # Control tokens (vocab/controls.py: tuning, key, style, per-bar density, polyphony, position, techniques), so a
    # run can be asked for them at sampling time; tab tokens without BPE only. Each control type is dropped from a
    # training window with probability control_dropout, so any subset (none included) can be asked for.
    controls: bool = False
    control_dropout: float = 0.5
    # The share of training windows that drop every control, on top of control_dropout's per-type draws: the plain
    # stream (what `sample` without options asks for) is otherwise nearly never seen (0.5 ** 9 of windows).
    control_plain: float = 0.0
    # Whether the loss scores the control tokens themselves. The sampler writes every control asked for, so the
    # model needs to read them, not guess them: false puts the whole loss on the music (the controls stay inputs).
    control_targets: bool = True
    # The share of a decoder's training windows that open at a piece's BOS, nothing before it, as sampling without a
    # prompt begins. A window drawn anywhere opens there once in ~1,000 tokens: the model otherwise learns how pieces
    # begin only after the piece before (the corpus lists like tunes together), which a riff never has.
    piece_starts: float = 0.0
    # Bar infilling (vocab/infill.py): the share of training windows (decoder) or pairs (encoder-decoder) turned into
    # fill-these-bars examples, so `guitarformer infill` can use the run; tab tokens without BPE. 0 = none.
    infill: float = 0.0
    # TabREMI's note layout (vocab/tab_tokens.py): 3 = a String token only where a note leaves its lowest-fret
    # string (0.79x REMI's tokens per note on the corpus); 2 = a String on every note (as many tokens as REMI).
    tab_layout: int = 3
    # The band (data/parts.py): the part roles each piece's one stream carries, bar by bar, e.g. "guitar,bass,drums";
    # "" = one guitar part per sequence. Tab tokens of layout 3 only.
    parts: str = ""


def preset_data() -> DataConfig:
    """The default preset's data: a bare DataConfig describes plain tokens (what `prepare` and the tokenizer take);
    the preset trains with controls and infilling in the mix (the shipped model's share), so every `sample` option
    and `infill` work on the quickstart's run; half of its windows without any control, so the plain stream
    (`sample` without options) is trained too; and the control tokens read but not scored (the sampler writes them).
    docs/results/TAB_TOKENS.md, "Control tokens read, not scored": at the quickstart's length, 1.001x REMI's nats per note
    over four seeds, against 1.010x (two seeds) with a quarter plain and the controls scored; guarded adherence
    the same, and the model alone follows density and a style's meter better. With another tokenizer they are off
    (`validate`)."""
    return DataConfig(controls=True, infill=0.3, control_plain=0.5, control_targets=False)


@dataclass
class ModelConfig:
    kind: str = "decoder"  # decoder | encoder_decoder
    vocab_size: int = 0  # 0 = taken from the dataset's tokenizer
    block_size: int = 1024  # decoder context / encoder-decoder target length T
    src_block_size: int = 256  # encoder-decoder source length S
    n_layer: int = 4
    n_enc_layer: int = 0  # 0 = same as n_layer
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0  # the default preset sees its corpus about four times: too few to overfit
    # Dropout on the attention weights (inside SDPA); None: `dropout`'s. 0 with dropout > 0 keeps a CPU's fused
    # attention kernel, which SDPA leaves for its slow path at any dropout_p > 0 (a third of the speed measured).
    attn_dropout: float | None = None
    bias: bool = False
    pos: str = "rope"  # learned | sinusoidal | rope
    ffn: str = "gelu"  # gelu | swiglu
    ffn_mult: float = 4.0
    tie_weights: bool = True
    # Decoder: each position's input also holds the embedding of the token before it (a second table; PAD's row
    # at a window's first position), so one attention layer can match "the token after the one just read": the
    # induction that copies a bar the piece played before (models/decoder.py); the encoder-decoder does not read it.
    prev_token: bool = True
    # Mix into each prediction the token that followed the latest, longest earlier match of what was just read (an
    # encoder-decoder: in its source, then its target so far), by a learned gate (models/copy.py): repeated bars and
    # fills that repeat the bars after the gap come nearly free.
    copy: bool = True


@dataclass
class TrainConfig:
    batch_size: int = 8
    grad_accum: int = 1
    max_steps: int = 2000
    # Fit the run to this many minutes (0 = off): after a few timed steps the run lowers max_steps (never raises
    # it) so that training and evaluation end in about this time, and the schedule decays to the new end. The
    # decided max_steps is saved with the run (and that it was decided, in its state), so --resume stays exact.
    time_budget_min: float = 15.0
    lr: float = 3e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100  # at most a tenth of max_steps is warm-up (training/loop.py warmup_steps)
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    eval_interval: int = 400
    eval_iters: int = 0  # batches per evaluation (0 = the whole val split)
    log_interval: int = 10
    sample_interval: int = 800  # 0 = no riff in TensorBoard during training (one is still logged at the end)
    patience: int = 0  # early stopping: evaluations without improvement (0 = off)
    seed: int = 1337
    device: str = "auto"  # auto | cpu | cuda | mps
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    compile: bool = True  # torch.compile where this machine can (else eager, said once)
    num_threads: int = 0  # torch CPU threads (0 = runtime.set_threads chooses: the idle cores, 1 on a busy machine)
    # Start from another run's weights (training/init.py): "pretrained" (the shipped model), a run directory or a
    # checkpoint file; the architecture is that run's, the optimizer and schedule fresh. None: random weights.
    init: str | None = None


@dataclass
class SampleConfig:
    max_new_tokens: int = 512
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 0.95
    # `sample --form` when none is asked: "auto" (a training tune's form) or "none" (the model's own); None: by the
    # model (none where it copies, model.copy). The release sets it by measurement (tools/release_model.py).
    form: str | None = None
    # `sample --time-signature` when none is asked: "auto" draws each riff's meter from the run's training bars
    # (app/sample.py `_meters`); None: the model opens its riffs in the meter it chooses. The preset draws: left to
    # itself a layout-3 model opens too many riffs in the dense meters (the quickstart's riffs 4.97 notes/s own, 4.13
    # drawn, the test tunes 3.96: docs/results/TAB_TOKENS.md). A run saved before the setting keeps its own (runs/migrate.py).
    time_signature: str | None = "auto"


@dataclass
class Config:
    data: DataConfig = field(default_factory=preset_data)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    name: str = DEFAULT_CONFIG  # the defaults above are configs/decoder-small.yaml (tests/package/test_config.py checks)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(value: Any, tp: Any, where: str, text: bool = True) -> Any:
    """Convert a YAML/CLI value to the declared field type, or raise a clear error. `text`: the value was written
    as text (YAML, --set), where "none"/"null" mean None; a typed value (a path a folder is named "null") is kept."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None or (text and isinstance(value, str) and value.lower() in ("none", "null", "~")):
            return None
        return _coerce(value, args[0], where, text)
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on"):
                return True
            if isinstance(value, str) and value.lower() in ("false", "no", "0", "off"):
                return False
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise ValueError
        if tp is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, str):
                f = float(value)  # accepts "1e3"
                if not f.is_integer():
                    raise ValueError
                return int(f)
            if isinstance(value, int):
                return value
            raise ValueError
        if tp is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)  # PyYAML reads "3e-4" as a string: float() takes it
        if tp is str:
            if isinstance(value, (dict, list)):
                raise ValueError
            return str(value)
    except (TypeError, ValueError):
        tname = getattr(tp, "__name__", str(tp))
        raise GuitarformerError(
            f"config value {where}={value!r} is not a valid {tname}",
            f"give {where} a {tname} value",
        ) from None
    return value


def _section_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _apply(cfg: Config, section: str, key: str, value: Any, text: bool = True) -> None:
    if section not in ("data", "model", "train", "sample"):
        raise GuitarformerError(
            f"unknown config section {section!r}", "use one of data, model, train, sample"
        )
    obj = getattr(cfg, section)
    hints = _section_types(type(obj))
    if (section, key) in REMOVED:
        off, fix = REMOVED[section, key]
        if value == off:  # an older config (a run's config.yaml) that left it off: nothing to honour
            return
        raise GuitarformerError(f"config key {section}.{key} was removed", fix)
    if key not in hints:
        valid = ", ".join(sorted(hints))
        raise GuitarformerError(
            f"unknown config key {section}.{key}", f"valid keys in {section}: {valid}"
        )
    setattr(obj, key, _coerce(value, hints[key], f"{section}.{key}", text))


def from_dict(d: dict[str, Any], base: Config | None = None) -> Config:
    cfg = base if base is not None else Config()
    for section, values in (d or {}).items():
        if section == "name":
            cfg.name = str(values)
            continue
        if not isinstance(values, dict):
            raise GuitarformerError(
                f"config section {section!r} must be a mapping, got {type(values).__name__}",
                "write it as `section:` followed by indented `key: value` lines",
            )
        for k, v in values.items():
            _apply(cfg, section, k, v)
    validate(cfg)  # a saved run's config may list controls beside REMI (the preset's, never used): not refused
    return cfg


# Settings taken out: the value that meant "off" (an older config holding it loads as before) and what to do instead;
# any other value is refused with that fix.
REMOVED = {("train", "max_minutes"): (0.0, "drop train.max_minutes: train.time_budget_min stops a run on the clock, "
                                           "its schedule fitted to end there (train.time_budget_min=0: no budget)")}


def resolve_config_path(name_or_path: str) -> Path:
    """A path to a YAML file, or a config name looked up in ./configs and the project's configs/."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    stem = name_or_path[:-5] if name_or_path.endswith(".yaml") else name_or_path
    for d in (Path.cwd() / "configs", PACKAGE_CONFIG_DIR):
        cand = d / f"{stem}.yaml"
        if cand.is_file():
            return cand
    raise GuitarformerError(
        f"config {name_or_path!r} not found",
        "pass a YAML file path or a name from configs/ (tiny, decoder-small, encdec-small, ...)",
    )


def load_config(name_or_path: str | None = None, overrides: list[str] | None = None) -> Config:
    """Load a named or file config (None: the default, falling back to dataclass defaults)."""
    cfg = Config()
    path: Path | None
    try:
        path = resolve_config_path(name_or_path or DEFAULT_CONFIG)
    except GuitarformerError:
        if name_or_path is not None:
            raise
        path = None  # installed without the configs/ folder: dataclass defaults are decoder-small
    if path is not None:
        try:
            d = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise GuitarformerError(f"config {path} is not valid YAML: {e}", "fix the YAML syntax") from None
        if not isinstance(d, dict):
            raise GuitarformerError(f"config {path} must be a mapping", "see configs/tiny.yaml")
        cfg = from_dict(d, cfg)
        cfg.name = d.get("name", path.stem)
    apply_overrides(cfg, overrides or [])
    return cfg


def apply_overrides(cfg: Config, overrides: list[str]) -> Config:
    """Apply `section.key=value` strings (values parsed as YAML scalars, then type-checked)."""
    for item in overrides:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise GuitarformerError(
                f"bad override {item!r}", "write overrides as --set section.key=value, e.g. --set train.lr=3e-4"
            )
        key, raw = item.split("=", 1)
        section, k = key.strip().split(".", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        _apply(cfg, section, k, value)
    validate(cfg, frozenset(item.split("=", 1)[0].strip() for item in overrides))
    return cfg


def set_values(cfg: Config, values: dict[str, Any]) -> Config:
    """Set `section.key` to typed values (a CLI option's value, what a run learns about its data), each checked
    against its field's type, then validate the whole config: the way to change a config once it is loaded.
    A value of None for a field that cannot be None is an error, as from YAML."""
    for key, value in values.items():
        if "." not in key:
            raise GuitarformerError(f"bad config key {key!r}", "name it section.key, e.g. train.lr")
        section, k = key.split(".", 1)
        _apply(cfg, section, k, value, text=False)
    validate(cfg, frozenset(values))
    return cfg


def validate(cfg: Config, asked: frozenset[str] = frozenset()) -> None:
    """Raise GuitarformerError naming the first value out of its range (or two values that do not go together).
    `asked`: the `section.key`s the change being validated set (tab_features_off tells them from defaults)."""
    d, m, t, s = cfg.data, cfg.model, cfg.train, cfg.sample
    checks = [
        (m.kind in ("decoder", "encoder_decoder"), "model.kind must be decoder or encoder_decoder"),
        (m.pos in ("learned", "sinusoidal", "rope"), "model.pos must be learned, sinusoidal or rope"),
        (m.ffn in ("gelu", "swiglu"), "model.ffn must be gelu or swiglu"),
        (m.n_embd % max(m.n_head, 1) == 0 and m.n_head > 0, "model.n_embd must be divisible by model.n_head"),
        (m.block_size > 0 and m.n_layer > 0, "model.block_size and model.n_layer must be positive"),
        (0.0 <= m.dropout < 1.0, "model.dropout must be in [0, 1)"),
        (m.attn_dropout is None or 0.0 <= m.attn_dropout < 1.0, "model.attn_dropout must be in [0, 1), or null"),
        (m.src_block_size > 0 and m.n_enc_layer >= 0 and m.vocab_size >= 0,
         "model.src_block_size must be positive, model.n_enc_layer and model.vocab_size >= 0"),
        (m.ffn_mult > 0, "model.ffn_mult must be positive"),
        (t.batch_size > 0 and t.grad_accum > 0, "train.batch_size and train.grad_accum must be positive"),
        (t.lr > 0 and t.min_lr >= 0, "train.lr must be positive and train.min_lr >= 0"),
        (t.eval_interval > 0 and t.log_interval > 0, "train.eval_interval and train.log_interval must be positive"),
        (min(t.warmup_steps, t.eval_iters, t.sample_interval, t.patience, t.num_threads) >= 0,
         "train.warmup_steps, eval_iters, sample_interval, patience and num_threads must be >= 0"),
        (t.weight_decay >= 0 and t.grad_clip >= 0, "train.weight_decay and train.grad_clip must be >= 0"),
        (0.0 <= t.beta1 < 1.0 and 0.0 <= t.beta2 < 1.0, "train.beta1 and train.beta2 must be in [0, 1)"),
        (t.time_budget_min >= 0, "train.time_budget_min must be >= 0"),
        (t.device in ("auto", "cpu", "cuda", "mps") or t.device.startswith("cuda:"), "train.device must be auto, cpu, cuda or mps"),
        (t.dtype in ("auto", "float32", "bfloat16", "float16"), "train.dtype must be auto, float32, bfloat16 or float16"),
        (cfg.data.tokenizer in ("TabREMI", "REMI", "TSD", "MIDILike", "Structured"),
         "data.tokenizer must be TabREMI, REMI, TSD, MIDILike or Structured"),
        (cfg.data.bpe_model in ("BPE", "Unigram"), "data.bpe_model must be BPE or Unigram"),
        (cfg.data.bpe_vocab_size == 0 or cfg.data.transpose == 0,
         "data.transpose works on base pitch tokens: use it with data.bpe_vocab_size=0"),
        (0.0 <= cfg.data.control_dropout <= 1.0, "data.control_dropout must be in [0, 1]"),
        (0.0 <= cfg.data.control_plain <= 1.0, "data.control_plain must be in [0, 1]"),
        (0.0 <= cfg.data.piece_starts <= 1.0, "data.piece_starts must be in [0, 1]"),
        (cfg.data.tab_layout in (2, 3), "data.tab_layout must be 3 (a String only off the lowest-fret string) or 2"),
        (0.0 <= cfg.data.infill <= 1.0, "data.infill must be in [0, 1]"),
        (all(r.strip() in ("guitar", "bass", "drums") for r in d.parts.split(",")) if d.parts else True,
         "data.parts must name parts among guitar, bass, drums (e.g. guitar,bass,drums), or be empty"),
        (not d.parts or (d.tokenizer == "TabREMI" and d.tab_layout == 3 and d.bpe_vocab_size == 0),
         "data.parts needs data.tokenizer=TabREMI, data.tab_layout=3 and data.bpe_vocab_size=0"),
        (d.num_velocities > 0, "data.num_velocities must be positive"),
        (min(d.bpe_vocab_size, d.transpose, d.corpus_limit) >= 0,
         "data.bpe_vocab_size, data.transpose and data.corpus_limit must be >= 0"),
        (s.max_new_tokens > 0, "sample.max_new_tokens must be positive"),
        (s.temperature >= 0 and s.top_k >= 0 and 0.0 < s.top_p <= 1.0,
         "sample.temperature and sample.top_k must be >= 0 (0: the likeliest token / no top-k) and sample.top_p "
         "in (0, 1]"),
        (s.form in (None, "auto", "none"), "sample.form must be auto or none (or unset: chosen by the model)"),
    ]
    for ok, msg in checks:
        if not ok:
            raise GuitarformerError("invalid config: " + msg, "fix the value in the YAML file or with --set")
    if not tab_features(d):
        _tab_features_off(d, asked)


def _tab_features_off(d: DataConfig, asked: frozenset[str]) -> None:
    """Controls and infilling off for tokens that cannot carry them: the preset's defaults go quietly (so
    `--set data.tokenizer=REMI` alone trains plain REMI); values asked for in the same change are refused."""
    for key, on in (("data.controls", d.controls), ("data.infill", d.infill > 0)):
        if on and key in asked:
            raise GuitarformerError(f"invalid config: {key} needs data.tokenizer=TabREMI and data.bpe_vocab_size=0",
                                    f"drop {key}, or train on TabREMI tokens without BPE")
    d.controls, d.infill = False, 0.0


def tab_features(d: DataConfig) -> bool:
    """Whether a data config's tokens can carry controls and infilling: tab tokens without BPE."""
    return d.tokenizer == "TabREMI" and d.bpe_vocab_size == 0


def save_config(cfg: Config, path: Path) -> None:
    path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
