"""The sections of docs/results/BENCH_GPU.md that `tools/gpu_checks.sh` writes from its logs, one per stage:

    python3 benchmarks/gpu_sections.py speed LOG      # after `gpu_checks.sh speed`: between the speed marks
    python3 benchmarks/gpu_sections.py compiled LOG   # after `gpu_checks.sh compiled`: between the compiled marks

Each section is also written to LOG/<stage>_section.md and printed. The page's section is replaced whole
(benchmarks/harness.py write_section: between its `<!-- NAME:begin ... -->` and `<!-- NAME:end -->` marks, or appended
where the page has none yet). A bench log whose script failed leaves a line saying so in its table's place."""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import write_section  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "results" / "BENCH_GPU.md"


def table(log: Path, name: str, failed: str = "") -> str:
    """The markdown after the first blank line of a bench script's output (its progress lines come before)."""
    text = (log / name).read_text() if (log / name).exists() else ""
    if "\n\n" not in text:
        return failed or f"({name}: the script failed; see its log)"
    return text[text.index("\n\n") + 2:].strip()


def tests_line(log: Path, name: str) -> str:
    """pytest's summary line; where the run stopped before it (the stage's time limit), the tests' marks counted."""
    lines = (log / name).read_text().strip().splitlines() if (log / name).exists() else []
    if not lines:
        return "(no output)"
    if re.search(r"\b(passed|failed|skipped|error|no tests ran)\b", lines[-1]):
        return lines[-1]
    marks = "".join(line for line in lines if re.fullmatch(r"[.FEsx]+(\s+\[\s*\d+%\])?", line.strip()))
    counts = ", ".join(f"{marks.count(m)} {word}" for m, word in ((".", "passed"), ("F", "failed"), ("E", "errors"),
                                                                   ("s", "skipped")) if marks.count(m))
    return f"{counts or 'none finished'} before the run was stopped (its time limit), no summary line"


def gpu_line(text: str) -> str:
    """gpu.txt (nvidia-smi's CSV with its header, then torch's version and CUDA's) as one line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip() and not line.startswith("name,")]
    return "; ".join(lines) or "(GPU not recorded)"


def speed(log: Path, gpu: str) -> list[str]:
    train = (log / "speed_train.md").read_text().strip() if (log / "speed_train.md").exists() else \
        "(bench_model failed: see its log)"
    return [
        f"## Speed (issue 28): {datetime.date.today()}, {gpu}", "",
        "GPU tests (`pytest -k 'captured or cuda or kv_cache or host or one_query'`): "
        + tests_line(log, "speed_tests.txt"),
        "", "### Training: ours vs HF GPT-2, decoder-base dims", "", train, "",
        "### Sampling: `benchmarks/bench_sample.py --device cuda --dims base --batches 1,32 --repeat 3 --recompute-new 16`",
        "", table(log, "speed_sample.md"), "", "### Sampling, bf16 weights: the same with `--dtype bfloat16`", "",
        table(log, "speed_sample_bf16.md", "(bench_sample --dtype bfloat16 failed)"), "",
        "### Sampling, the shipped model: `benchmarks/bench_sample.py --device cuda --pretrained --batches 1,32`", "",
        table(log, "speed_shipped.md", "(bench_sample --pretrained failed)")]


def compiled(log: Path, gpu: str) -> list[str]:
    riffs = (log / "riff_times.txt").read_text().strip() if (log / "riff_times.txt").exists() else "(no riff timed)"
    return [
        f"## The step compiled, then captured (issue 28): {datetime.date.today()}, {gpu}", "",
        f"GPU tests (`pytest -k 'compiled or captured'`): {tests_line(log, 'compiled_tests.txt')}", "",
        "### decoder-base dims: `benchmarks/bench_sample.py --device cuda --dims base --batches 1,32 --compile`", "",
        table(log, "compiled_base.md"), "",
        "### The shipped model: `benchmarks/bench_sample.py --device cuda --pretrained --batches 1,32 --compile`", "",
        table(log, "compiled_shipped.md"), "",
        "### A 16-bar riff, command to files: `guitarformer sample --bars 16 --seed 1 --out r.mid --tab r.txt ARGS`", "",
        "```", riffs, "```"]


STAGES = {"speed": speed, "compiled": compiled}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=sorted(STAGES))
    ap.add_argument("log", type=Path, help="the stage's log folder ($LOG)")
    ap.add_argument("--doc", type=Path, default=DOC)
    args = ap.parse_args()
    gpu_file = args.log / "gpu.txt"
    gpu = gpu_line(gpu_file.read_text()) if gpu_file.exists() else "(GPU not recorded)"
    lines = STAGES[args.stage](args.log, gpu)
    section = write_section(args.doc, args.stage, "\n".join(lines), by=f"bash tools/gpu_checks.sh {args.stage}")
    (args.log / f"{args.stage}_section.md").write_text(section)
    print(section)


if __name__ == "__main__":
    main()
