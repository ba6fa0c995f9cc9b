"""What a riff costs once the run is loaded (the studio's wait, a script's): eager against `--compile`, interleaved.

    python benchmarks/bench_riff_wait.py                      # the shipped model, 16-bar riffs and guided 8-bar ones
    python benchmarks/bench_riff_wait.py --run RUN --rounds 5

Each riff is `guitarformer sample`'s own path, in-process (app.sample on a loaded run: the draw, the fingering, the
MIDI/tab rendering, no file written), one at a time as the studio draws its candidates. The compiled step is warmed
first as `studio --compile` does (app.warm_up: one row and a guided riff's two, the compiling timed apart), then
both ways alternate riff by riff, so background load hits them alike. Prints seconds per riff: median and range.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from harness import Timer, interleaved, table

ASKS = {
    "16 bars": {"bars": 16},
    "8 bars, --key D:major --style jig (guided)": {"bars": 8, "key": "D:major", "style": "jig"},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="pretrained")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3, help="riffs of each ask per round (seeds 1..N)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from guitarformer.app import SampleRequest, load_run, sample, warm_up
    from guitarformer.vocab.tab_tokens import has_controls

    loaded = load_run(args.run, None, "cpu")
    with Timer() as t:
        warm_up(loaded)
    print(f"warm-up (compiling the one-token step, or finding it in inductor's disk cache): {t.seconds:.1f} s")
    controls = has_controls(loaded.tokenizer)
    asks = {k: v for k, v in ASKS.items() if controls or "key" not in v}
    times = {(name, c): [] for name in asks for c in (False, True)}
    for _ in range(args.rounds):
        for name, ask in asks.items():
            for seed in range(1, args.seeds + 1):
                ways = {c: (lambda c=c: sample(SampleRequest.of(num_samples=1, seed=seed, compile=c, **ask), loaded))
                        for c in (False, True)}
                for c, ts in interleaved(ways, rounds=1).items():
                    times[name, c] += ts
    print(f"\n{args.run}, {args.threads} thread(s), torch {torch.__version__}; {args.rounds} rounds x {args.seeds} "
          "seeds, seconds per riff\n")
    spread = lambda ts: f"{statistics.median(ts):.3f} ({min(ts):.3f}-{max(ts):.3f})"  # noqa: E731
    rows = [[name, spread(times[name, False]), spread(times[name, True]),
             f"{statistics.median(times[name, False]) / statistics.median(times[name, True]):.2f}x"] for name in asks]
    print(table(["riff", "eager (median, range)", "compiled (median, range)", "eager / compiled"], rows))


if __name__ == "__main__":
    main()
