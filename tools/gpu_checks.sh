#!/usr/bin/env bash
# The GPU numbers in docs/results/BENCH_GPU.md, in two device calls of under 10 minutes each (one H100):
#   bash tools/gpu_checks.sh train   # default run wall time; decoder-base tokens/s, MFU, peak memory; sampling tokens/s
#   bash tools/gpu_checks.sh bench   # 2-process DDP with NCCL; ours vs HF GPT-2 (gpt2-85m, bf16, torch.compile)
#   bash tools/gpu_checks.sh tab     # the default run with tab tokens and with pitch-only REMI, their NLL per note
#                                      # (bench_tab_nll.py), and a tab model on the human tabs in $TABS (a dataset
#                                      # prepared from the train half, benchmarks/bench_fingering.py --list-split)
#   bash tools/gpu_checks.sh speed   # #28: the captured decoding step's tests; training ours vs HF GPT-2 (decoder-base
#                                      # dims, bf16, compile, fused AdamW) with MFU; sampling at batch 1 and 32 with the
#                                      # constraint vs HF generate (captured and eager steps; the constraint on the
#                                      # GPU and where `sample` keeps it; fp32 and bf16 weights); gpu_profile_step.py's
#                                      # tables into $LOG; writes the section of
#                                      # docs/results/BENCH_GPU.md between its speed markers (a copy comes back in $OUT)
#   bash tools/gpu_checks.sh compiled # #28, ~5-6 min, WHL=.whl-speed as the speed stage: the step compiled, then
#                                      # captured (SamplingParams(compile=True)
#                                      # on CUDA: tests, decoder-base and the shipped model at batch 1 and 32 vs the plain
#                                      # captured step and HF) and a 16-bar riff from the command to the files on the
#                                      # GPU and the CPU; writes docs/results/BENCH_GPU.md between its compiled markers
#   bash tools/gpu_checks.sh trainbatch # #28, ~8 min, WHL=.whl-speed: decoder-base training vs HF GPT-2 at batch
#                                      # $BATCHES (default "32 64"; the speed stage's is 16): does MFU rise toward 45%?
#   bash tools/gpu_checks.sh tuning  # #28, WHL=.whl-speed: the compiled batch-1 step under inductor options, each
#                                      # compiled afresh (gpu_decode_ab.py tuning; TUNE_EXTRA='{"a": 1};{"b": true}')
#   bash tools/gpu_checks.sh release # a release candidate of the default preset (tab layout 3, controls read and not
#                                      # scored, half the windows plain) at GPU length: $REL_STEPS steps (default 15000)
#                                      # in a $REL_MIN-minute budget (default 5); the run comes back as run-release.tar
#                                      # for tools/release_model.py --from-run and the bench scripts on a CPU;
#                                      # REL_SET="--set model.n_embd=192 ..." changes the preset
#   bash tools/gpu_checks.sh guitar  # the guitar-corpus release: the built-in corpus built and prepared on the
#                                      # machine's cores, then `release`'s run; corpus.tar, dataset.tar and
#                                      # run-release.tar come back for tools/release_model.py --from-run
#   bash tools/gpu_checks.sh ctl     # #18: a decoder with controls and infilling and an encoder-decoder with
#                                      # infilling on $CTL (a dataset prepared with --set data.controls=true);
#                                      # control adherence (bench_controls.py) and infilling (bench_infill.py)
# Needs the wheels the GPU image lacks in $WHL (default .whl/, from ../shared/tools/gpu-wheels.sh; the speed stage also
# WHL=.whl-speed from tools/gpu_extra_wheels.sh) and, to skip the
# first-use corpus build, a prepared built-in corpus under $GUITARFORMER_CACHE (default .gpucache/). Logs and the
# default run (config, tokenizer, best checkpoint) come back as $OUT/gpu-<stage>.tar.
set -uo pipefail
STAGE=${1:-train}; OUT=${OUT:-gpu-out}; LOG=${LOG:-/tmp/gpulog}; mkdir -p "$OUT" "$LOG"
WHL=${WHL:-.whl}; export GUITARFORMER_CACHE=${GUITARFORMER_CACHE:-$PWD/.gpucache}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $WHL/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
step() { echo "=== $1 ($(date +%T))"; }
pack() {  # a run without optimizer state: config, tokenizer, metrics, model weights (one file each under 16 MB)
  python3 -c "import sys, torch; s = torch.load(sys.argv[1], weights_only=True); \
torch.save({k: s[k] for k in ('model', 'config', 'step') if k in s}, sys.argv[1])" "$1/ckpt/best.pt"
  extra=$(cd "$1" && ls controls_seen.json forms_seen.json 2>/dev/null)  # what release_model.py and sample read
  tar -cf "$OUT/run-$2.tar" -C "$1" config.yaml tokenizer.json summary.json metrics.jsonl ckpt/best.pt $extra; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$LOG/gpu.txt"
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> "$LOG/gpu.txt"; cat "$LOG/gpu.txt"

if [ "$STAGE" = train ]; then
  step "default run (guitarformer train = decoder-small, bf16, compile)"
  /usr/bin/time -f "%e s wall" -o "$LOG/default_time.txt" python3 -m guitarformer train --run-dir /tmp/runs/default > "$LOG/default.log" 2>&1
  tail -3 "$LOG/default.log"; cat "$LOG/default_time.txt"
  mkdir -p "$LOG/default/ckpt"; cp /tmp/runs/default/{config.yaml,tokenizer.json,summary.json,metrics.jsonl} "$LOG/default/"
  cp /tmp/runs/default/ckpt/best.pt "$LOG/default/ckpt/"
  step "decoder-base, 300 steps on the corpus (tokens/s, MFU, peak memory from the training loop)"
  timeout 240 python3 -m guitarformer train --config decoder-base --max-steps 300 --set train.eval_interval=1000 \
    --set train.sample_interval=100000 --run-dir /tmp/runs/base > "$LOG/base.log" 2>&1; tail -2 "$LOG/base.log"
  grep '"perf"' /tmp/runs/base/metrics.jsonl > "$LOG/base_perf.jsonl"; tail -2 "$LOG/base_perf.jsonl"
  step "sampling tokens/s"
  timeout 150 python3 benchmarks/bench_sample.py --device cuda --dims base --batches 1,32 --repeat 2 > "$LOG/sample_base.md" 2>&1; tail -5 "$LOG/sample_base.md"
  timeout 90 python3 benchmarks/bench_sample.py --device cuda --dims small --batches 1,32 --repeat 2 > "$LOG/sample_small.md" 2>&1; tail -5 "$LOG/sample_small.md"
  ( /usr/bin/time -f "%e s wall" python3 -m guitarformer sample --run /tmp/runs/default --out /tmp/s/r.mid --num-samples 32 --tab /tmp/s/r.txt ) > "$LOG/sample_cli.txt" 2>&1; tail -2 "$LOG/sample_cli.txt"
elif [ "$STAGE" = tab ]; then
  step "default run, tab tokens (TabREMI)"
  /usr/bin/time -f "%e s wall" -o "$LOG/tab_default_time.txt" python3 -m guitarformer train --run-dir /tmp/runs/tab-default \
    > "$LOG/tab_default.log" 2>&1; tail -2 "$LOG/tab_default.log"; cat "$LOG/tab_default_time.txt"
  step "default run, pitch-only REMI"
  python3 -m guitarformer train --set data.tokenizer=REMI --run-dir /tmp/runs/remi-default > "$LOG/remi_default.log" 2>&1
  tail -2 "$LOG/remi_default.log"
  step "NLL per note on the same val tunes"
  python3 benchmarks/bench_tab_nll.py /tmp/runs/remi-default /tmp/runs/tab-default --device cuda > "$LOG/tab_nll.md" 2>&1
  cat "$LOG/tab_nll.md"
  if [ -n "${TABS:-}" ]; then
    step "tab model on the human tabs' train half ($TABS)"
    python3 -m guitarformer train --data "$TABS" --run-dir /tmp/runs/tabs --max-steps ${TAB_STEPS:-3000} \
      --set model.dropout=0.1 --set train.eval_interval=500 > "$LOG/tabs.log" 2>&1; tail -2 "$LOG/tabs.log"
    pack /tmp/runs/tabs tabs
  fi
  pack /tmp/runs/tab-default tab-default; pack /tmp/runs/remi-default remi-default
elif [ "$STAGE" = tabctx ]; then  # where the tab tokens' extra NLL per note comes from: notes of context and per step
  step "default config at context 640 (= 512 REMI tokens' notes in tab tokens), TabREMI and REMI"
  for tk in TabREMI REMI; do
    python3 -m guitarformer train --set data.tokenizer=$tk --set model.block_size=640 --run-dir /tmp/runs/$tk-640 \
      > "$LOG/$tk-640.log" 2>&1; tail -1 "$LOG/$tk-640.log"; done
  step "TabREMI at context 512 with 1.25x the steps (the notes REMI's 1,150 steps see)"
  python3 -m guitarformer train --max-steps 1440 --run-dir /tmp/runs/TabREMI-1440 > "$LOG/tab-1440.log" 2>&1
  tail -1 "$LOG/tab-1440.log"
  python3 benchmarks/bench_tab_nll.py /tmp/runs/TabREMI-640 /tmp/runs/REMI-640 /tmp/runs/TabREMI-1440 --device cuda \
    > "$LOG/tab_nll_ctx.md" 2>&1; cat "$LOG/tab_nll_ctx.md"
elif [ "$STAGE" = tabseed ]; then  # run-to-run spread of the NLL per note: the same four runs with another seed
  for ctx in 512 640; do for tk in TabREMI REMI; do
    python3 -m guitarformer train --set data.tokenizer=$tk --set model.block_size=$ctx --set train.seed=${SEED:-2} \
      --run-dir /tmp/runs/$tk-$ctx-s${SEED:-2} > "$LOG/$tk-$ctx.log" 2>&1; tail -1 "$LOG/$tk-$ctx.log"; done; done
  python3 benchmarks/bench_tab_nll.py /tmp/runs/*-s${SEED:-2} --device cuda > "$LOG/tab_nll_seed.md" 2>&1
  cat "$LOG/tab_nll_seed.md"
elif [ "$STAGE" = speed ]; then
  step "tests that need a GPU: the captured (CUDA graph) decoding step, the static KV cache"
  timeout ${TEST_S:-120} python3 -m pytest tests/generation/test_sample.py tests/models/test_models.py -q -p no:cacheprovider -m "slow or not slow" -k "captured or cuda or kv_cache or host or one_query" \
    > "$LOG/speed_tests.txt" 2>&1; tail -3 "$LOG/speed_tests.txt"
  step "training: ours vs HF GPT-2, decoder-base dims (gpt2-85m), bf16 autocast, torch.compile, fused AdamW"
  timeout ${TRAIN_S:-300} python3 benchmarks/bench_model.py --device cuda --dtype bfloat16 --preset gpt2-85m --what speed --compile \
    --rounds ${ROUNDS:-6} --steps ${STEPS:-3} --no-eager --out "$LOG/speed_train.md" > "$LOG/speed_train.log" 2>&1; tail -6 "$LOG/speed_train.log"
  step "sampling: decoder-base dims, batch 1 and 32, constraint on, vs HF generate"
  timeout ${SAMPLE_S:-200} python3 benchmarks/bench_sample.py --device cuda --dims base --batches 1,32 --repeat ${REPEAT:-3} --recompute-new 16 \
    > "$LOG/speed_sample.md" 2>&1; tail -12 "$LOG/speed_sample.md"
  step "sampling: decoder-base dims, bf16 weights on both sides"
  timeout ${SAMPLE_S:-200} python3 benchmarks/bench_sample.py --device cuda --dims base --dtype bfloat16 --batches 1,32 \
    --repeat ${REPEAT:-3} --recompute-new 16 > "$LOG/speed_sample_bf16.md" 2>&1; tail -8 "$LOG/speed_sample_bf16.md"
  step "sampling: the shipped model itself (what guitarformer sample runs), batch 1 and 32"
  timeout ${SHIPPED_S:-120} python3 benchmarks/bench_sample.py --device cuda --pretrained --batches 1,32 --repeat ${REPEAT:-3} --recompute-new 16 \
    > "$LOG/speed_shipped.md" 2>&1; tail -6 "$LOG/speed_shipped.md"
  step "where a batch-1 token's time goes (torch.profiler, cProfile): gpu_profile_step.py, tables in \$LOG"
  timeout ${PROFILE_S:-90} python3 benchmarks/gpu_profile_step.py --new 128 --out "$LOG" > "$LOG/profile.txt" 2>&1
  grep -v USDT "$LOG/profile.txt" | tail -8
  python3 benchmarks/gpu_sections.py speed "$LOG"
  cp docs/results/BENCH_GPU.md "$LOG/BENCH_GPU.md"; cp docs/results/BENCH_GPU.md "$OUT/BENCH_GPU.md"
elif [ "$STAGE" = compiled ]; then
  step "tests: the compiled step captured on CUDA, the captured step"
  timeout ${TEST_S:-200} python3 -m pytest tests/generation/test_sample.py tests/models/test_models.py -q -p no:cacheprovider -m "slow or not slow" -k "compiled or captured" \
    > "$LOG/compiled_tests.txt" 2>&1; tail -3 "$LOG/compiled_tests.txt"
  step "sampling: decoder-base dims, the step compiled then captured, batch 1 and 32"
  timeout ${SAMPLE_S:-150} python3 benchmarks/bench_sample.py --device cuda --dims base --batches 1,32 --repeat ${REPEAT:-2} \
    --recompute-new 4 --compile > "$LOG/compiled_base.md" 2>&1; tail -6 "$LOG/compiled_base.md"
  step "sampling: the shipped model, the step compiled then captured, batch 1 and 32"
  timeout ${SHIPPED_S:-90} python3 benchmarks/bench_sample.py --device cuda --pretrained --batches 1,32 --repeat ${REPEAT:-2} \
    --recompute-new 4 --compile > "$LOG/compiled_shipped.md" 2>&1; tail -6 "$LOG/compiled_shipped.md"
  step "a 16-bar riff from the shipped model, from the command to the files (GPU, GPU compiled, CPU)"
  mkdir -p /tmp/riff; : > "$LOG/riff_times.txt"
  for args in "--device cuda" "--device cuda --compile" "--device cpu" "--device cuda" "--device cpu"; do
    /usr/bin/time -f "$args: %e s wall" -a -o "$LOG/riff_times.txt" timeout 120 python3 -m guitarformer sample --bars 16 \
      --seed 1 --out /tmp/riff/r.mid --tab /tmp/riff/r.txt $args > /dev/null 2>> "$LOG/riff_err.txt"
  done
  cat "$LOG/riff_times.txt"
  python3 benchmarks/gpu_sections.py compiled "$LOG"
  cp docs/results/BENCH_GPU.md "$OUT/BENCH_GPU.md"
elif [ "$STAGE" = trainbatch ]; then  # #28: does a bigger batch take decoder-base training toward 45% MFU?
  for b in ${BATCHES:-32 64}; do
    step "training at batch $b: ours vs HF GPT-2, decoder-base dims (gpt2-85m), bf16 autocast, torch.compile"
    timeout ${TRAIN_S:-240} python3 benchmarks/bench_model.py --device cuda --dtype bfloat16 --preset gpt2-85m --what speed \
      --compile --batch $b --rounds ${ROUNDS:-4} --steps ${STEPS:-3} --no-eager --out "$LOG/train_b$b.md" \
      > "$LOG/train_b$b.log" 2>&1; tail -5 "$LOG/train_b$b.log"
  done
elif [ "$STAGE" = release ]; then
  step "release candidate: guitarformer train (the default preset), ${REL_STEPS:-15000} steps in ${REL_MIN:-5} min"
  /usr/bin/time -f "%e s wall" -o "$LOG/release_time.txt" python3 -m guitarformer train --run-dir /tmp/runs/release \
    --max-steps ${REL_STEPS:-15000} --set train.time_budget_min=${REL_MIN:-5} --set train.eval_interval=1000 ${REL_SET:-} \
    > "$LOG/release.log" 2>&1; tail -3 "$LOG/release.log"; cat "$LOG/release_time.txt"
  pack /tmp/runs/release release
elif [ "$STAGE" = guitar ]; then  # the guitar corpus release: the corpus built and prepared on the machine's cores
  # (set GUITARFORMER_CACHE to a path that exists on the CPU machine too: the dataset's manifest names its files), then trained as `release`; the dataset comes back too, for the benches on a CPU
  step "the built-in corpus prepared"
  python3 -m guitarformer prepare > "$LOG/prepare.log" 2>&1; tail -4 "$LOG/prepare.log"
  ds=$(ls -d "$GUITARFORMER_CACHE"/datasets/builtin-* | head -1)
  tar -cf "$OUT/dataset.tar" -C "$(dirname "$ds")" "$(basename "$ds")"
  tar -cf "$OUT/corpus.tar" -C "$GUITARFORMER_CACHE" corpus  # the benches read the corpus's files and labels
  step "release run: ${REL_STEPS:-40000} steps at most in ${REL_MIN:-6} min"
  /usr/bin/time -f "%e s wall" -o "$LOG/release_time.txt" python3 -m guitarformer train --run-dir /tmp/runs/release \
    --max-steps ${REL_STEPS:-40000} --set train.time_budget_min=${REL_MIN:-6} --set train.eval_interval=1000 \
    ${REL_SET:-} > "$LOG/release.log" 2>&1; tail -4 "$LOG/release.log"; cat "$LOG/release_time.txt"
  pack /tmp/runs/release release
elif [ "$STAGE" = tuning ]; then  # #28: inductor options for the captured batch-1 step, each compiled afresh
  step "the compiled step's inductor options: as they are, and with each of \$TUNE_EXTRA (JSON objects, ';'-separated)"
  extras=(); IFS=';' read -ra opts <<< "${TUNE_EXTRA:-}"; for o in "${opts[@]}"; do extras+=(--extra "$o"); done
  timeout ${TUNE_S:-200} python3 benchmarks/gpu_decode_ab.py tuning --dtypes ${TUNE_DTYPES:-fp32} --no-untuned "${extras[@]}" \
    > "$LOG/tuning.md" 2>&1; cat "$LOG/tuning.md"
elif [ "$STAGE" = ctl ]; then
  step "decoder with controls and infilling on $CTL"
  python3 -m guitarformer train --data "$CTL" --set data.infill=${INFILL:-0.3} --max-steps ${CTL_STEPS:-2500} \
    --set model.dropout=0.1 --set train.eval_interval=500 --run-dir /tmp/runs/ctl > "$LOG/ctl.log" 2>&1
  tail -1 "$LOG/ctl.log"; pack /tmp/runs/ctl ctl
  step "encoder-decoder with infilling on $CTL"
  python3 -m guitarformer train --config encdec-small --data "$CTL" --set data.infill=${INFILL:-0.3} \
    --max-steps ${CTL_STEPS:-2500} --set train.eval_interval=500 --run-dir /tmp/runs/ctl-ed > "$LOG/ctl-ed.log" 2>&1
  tail -1 "$LOG/ctl-ed.log"; pack /tmp/runs/ctl-ed ctl-ed
  step "control adherence"
  timeout ${BENCH_S:-200} python3 benchmarks/bench_controls.py /tmp/runs/ctl --device cuda --bars 4 --num-samples 16 \
    --out "$LOG/CONTROLS.md" > "$LOG/bench_controls.log" 2>&1; tail -30 "$LOG/bench_controls.log"
  if [ -f benchmarks/bench_infill.py ]; then
    step "infilling"
    timeout ${BENCH_S:-200} python3 benchmarks/bench_infill.py /tmp/runs/ctl /tmp/runs/ctl-ed --device cuda \
      > "$LOG/bench_infill.log" 2>&1; tail -30 "$LOG/bench_infill.log"
  fi
elif [ "$STAGE" = infill-ed ]; then  # the encoder-decoder's infilling numbers (its checkpoint is over 16 MB)
  step "encoder-decoder with infilling on $CTL"
  python3 -m guitarformer train --config encdec-small --data "$CTL" --set data.infill=${INFILL:-0.3} \
    --max-steps ${CTL_STEPS:-2500} --set train.eval_interval=100000 --run-dir /tmp/runs/ctl-ed > "$LOG/ctl-ed.log" 2>&1
  tail -1 "$LOG/ctl-ed.log"
  timeout ${BENCH_S:-200} python3 benchmarks/bench_infill.py /tmp/runs/ctl-ed --num ${NUM:-60} --device cuda \
    --out "$LOG/INFILL_ed.md" > "$LOG/bench_infill_ed.log" 2>&1; tail -5 "$LOG/bench_infill_ed.log"
else
  step "2-process DDP, NCCL (tiny config)"
  timeout 150 torchrun --standalone --nproc_per_node=2 -m guitarformer train --config tiny --max-steps 30 --device cuda \
    --run-dir /tmp/runs/ddp > "$LOG/ddp.log" 2>&1; echo "ddp rc=$?" >> "$LOG/ddp.log"; tail -4 "$LOG/ddp.log"
  step "bench_model: ours vs HF GPT-2 (gpt2-85m, bf16, torch.compile)"
  timeout 400 python3 benchmarks/bench_model.py --device cuda --dtype bfloat16 --preset gpt2-85m --compile --rounds 6 \
    --no-eager --out "$LOG/bench_models_gpu.md" > "$LOG/bench_model.log" 2>&1; tail -20 "$LOG/bench_model.log"
fi
step done
tar -cf "$OUT/gpu-$STAGE.tar" -C "$LOG" .
