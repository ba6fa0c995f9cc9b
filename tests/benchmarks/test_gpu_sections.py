"""benchmarks/gpu_sections.py: the BENCH_GPU.md section a GPU stage writes from its logs, on logs shaped as a real
device call left them (nvidia-smi's CSV header, a pytest run stopped by its time limit before its summary)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_sections.py"
TABLE = "| batch | ours |\n|---:|---:|\n| 1 | 1426 |"


def _write_logs(log: Path, tests: str) -> None:
    log.mkdir()
    (log / "gpu.txt").write_text("name, memory.total [MiB], driver_version\nNVIDIA H200, 143771 MiB, 580.159.04\n"
                                 "2.11.0+cu130 13.0\n")
    (log / "compiled_tests.txt").write_text(tests)
    (log / "compiled_base.md").write_text("{'B': 1}\n\nNVIDIA H200, base dims\n\n" + TABLE + "\n")
    (log / "riff_times.txt").write_text("--device cuda: 5.57 s wall\n")


def _section(tmp_path: Path, tests: str) -> str:
    log, doc = tmp_path / "log", tmp_path / "BENCH_GPU.md"
    _write_logs(log, tests)
    doc.write_text("# GPU\n\n<!-- compiled:begin old -->\nold numbers\n<!-- compiled:end -->\n\nafter\n")
    subprocess.run([sys.executable, str(SCRIPT), "compiled", str(log), "--doc", str(doc)], check=True,
                   capture_output=True, text=True)
    text = doc.read_text()
    assert "old numbers" not in text and text.endswith("after\n") and text.count("compiled:begin") == 1
    return text


def test_a_stage_section_replaces_the_old_one_and_reads_its_logs(tmp_path: Path) -> None:
    text = _section(tmp_path, "...............\n")
    assert "NVIDIA H200, 143771 MiB, 580.159.04; 2.11.0+cu130 13.0" in text and "name, memory" not in text
    assert "15 passed before the run was stopped (its time limit), no summary line" in text
    assert TABLE in text and "--device cuda: 5.57 s wall" in text
    assert "(compiled_shipped.md: the script failed; see its log)" in text


def test_a_finished_test_run_gives_its_summary_line(tmp_path: Path) -> None:
    text = _section(tmp_path, "..F.\n=== 3 passed, 1 failed in 80.1s ===\n")
    assert "=== 3 passed, 1 failed in 80.1s ===" in text
