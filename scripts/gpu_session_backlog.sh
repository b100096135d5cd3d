#!/usr/bin/env bash
# gpu_session_backlog.sh OUT [PART...]: issue 49's GPU backlog in calls of under 10 minutes,
# from the repository root of the GPU machine with the programs bundled in .bundle/ (or
# packed as .gpu/bundle.txz, unpacked first). Every step runs under what is left of
# DEADLINE seconds (default 540) and writes OUT/w/STEP.log; OUT/summary.txt says each
# step's exit status and time, and OUT/w travels back packed as OUT/logs.tgz.
#   tests:   test_kernels_gpu, test_cuda_backend, test_model_gpu (and at head dimensions 64
#            and 256; whichever are bundled; TESTS names others)
#   sanitize: compute-sanitizer memcheck and racecheck on test_kernels_gpu's quick mode
#   speed:   bench kernels at 32/8 (B=1 8K-128K and B=8 bimodal, FlashInfer's paths in the
#            same types): FP16, FP16 over FP8 KV, BF16 (SPEED names fewer: fp16 fp16_fp8 bf16)
#   dims:    bench kernels at head dimensions 64 and 256 (llama-3.2-1b's 32/8, gemma-2-9b's
#            16/8), FP16 and over FP8 KV
#   FILE:    an executable script, run as FILE W (its files under W), for at most
#            PART_LIMIT seconds (default 120)
#   types:   FlashInfer's paths in every type against PersistentKV's best route: BF16 over
#            FP8 KV at 32/8, then groups 1 and 8 (32/32, 64/8) in BF16 and FP16 over FP8 KV
#            on B=1 32K and B=8 bimodal (GROUP_TYPES, KB_GROUPS name others); w/types.md
#            gathers each run's last table (the speed part's runs too, where this call made
#            them)
#   calfp8:  pkvsim calibrate at G=4 without the dense part, its FP8 sweep and fit
#            (kv_fp8_cta_gbps) among the rest
#   own:     this GPU's own measurement: on an H100, pkvsim calibrate --groups 4 (the measured
#            H100 calibration the derived preset is held against, issue 44 item 6); on an
#            H200, the served model's twelve type runs (llama-3.1-8b l8b_b1_1k, l8b_b8_32k,
#            l8b_b64_4k in FP16, BF16 and either over FP8 KV) for the per-step comparison
#            against h200.json (bench/model_accuracy.py)
#   grid:    the served model's fit grid (ref_paged and pkv_workqueue fixed, 70 runs) on
#            CAL, the GPU's own calibration (default the H100's of 2026-12-06 in
#            bench/results/2026-12-06-h100-calibrate/, for issue 44 item 6's measured
#            H100 preset), packed in w/fit/
#   saturation: the saturated workloads (gpu_session_saturation.sh, RUNS) on CAL
#   b1:      the study layer's B=1 32K in-loop step (FP16 and over FP8 KV), the bundle's
#            pkvsim_before (a build to compare with, where bundled) and pkvsim alternated
#            B1_REPS times (default 2; B1_FILE another experiment, one that allows this
#            GPU; issue 45's check of the cuda backend's one run path)
#   loop:    served-model runs on the cuda backend: qwen2.5-7b B=8 under the G 1-8 gate (not
#            measured since), llama-3.2-1b and gemma-2-9b B=8 (head dimensions 64 and 256),
#            the scheduler's chunked_prefill
set -u
out=${1:?usage: gpu_session_backlog.sh OUT [tests|sanitize|speed|dims|types|calfp8|own|grid|saturation|b1|loop|FILE ...]}
shift
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(tests speed)
deadline=${DEADLINE:-540}
w=$out/w
mkdir -p "$w"
[ -d .bundle ] || tar xJf .gpu/bundle.txz
# The binaries name files under the checkout they were built in.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
here=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader |
  tee "$out/summary.txt"
git rev-parse --short HEAD 2> /dev/null | tee -a "$out/summary.txt"

# step NAME LIMIT CMD...: CMD under min(LIMIT, what the deadline leaves), its output in w/NAME.log.
step() {
  local name=$1 lim=$2 left=$((deadline - SECONDS)) t0=$SECONDS
  shift 2
  if [ "$left" -lt 15 ]; then echo "$name: skipped (deadline)" | tee -a "$out/summary.txt"; return; fi
  [ "$lim" -le "$left" ] || lim=$left
  timeout --signal=INT --kill-after=10 "$lim" "$@" > "$w/$name.log" 2>&1
  echo "$name: rc $?, $((SECONDS - t0)) s: $(tail -1 "$w/$name.log")" | tee -a "$out/summary.txt"
}
has() { [ -x ".bundle/bin/$1" ]; }
cases="b1-8k:8K;b1-32k:32K;b1-64k:64K;b1-128k:128K;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K"
cal=experiments/calibration/h200.json
kb() { # kb NAME ARGS...: bench kernels, its table to w/NAME.txt
  local name=$1
  shift
  step "$name" 120 .bundle/run pkvsim bench kernels --reps 20 --calibration "$cal" \
    --out "$w/$name.txt" "$@"
}

