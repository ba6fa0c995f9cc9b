"""The studio under a stopwatch: click -> drawn score for an 8-bar riff, and 20 requests from 4 clients at once.

    python benchmarks/bench_studio.py                       # an untrained tiny run (tests/helpers/studio_runs.py), CPU
    python benchmarks/bench_studio.py --run runs/X --device cuda
    python benchmarks/bench_studio.py --write docs/results/STUDIO.md   # replace the measured block in the doc

Click -> drawn: headless Chromium (Playwright on the system browser) opens the page, asks for 8 bars with one
candidate and clicks Generate; the page records performance.now() from the click to alphaTab's renderFinished
(request, generation, file writing, the GP5 download and alphaTab's layout and drawing, all of it). The server's
share is timed apart with a direct POST /api/sample.

Load: 4 client threads each send 5 /api/sample requests back to back, all at once (20 in all); every answer is
checked (status 200, a riff id never seen before). The server's resident memory (VmRSS of this process, which
holds the server) is read before, after the first 20 and after a second 20: flat means the second round adds
little. Everything runs in one process on the machine's shared cores, so other load skews the timings.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from harness import table, write_section  # noqa: E402 (benchmarks/harness.py)

from guitarformer.app import load_run  # noqa: E402 (the paths above first)
from guitarformer.studio import BackgroundServer, create_app  # noqa: E402

SECTION = "bench_studio"  # the section of the page --write replaces (harness.write_section)


def rss_mb() -> float:
    text = Path("/proc/self/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def longest_seeds(url: str, n: int, bars: int = 8, tries: int = 64) -> list[int]:
    """The n seeds of 0..tries-1 whose riffs (8 bars asked) came out longest: an untrained model often ends a riff
    after a bar or two, and the measure is of drawing a riff of about 8 bars."""
    found = []
    for first in range(0, tries, 8):
        res = httpx.post(f"{url}/api/sample", json={"bars": bars, "num_samples": 8, "seed": first}, timeout=600)
        res.raise_for_status()
        found += [(r["bars"], r["notes"], r["seed"]) for r in res.json()["riffs"]]
    return [seed for *_, seed in sorted(found, reverse=True)[:n]]


def click_to_score(url: str, seeds: list[int]) -> list[float]:
    """ms from the Generate click to alphaTab's renderFinished, once per seed (a fresh page each time)."""
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no Chromium: apt-get install chromium (or set CHROMIUM=/path/to/chrome)")
    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for seed in seeds:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(url + "/")
            page.wait_for_function("window.studio && window.studio.api")
            page.fill("#opt-bars", "8")
            page.fill("#opt-seed", str(seed))
            page.fill("#candidates", "1")
            page.click("#generate")
            page.wait_for_function("window.studio.timings.length > 0 || !document.getElementById('message').hidden",
                                   timeout=300_000)
            timings = page.evaluate("window.studio.timings")
            if not timings:
                sys.exit(f"Generate failed: {page.inner_text('#message')}")
            out.append(timings[0])
            page.close()
        browser.close()
    return out


def server_share(url: str, seeds: list[int]) -> tuple[list[float], list[int]]:
    """ms of a direct POST /api/sample (8 bars, one riff) per seed, and the bars each riff got."""
    times, bars = [], []
    for seed in seeds:
        t = time.perf_counter()
        res = httpx.post(f"{url}/api/sample", json={"bars": 8, "num_samples": 1, "seed": seed}, timeout=300)
        times.append((time.perf_counter() - t) * 1000)
        res.raise_for_status()
        bars.append(res.json()["riffs"][0]["bars"])
    return times, bars


