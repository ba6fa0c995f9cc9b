"""RunDir: the one place that knows what a run folder holds and what each file is called.

    runs/<run>/config.yaml          the config it trained with
              tokenizer.json        its tokens (copied from the dataset)
              controls_seen.json    the control values its training data held (data/seen.py)
              forms_seen.json       the forms of its training tunes (generation/form.py)
              ckpt/best.pt, last.pt checkpoints (runs/checkpoint.py)
              tb/                   TensorBoard
              metrics.jsonl         one JSON line per logged record
              summary.json          what the run ended with
              init.json             the run it was fine-tuned from (train --init)
              state.json            the run folder's format and what the run decided for itself (`RunState`)

The shipped model (guitarformer/pretrained) is laid out the same, plus MODEL_CARD.md, with its best checkpoint
only. Everything else that names a run (the newest under ./runs, `--run DIR|CKPT|pretrained`) is resolved here too.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from guitarformer.vocab.seen import SEEN_FILE
from guitarformer.errors import GuitarformerError
from guitarformer.compose.form import FORMS_FILE
from guitarformer.pretrained import pretrained_dir

PRETRAINED = "pretrained"  # how `--run`, `train --init` and `prepare --like` name the shipped model
RUN_FORMAT = 2  # the run-folder format this version writes (state.json); runs without one are format 1 (runs/migrate.py)
CHECKPOINTS = ("best", "last")
SHIPPED_NOTE = "using the shipped model (no --run given and no run under {base}/): see {card}"


@dataclass
class RunState:
    """What a run records of itself beside its config: the folder's format, and whether the time budget has fixed
    max_steps (so a resume does not fit it again)."""

    format: int = RUN_FORMAT
    budget_fitted: bool = False


class RunDir:
    """A run folder: the path of each file in it, whether it exists or not."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @classmethod
    def of_checkpoint(cls, checkpoint: str | Path) -> RunDir:
        """The run folder a checkpoint file sits in (RUN/ckpt/NAME.pt)."""
        return cls(Path(checkpoint).parent.parent)

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def tokenizer_path(self) -> Path:
        return self.path / "tokenizer.json"

    @property
    def seen_path(self) -> Path:
        return self.path / SEEN_FILE

    @property
    def forms_path(self) -> Path:
        return self.path / FORMS_FILE

    @property
    def ckpt_dir(self) -> Path:
        return self.path / "ckpt"

    def checkpoint(self, which: str = "best") -> Path:
        """ckpt/best.pt or ckpt/last.pt."""
        if which not in CHECKPOINTS:
            raise ValueError(f"a run's checkpoints are {CHECKPOINTS}, not {which!r}")
        return self.ckpt_dir / f"{which}.pt"

    def checkpoint_files(self) -> list[Path]:
        return list(self.ckpt_dir.glob("*.pt"))

    def best_checkpoint(self) -> Path:
        """The best checkpoint, else the last; GuitarformerError where there is neither."""
        for which in CHECKPOINTS:
            if self.checkpoint(which).is_file():
                return self.checkpoint(which)
        raise GuitarformerError(f"run {self.path} has no checkpoint (ckpt/best.pt or ckpt/last.pt)",
                                "train it first, or pass --checkpoint FILE")

    @property
    def tb_dir(self) -> Path:
        return self.path / "tb"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary_path(self) -> Path:
        return self.path / "summary.json"

    @property
    def init_path(self) -> Path:
        return self.path / "init.json"

    @property
    def state_path(self) -> Path:
        return self.path / "state.json"

    @property
    def card_path(self) -> Path:
        return self.path / "MODEL_CARD.md"

    def outputs(self) -> list[Path]:
        """What training writes into the folder (a new run there would overwrite them)."""
        return [self.ckpt_dir, self.tb_dir, self.metrics_path, self.summary_path, self.init_path, self.state_path]

    def shipped_files(self) -> list[Path]:
        """What a shipped model folder must hold, every file of it."""
        return [self.checkpoint("best"), self.config_path, self.tokenizer_path, self.card_path]

    def is_run(self) -> bool:
        """Whether the folder holds a run (its config), not a dataset."""
        return self.config_path.is_file() and not (self.path / "meta.json").is_file()

    @property
    def is_shipped(self) -> bool:
        return self.path.resolve() == pretrained_dir().resolve()

    def read_state(self) -> RunState:
        """The run's state.json; a run without one is of format 1 (saved before the file existed)."""
        if not self.state_path.is_file():
            return RunState(format=1)
        d = json.loads(self.state_path.read_text())
        return RunState(**{k: d[k] for k in ("format", "budget_fitted") if k in d})

    def write_state(self, state: RunState) -> None:
        self.state_path.write_text(json.dumps(asdict(state), indent=2))