for part in "${parts[@]}"; do
  case $part in
  tests)
    for t in ${TESTS:-test_kernels_gpu test_cuda_backend test_model_gpu test_model_gpu_d64 test_model_gpu_d256}; do
      has $t && step "$t" 200 .bundle/run "$t"
    done
    ;;
  sanitize)
    for tool in ${TOOLS:-memcheck racecheck}; do
      has test_kernels_gpu && PKV_QUICK=1 LD_LIBRARY_PATH=$here/.bundle/lib:/usr/local/cuda/lib64 \
        step "sanitizer_$tool" 300 compute-sanitizer --tool "$tool" .bundle/bin/test_kernels_gpu
    done
    ;;
  speed)
    for run in ${SPEED:-fp16 fp16_fp8 bf16}; do
      case $run in
      fp16) kb fp16 --heads 32/8 --cases "$cases" ;;
      fp16_fp8) kb fp16_fp8 --heads 32/8 --kv-dtype fp8_e4m3 --cases "$cases" ;;
      bf16) kb bf16 --heads 32/8 --dtype bf16 --cases "$cases" ;;
      esac
    done
    ;;
  dims)
    for hd in 64:32/8 256:16/8; do
      kb "d${hd%%:*}" --heads "${hd#*:}" --head-dim "${hd%%:*}" --cases "$cases"
      kb "d${hd%%:*}_fp8" --heads "${hd#*:}" --head-dim "${hd%%:*}" --kv-dtype fp8_e4m3 \
        --cases "$cases"
    done
    ;;
  types)
    kb bf16_fp8 --heads 32/8 --dtype bf16 --kv-dtype fp8_e4m3 --cases "$cases"
    for g in ${KB_GROUPS:-32/32:1 64/8:8}; do
      for t in ${GROUP_TYPES:-bf16:bf16 fp16:fp8_e4m3}; do
        kb "g${g#*:}_${t%%:*}_${t#*:}" --heads "${g%%:*}" --dtype "${t%%:*}" --kv-dtype "${t#*:}" \
          --cases "b1-32k:32K;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K"
      done
    done
    for f in "$w"/*.txt; do # each run's PersistentKV-against-FlashInfer table, named
      grep -q "faster FlashInfer" "$f" || continue
      echo "### $(basename "$f" .txt)"
      sed -n '/faster FlashInfer/,$p' "$f"
    done > "$w/types.md"
    ;;
  calfp8)
    step calibrate_fp8 240 .bundle/run pkvsim calibrate --groups 4 --model none \
      -o "$w/calibration_g4.json"
    ;;
  own)
    case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
    *H100*)
      step calibrate_h100 330 .bundle/run pkvsim calibrate --groups 4 -o "$w/h100-calibrate.json"
      ;;
    *)
      # the files name ../../experiments/calibration/h200.json: from .gpu/served/, the root's
      mkdir -p .gpu/served
      cp bench/results/2026-12-05-gpu-backlog/session32/served_h100/experiments/*.json .gpu/served/
      for f in .gpu/served/*.json; do
        n=$(basename "$f" .json)
        step "$n" 120 .bundle/run pkvsim run "$f" -b cuda -q -o "$w/$n.h5" --json "$w/$n.json"
      done
      ;;
    esac
    ;;
  b1)
    for k in $(seq "${B1_REPS:-2}"); do
      for p in pkvsim_before pkvsim; do
        has $p && step "b1_32k_${p}_$k" 90 .bundle/run $p run \
          "${B1_FILE:-bench/results/2026-12-04-fp8-gpu/b1_32k.json}" -b cuda -q -o "$w/b1_32k_${p}_$k.h5"
      done
    done
    ;;
  grid)
    CAL=${CAL:-bench/results/2026-12-06-h100-calibrate/h100-calibrate.json} ROUTES="ref_paged pkv_workqueue" SCHED=0 \
      step grid 560 scripts/gpu_session_fit.sh "$w/fit"
    ;;
  saturation)
    CAL=${CAL:-bench/results/2026-12-06-h100-calibrate/h100-calibrate.json} \
      RUNS=${RUNS:-latency_b8 burst200_c512 poisson40_c512 burst1000_c2048} \
      step saturation 560 scripts/gpu_session_saturation.sh "$w/sat"
    ;;
  loop)
    for m in qwen2.5-7b llama-3.2-1b gemma-2-9b; do
      step "${m}_b8_cuda" 90 .bundle/run pkvsim run "bench/model/${m}_b8.json" -b cuda -q \
        -o /tmp/m.h5 --json "$w/${m}_b8_cuda.json"
    done
    step chunked_prefill_cuda 200 .bundle/run pkvsim run experiments/scheduler/chunked_prefill.json \
      --backend cuda -o /tmp/cp.h5
    ;;
  *) if [ -x "$part" ]; then step "$(basename "$part")" "${PART_LIMIT:-120}" "$part" "$w"; else
    echo "unknown part $part" | tee -a "$out/summary.txt"; fi ;;
  esac
done
tar czf "$out/logs.tgz" -C "$out" w
echo "gpu_session_backlog: ${SECONDS} s" | tee -a "$out/summary.txt"
