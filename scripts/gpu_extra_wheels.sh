#!/usr/bin/env bash
# The wheels `scripts/gpu_checks.sh speed` needs beyond ../shared/tools/gpu-wheels.sh, for Python 3.12 / x86-64,
# into .whl/: transformers and what it imports (HF GPT-2, the bench scripts' peer), pytest (the GPU tests) and
# defusedxml (guitarformer's XML readers). The GPU image's numpy, click, pyyaml and tqdm are kept. The carried tree is
# limited to 64 MiB: with these the speed stage needs neither music21 nor pretty_midi, so `--lean` moves those two
# wheels to .whl-aside/ (put them back for the train/tab/release stages, which read and write files).
#   bash ../shared/tools/gpu-wheels.sh && bash scripts/gpu_extra_wheels.sh --lean
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
P=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
   --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
tmp=$(mktemp -d)
python3 -m pip download -q "${P[@]}" -d "$tmp" "transformers==5.24.0" pytest defusedxml
for f in "$tmp"/*.whl; do
  case $(basename "$f") in numpy-*|click-*|pyyaml-*|PyYAML-*|tqdm-*) ;; *) cp -n "$f" .whl/ ;; esac
done
rm -rf "$tmp"
if [ "${1:-}" = --lean ]; then
  grep -qx '/.whl-aside/' .git/info/exclude 2>/dev/null || echo '/.whl-aside/' >> .git/info/exclude
  mkdir -p .whl-aside && mv .whl/music21-* .whl/pretty_midi-* .whl-aside/ 2>/dev/null || true
fi
du -sh .whl