def has_pretrained(folder: Path | None = None) -> bool:
    """Whether the shipped model is there, every file of it (a source checkout before a release has none)."""
    return all(f.is_file() for f in RunDir(pretrained_dir() if folder is None else folder).shipped_files())


def shipped_note(base: str | Path = "runs", named: bool = False) -> str:
    """The one line a command prints when it falls back to the shipped model, or (`named`) was asked for it."""
    card = RunDir(pretrained_dir()).card_path
    return f"using the shipped model: see {card}" if named else SHIPPED_NOTE.format(base=Path(base), card=card)


def new_run_dir(base: str | Path = "runs") -> Path:
    """A new, empty folder base/<timestamp> (base/<timestamp>-N when that is taken), created here so that two runs
    started in the same second never share one."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    p, i = Path(base) / stamp, 0
    while True:
        try:
            p.mkdir(parents=True)
            return p
        except FileExistsError:
            i += 1
            p = Path(base) / f"{stamp}-{i}"


def newest_run(base: str | Path = "runs") -> Path:
    """The run under base whose checkpoint was written last (a resumed run counts from its newest checkpoint)."""
    base = Path(base)
    written = {}
    for p in base.glob("*") if base.is_dir() else []:
        times = [c.stat().st_mtime for c in RunDir(p).checkpoint_files()]
        if times:
            written[p] = max(times)
    if not written:
        raise GuitarformerError(f"no trained run under {base}/", "train one with `guitarformer train`, or pass --run DIR / --checkpoint FILE")
    return max(written, key=written.get)


def default_run(base: str | Path = "runs") -> Path:
    """The run a command uses when none is named: the newest under `base`, else the model shipped in the package."""
    try:
        return newest_run(base)
    except GuitarformerError:
        if has_pretrained():
            return pretrained_dir()
        raise


def checkpoint_of(run: str | Path | None = None, checkpoint: str | Path | None = None) -> Path:
    """The checkpoint file a run stands for: `checkpoint` itself, else the run's best (else last) checkpoint; the
    run is `default_run()` when neither is given, and the shipped model when it is named "pretrained" and no such
    folder is here."""
    if checkpoint is not None:
        return Path(checkpoint)
    run_dir = Path(run) if run else default_run()
    if str(run) == PRETRAINED and not run_dir.exists():  # `--run pretrained`, as `--init` and `--like` name it
        return named_checkpoint(PRETRAINED)
    return RunDir(run_dir).best_checkpoint()


def named_checkpoint(name: str | Path) -> Path:
    """The checkpoint a run named on the command line stands for: "pretrained" (the shipped model), a run
    directory (its best, else last checkpoint) or a checkpoint file inside a run directory."""
    if str(name) == PRETRAINED:
        if not has_pretrained():
            raise GuitarformerError("this install has no shipped model (guitarformer/pretrained is incomplete)",
                                    "name a run of your own (a run directory or its ckpt/best.pt)")
        return checkpoint_of(pretrained_dir())
    p = Path(name).expanduser()
    if p.is_dir():
        return checkpoint_of(p)
    if p.is_file():
        return p
    raise GuitarformerError(f"{p} is neither a run directory nor a checkpoint file",
                            f"name a run directory (runs/<timestamp>), its ckpt/best.pt, or {PRETRAINED!r}")