def load(url: str, clients: int = 4, each: int = 5) -> dict:
    """`clients` threads x `each` requests at once: answers, failures, duplicate ids, latencies."""
    answers, failures, lock = [], [], threading.Lock()

    def client(c: int) -> None:
        with httpx.Client(timeout=600) as http:
            for k in range(each):
                t = time.perf_counter()
                res = http.post(f"{url}/api/sample", json={"bars": 4, "num_samples": 1, "seed": 1000 * c + k})
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    if res.status_code == 200:
                        answers.append((res.json()["riffs"][0]["id"], ms))
                    else:
                        failures.append(f"{res.status_code} {res.text[:120]}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [a for a, _ in answers]
    lat = sorted(ms for _, ms in answers)
    return {"asked": clients * each, "answered": len(answers), "failed": failures, "unique": len(set(ids)),
            "wall_s": time.perf_counter() - t0, "p50": lat[len(lat) // 2] if lat else 0, "max": lat[-1] if lat else 0}


def ms_spread(values: list[float]) -> list[str]:
    """Median, min and max of millisecond timings, as table cells."""
    return [f"{statistics.median(values):.0f} ms", f"{min(values):.0f} ms", f"{max(values):.0f} ms"]


def report(args, seeds, clicks, server_ms, bars, rounds, mem) -> str:
    dev = args.device
    cpu = platform.processor() or platform.machine()
    what = "an untrained tiny run (tests/helpers/studio_runs.py: 1 layer, 32 wide)" if not args.run else f"run `{args.run}`"
    r1, r2 = rounds
    lines = [
        f"Measured with `python benchmarks/bench_studio.py{' --run ' + str(args.run) if args.run else ''} "
        f"--device {dev}` on {what}, {dev.upper()} ({cpu}, {os.cpu_count()} cores, torch "
        f"{torch.__version__.split('+')[0]}, {torch.get_num_threads()} thread(s)); the cores were shared with other "
        "work, so treat single numbers as ±30%.",
        "",
        table(["what", "median", "min", "max"],
              [[f"click -> drawn score, 8 bars asked ({len(clicks)} runs)", *ms_spread(clicks)],
               [f"of which the server (POST /api/sample, {len(server_ms)} runs)", *ms_spread(server_ms)]], align="llll"),
        "",
        f"Seeds {', '.join(map(str, seeds))}: riffs of {', '.join(map(str, bars))} bars (8 asked; an untrained model "
        "often ends a riff after a bar or two, so the script times the longest riffs of seeds 0-63).",
        "",
        table(["load: 4 clients x 5 requests at once", "answered", "failed", "distinct riffs", "wall", "p50", "max",
               "server memory after"],
              [[name, f"{r['answered']}/{r['asked']}", len(r["failed"]), r["unique"], f"{r['wall_s']:.1f} s",
                f"{r['p50']:.0f} ms", f"{r['max']:.0f} ms", f"{m:.0f} MB"]
               for name, r, m in (("round 1", r1, mem[1]), ("round 2", r2, mem[2]))], align="l" * 8),
        "", f"Server memory before the load: {mem[0]:.0f} MB; after round 1: {mem[1]:.0f} MB; after round 2: "
        f"{mem[2]:.0f} MB ({mem[2] - mem[1]:+.0f} MB over 20 more requests)."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", type=Path, help="a run directory (default: an untrained tiny run)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", type=Path, help="replace the measured block of this Markdown file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run
        if run is None:
            from helpers.studio_runs import studio_run

            run = studio_run(Path(tmp) / "run")
        app = create_app(load_run(run, device=args.device), root=Path(tmp) / "served")
        with BackgroundServer(app, free_port()) as url:
            seeds = longest_seeds(url, args.repeat)  # also the warm-up (tokenizer tables, torch kernels)
            server_ms, bars = server_share(url, seeds)
            clicks = click_to_score(url, seeds)
            mem = [rss_mb()]
            rounds = []
            for _ in range(2):
                rounds.append(load(url))
                mem.append(rss_mb())
    text = report(args, seeds, clicks, server_ms, bars, rounds, mem)
    print(text)
    for r in rounds:
        if r["failed"] or r["answered"] != r["asked"] or r["unique"] != r["asked"]:
            sys.exit(f"lost or failed requests: {r}")
    if args.write:
        write_section(args.write, SECTION, text, by="python benchmarks/bench_studio.py --write PAGE")
        print(f"-> {args.write}")


if __name__ == "__main__":
    main()
