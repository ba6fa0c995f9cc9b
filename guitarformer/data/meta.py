"""A prepared dataset's description: meta.json (written last, so a folder without it is incomplete), reading it
back with clear errors, the summary `prepare` and `info` print, and the refusal to overwrite a dataset made with
other token settings."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from pathlib import Path

from guitarformer.config import DataConfig
from guitarformer.errors import GuitarformerError
from guitarformer.readers import detect_format

DATASET_VERSION = 1
SPLITS = ("train", "val", "test")


def dataset_meta(out: Path, lines: list[dict], counts: dict[str, int], sequences: dict[str, int], **fields) -> dict:
    """meta.json's content: file counts by status and format, tokens and sequences per split, then `fields`."""
    by_format: dict[str, Counter] = defaultdict(Counter)
    for d in lines:
        by_format[d["format"] or "unknown"][d["status"]] += 1
    return {
        "version": DATASET_VERSION,
        "name": out.name,
        "files": len(lines),
        "status": dict(Counter(d["status"] for d in lines)),
        "by_format": {k: dict(v) for k, v in sorted(by_format.items())},
        "pieces": len({d["piece"] for d in lines if d.get("piece") and d["split"]}),
        "sequences": sequences,
        "tokens": counts,
        **fields,
    }


def _token_settings(data: dict) -> dict:
    """The data-config fields that decide the token ids (what a trained run depends on)."""
    keys = ("tokenizer", "num_velocities", "use_tempos", "use_time_signatures", "bpe_vocab_size", "bpe_model")
    return {k: data.get(k) for k in keys} | {"controls": bool(data.get("controls", False))}


def refuse_other_settings(out: Path, data_cfg: DataConfig, force: bool, styles: list[str] | None = None) -> None:
    meta_path = out / "meta.json"
    if force or not meta_path.is_file():
        return
    try:
        meta = json.loads(meta_path.read_text())
        old = meta.get("data_config") or {}
    except (OSError, ValueError):
        return  # an unreadable meta.json is not a dataset anyone can train on: prepare it again
    before, now = _token_settings(old), _token_settings(dataclasses.asdict(data_cfg))
    if now["controls"]:  # the style vocabulary numbers the control tokens after it
        before["control styles"], now["control styles"] = meta.get("control_styles"), styles
    if before != now:
        changed = ", ".join(f"{k} {before[k]} -> {now[k]}" for k in now if before[k] != now[k])
        raise GuitarformerError(
            f"{out} already holds a dataset prepared with other token settings ({changed}); preparing into it "
            "would replace it, and runs trained on it could no longer resume or be evaluated",
            "choose a new --out folder, or pass --force to replace it")


def load_meta(dataset: str | Path) -> dict:
    d = Path(dataset).expanduser()
    if not d.is_dir():
        if d.is_file() and detect_format(d):
            raise GuitarformerError(f"{d} is a music file, not a prepared dataset",
                                    f"prepare it first: guitarformer prepare {d} --out {suggested_out(d)}")
        raise GuitarformerError(f"dataset folder {d} does not exist", "run `guitarformer prepare FILES... --out DIR` first")
    meta = d / "meta.json"
    if not meta.is_file():
        if not any((d / name).exists() for name in ("tokenizer.json", "manifest.jsonl", "cache")) and _holds_music(d):
            # The user's own files, not a dataset: the dataset goes into a folder of its own, not among them.
            raise GuitarformerError(f"{d} is not a prepared dataset (no meta.json)",
                                    f"prepare it first: guitarformer prepare {d} --out {suggested_out(d)}")
        raise GuitarformerError(
            f"dataset {d} is incomplete (no meta.json: prepare did not finish)",
            f"run `guitarformer prepare ... --out {d}` again; unchanged files are reused",
        )
    try:
        return json.loads(meta.read_text())
    except (ValueError, OSError) as e:
        raise GuitarformerError(f"dataset {d} has a damaged meta.json ({e})",
                                f"run `guitarformer prepare ... --out {d}` again; unchanged files are reused") from None


def _holds_music(folder: Path, look_at: int = 1000) -> bool:
    """Whether a folder holds files we read (among the first `look_at` entries, hidden ones left out)."""
    for k, q in enumerate(folder.rglob("*")):
        if k >= look_at:
            break
        if not q.name.startswith(".") and q.is_file() and detect_format(q):
            return True
    return False


def suggested_out(source: str | Path) -> Path:
    """Where `prepare SOURCE` writes by default: data/prepared/<name>, never inside the source folder."""
    p = Path(source).expanduser().resolve()
    return Path("data/prepared") / (p.stem if p.is_file() else p.name or "dataset")


def summary_lines(meta: dict) -> list[str]:
    """A human summary of a dataset (used by `prepare` and `info`)."""
    st = meta["status"]
    out = [
        f"dataset {meta['name']}: {meta['files']} files — ok {st.get('ok', 0)}, skipped {st.get('skipped', 0)}, "
        f"failed {st.get('failed', 0)}",
        f"tokens: train {meta['tokens']['train']:,}  val {meta['tokens']['val']:,}  test {meta['tokens']['test']:,}  "
        f"(sequences {meta['sequences']['train']}/{meta['sequences']['val']}/{meta['sequences']['test']}); "
        f"vocab {meta['vocab_size']} ({meta['tokenizer']})",
    ]
    empty = [s for s in SPLITS if not meta["tokens"].get(s)]
    if empty:
        out.append(f"warning: the {' and '.join(empty)} split{'s are' if len(empty) > 1 else ' is'} empty (0 tokens): "
                   "training needs train, evaluation val and test; add files (about 1 piece in 10 lands in val or "
                   "test)")
    for fmt, c in meta["by_format"].items():
        out.append(f"  {fmt:<10} " + "  ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return out
