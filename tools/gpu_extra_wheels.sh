#!/usr/bin/env bash
# The wheels `tools/gpu_checks.sh speed` needs, for Python 3.12 / x86-64, in .whl-speed/ at the project root: those
# of ../shared/tools/gpu-wheels.sh (in .whl/, run it first) less music21 and pretty_midi (the speed stage reads and
# writes no files, and the carried tree is limited to 64 MiB), plus transformers and what it imports (HF GPT-2, the
# bench scripts' peer), pytest (the GPU tests) and defusedxml (imported by guitarformer's readers). The GPU image's
# numpy, click, pyyaml and tqdm are kept. Then, for the speed and compiled stages: carry [".whl-speed"] and run
#   WHL=.whl-speed bash tools/gpu_checks.sh speed      (or: compiled; `sample` needs neither music21 nor pretty_midi)
# (the other stages keep WHL=.whl and carry [".whl"]).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -d .whl ] || { echo "no .whl/: run ../shared/tools/gpu-wheels.sh first" >&2; exit 1; }
grep -qx '/.whl-speed/' .git/info/exclude 2>/dev/null || echo '/.whl-speed/' >> .git/info/exclude
rm -rf .whl-speed && mkdir -p .whl-speed
for f in .whl/*.whl; do
  case $(basename "$f") in music21-*|pretty_midi-*) ;; *) cp "$f" .whl-speed/ ;; esac
done
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .whl-speed "transformers==5.24.0" pytest defusedxml
rm -f .whl-speed/numpy-* .whl-speed/click-* .whl-speed/pyyaml-* .whl-speed/PyYAML-* .whl-speed/tqdm-*
du -sh .whl-speed
