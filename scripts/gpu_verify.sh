#!/usr/bin/env bash
# The whole GPU verification in one call, for the GPU machine (H200):
#   build      configure + build the library, tests and benchmark (skipped when BUILD holds a build)
#   tests      host tests, GPU tests (golden cases, options matrix, safety, PTX layer), the demo
#   sanitizer  compute-sanitizer memcheck, racecheck, synccheck on the small golden cases
#   bench      C++ benchmark over bench/cases.json -> bench.json (input of make_benchmark_md.py)
#   profile    Nsight Compute kernel durations on a few benchmark cases (PROFILE_CASES)
#   sass       Nsight Compute full set on one launch of each kernel of SASS_CASE (default T8192_H64):
#              details page and per-instruction SASS counters (source page, CSV) in the logs
#   cpsweep    the benchmark on few-head cases (SWEEP_CASES) for several forced context_split values
#              (SWEEP_SPLITS; 0 = the automatic plan) with context_method SWEEP_METHOD (0 automatic,
#              1 exact, 2 warm-up; default 0): calibrates src/launch/plan.cpp
#   python     pip install of the flash_kda package, pytest (FLA comparison when FLA is present)
#   pybench    Python benchmark: this package and FLA's Triton kernels in one run (FLA_CASES)
#   distributed  context parallelism across GPUs (needs >= 2 GPUs, else skipped with a message; installs
#              the package when it is not importable): the 2-process NCCL tests and the building blocks'
#              tests (pytest), the example, and the scaling benchmark (1 and 2 GPUs, DIST_T tokens, H = 8)
#              -> bench_distributed.json and BENCHMARK_CP_H200.md in OUT; NCCL_NVLS_ENABLE=0 throughout
# Usage: scripts/gpu_verify.sh [stage ...]     (default: build tests sanitizer bench python pybench)
# Environment: OUT (results folder, default /tmp/flash_kda_out: logs.tar.gz with every log, plus
#   summary.txt, bench.json, bench_python.json), BUILD (build folder, default build),
#   FLASH_KDA_DATA (golden/, cases.json, fla/; default .gpu_data, made by scripts/prepare_gpu_data.sh),
#   VARIANT_BUILDS (extra build folders whose benchmark is timed too, for comparing launcher knobs),
#   FLA_CASES (benchmark cases to time with FLA, default "T8192_H64 T8192_H8"; FLA autotunes each
#   new shape, minutes on a fresh machine), PROFILE_CASES (default "T8192_H64 B16_T4096_H32 T8192_H8 T65536_H8").
# Prints a summary last. Exit status: number of failed stages.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/flash_kda_out}
LOG=$(mktemp -d /tmp/flash_kda_logs.XXXX)
BUILD=${BUILD:-build}
DATA=${FLASH_KDA_DATA:-$ROOT/.gpu_data}
export FLASH_KDA_GOLDEN_DIR=${FLASH_KDA_GOLDEN_DIR:-$DATA/golden}
mkdir -p "$OUT"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build tests sanitizer bench python pybench)
summary=()
failed=0

note() { echo "=== $* ($(date -u +%H:%M:%S))"; }
record() {  # record NAME STATUS DETAIL
  summary+=("$(printf '%-10s %s %s' "$1" "$([ "$2" -eq 0 ] && echo PASS || echo "FAIL($2)")" "$3")")
  [ "$2" -eq 0 ] || failed=$((failed + 1))
}

stage_build() {
  if [ -x "$BUILD/tests/gpu/test_gpu" ] && [ -x "$BUILD/benchmarks/flash_kda_bench" ]; then
    record build 0 "using the carried build in $BUILD"
    return
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$LOG/build.log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" >>"$LOG/build.log" 2>&1
  local rc=$?
  tail -5 "$LOG/build.log"
  record build $rc "log: build.log"
}

stage_tests() {
  local rc=0 t
  for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    timeout 600 "$t" --gtest_brief=1 >"$LOG/$(basename "$t").log" 2>&1 || rc=$((rc + 1))
    tail -3 "$LOG/$(basename "$t").log"
  done
  # Outside the sanitizer, the PDL probe must also see its dependent grid start early.
  FLASH_KDA_REQUIRE_PDL_OVERLAP=1 timeout 900 "$BUILD/tests/gpu/test_gpu" --gtest_output="xml:$LOG/test_gpu.xml" \
    >"$LOG/test_gpu.log" 2>&1 || rc=$((rc + 1))
  grep -E "^\[ (errors|check|pdl) \]|FAILED|PASSED|SKIPPED" "$LOG/test_gpu.log" | head -90
  # The README's main job: the demo on the GPU, checked against the float64 CPU recurrence.
  timeout 300 "$BUILD/benchmarks/flash_kda_demo" >"$LOG/demo.log" 2>&1 || rc=$((rc + 1))
  cat "$LOG/demo.log"
  record tests $rc "logs: test_*.log, test_gpu.log, test_gpu.xml, demo.log"
}

stage_sanitizer() {
  # memcheck and synccheck: the golden cases, the PTX probes and one run of every kernel
  # configuration; racecheck: the golden cases and the probes (pass/fail), then, for information,
  # a run that reuses the recurrence's stage ring (see docs/performance_notes.md on its reports).
  local rc=0 tool r
  local golden='Golden/GoldenGpu.*/basic:Golden/GoldenGpu.*/varlen_edges:Golden/GoldenGpu.*/gva:Golden/GoldenGpu.*/softplus_gate:Ptx.*'
  local all="$golden:GpuOptions.EveryValueRowSplit:GpuContext.EverySegmentCount:GpuContext.VarlenInt32AndInt64Agree"
  all="$all:GpuTransition.LastSequencesOnlyAndVarlen:GpuTransition.BoundedTailIsTheLastChunks"
  for tool in memcheck synccheck racecheck; do
    local filter=$all
    [ "$tool" = racecheck ] && filter=$golden
    timeout 600 compute-sanitizer --tool "$tool" --error-exitcode 9 "$BUILD/tests/gpu/test_gpu" \
      --gtest_filter="$filter" >"$LOG/sanitizer_$tool.log" 2>&1
    r=$?
    echo "$tool ($filter): exit $r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer_$tool.log" | tail -1)"
    [ $r -eq 0 ] || rc=$((rc + 1))
  done
  timeout 600 compute-sanitizer --tool racecheck "$BUILD/tests/gpu/test_gpu" --gtest_filter=GpuOptions.EveryValueRowSplit \
    >"$LOG/sanitizer_racecheck_ring.log" 2>&1
  echo "racecheck (information, stage-ring reuse): $(grep -E 'RACECHECK SUMMARY' "$LOG/sanitizer_racecheck_ring.log" | tail -1)"
  record sanitizer $rc "logs: sanitizer_*.log"
}

stage_bench() {
  timeout 900 "$BUILD/benchmarks/flash_kda_bench" --cases "$DATA/cases.json" --json "$LOG/bench.json" \
    >"$LOG/bench.log" 2>&1
  local rc=$?
  cat "$LOG/bench.log"
  # Variant builds (VARIANT_BUILDS="build-x ...", e.g. other launcher knobs), timed in the same call.
  local v
  for v in ${VARIANT_BUILDS:-}; do
    [ -x "$v/benchmarks/flash_kda_bench" ] || continue
    timeout 600 "$v/benchmarks/flash_kda_bench" --cases "$DATA/cases.json" --json "$LOG/bench_$(basename "$v").json" \
      >"$LOG/bench_$(basename "$v").log" 2>&1
    echo "--- variant $v"
    cat "$LOG/bench_$(basename "$v").log"
  done
  record bench $rc "logs: bench.log, bench.json"
}

stage_profile() {
  local rc=0 c
  for c in ${PROFILE_CASES:-T8192_H64 B16_T4096_H32 T8192_H8 T65536_H8}; do
    # The first call's kernels (4 launches: with context parallelism, preparation, pass 1, combine, pass 2).
    timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum -k 'regex:chunk|combine' --launch-count 4 \
      "$BUILD/benchmarks/flash_kda_bench" --cases "$DATA/cases.json" --filter "$c" --iters 5 \
      >"$LOG/profile_$c.log" 2>&1 || rc=$((rc + 1))
    echo "$c: $(grep -E '(chunk|combine)_[a-z_]+kernel|gpu__time_duration' "$LOG/profile_$c.log" | sed -E 's/ +/ /g' |
      sed -E 's/.*([a-z]+_[a-z_]+kernel).*/\1/; s/.*gpu__time_duration.sum (\S+) (\S+)/\2 \1/' | paste -sd' ')"
  done
  record profile $rc "logs: profile_*.log"
}

stage_sass() {
  local rc=0 k c=${SASS_CASE:-T8192_H64}
  for k in chunk_prep chunk_recurrence; do
    timeout 300 ncu --set full --import-source yes -k "regex:$k" --launch-skip 2 --launch-count 1 -f -o "$LOG/sass_$k" \
      "$BUILD/benchmarks/flash_kda_bench" --cases "$DATA/cases.json" --filter "$c" --iters 5 >"$LOG/sass_$k.run.log" 2>&1 ||
      rc=$((rc + 1))
    ncu --import "$LOG/sass_$k.ncu-rep" --page details >"$LOG/sass_${k}_details.txt" 2>&1 || rc=$((rc + 1))
    ncu --import "$LOG/sass_$k.ncu-rep" --page source --csv --print-source sass >"$LOG/sass_${k}_source.csv" 2>&1 ||
      rc=$((rc + 1))
    rm -f "$LOG/sass_$k.ncu-rep"
    grep -E "Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Executed Instructions  " \
      "$LOG/sass_${k}_details.txt" | head -8
  done
  record sass $rc "logs: sass_*_details.txt, sass_*_source.csv"
}

stage_cpsweep() {
  local rc=0 n
  local cases=${SWEEP_CASES:-T8192_H8,T65536_H8,T32768_H32,T2048_H12_N1,T1024_H4_N1,T8192_H24_N1,T8192_H16_N1,T512_H32}
  for n in ${SWEEP_SPLITS:-1 0 2 3 4 5 7 9 13 17}; do
    echo "--- context_split $n"
    timeout 300 "$BUILD/benchmarks/flash_kda_bench" --cases "$DATA/cases.json" --filter "$cases" --iters 20 \
      --context-split "$n" --context-method "${SWEEP_METHOD:-0}" >"$LOG/cpsweep_$n.log" 2>&1 || rc=$((rc + 1))
    grep -vE "^(device|case|geometric)" "$LOG/cpsweep_$n.log" | awk '{printf "%s %s  ", $1, $3} END {print ""}'
  done
  record cpsweep $rc "logs: cpsweep_*.log (columns: case, graph ms)"
}

stage_python() {
  local rc=0
  export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
  timeout 400 python3 -m pip install --no-build-isolation --no-deps -v . >"$LOG/pip_install.log" 2>&1 || rc=$((rc + 1))
  tail -3 "$LOG/pip_install.log"
  if [ -d "$DATA/fla" ]; then export FLASH_KDA_FLA_DIR="$DATA"; fi
  (cd /tmp && timeout 600 python3 -m pytest -q -rs -s "$ROOT/tests/python" -p no:cacheprovider) >"$LOG/pytest.log" 2>&1 ||
    rc=$((rc + 1))
  grep -E "FLA Backend|\[ errors \]|passed|failed|error" "$LOG/pytest.log" | tail -40
  record python $rc "logs: pip_install.log, pytest.log"
}

stage_pybench() {
  local rc=0 fla_args=()
  export PYTHONUNBUFFERED=1
  [ -d "$DATA/fla" ] && fla_args=(--fla-dir "$DATA" --fla-cases ${FLA_CASES:-T8192_H64 T8192_H8})
  (cd /tmp && timeout 600 python3 "$ROOT/benchmarks/bench_python.py" --cases "$DATA/cases.json" \
    --json "$LOG/bench_python.json" "${fla_args[@]}") >"$LOG/bench_python.log" 2>&1 || rc=$((rc + 1))
  tail -40 "$LOG/bench_python.log"
  record pybench $rc "logs: bench_python.log, bench_python.json"
}

stage_distributed() {
  local rc=0 gpus
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$gpus" -lt 2 ]; then
    echo "distributed: this machine has $gpus GPU(s); the stage needs 2 (nvidia-h200-x2): skipped"
    record distributed 0 "skipped: $gpus GPU(s)"
    return
  fi
  export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
  if ! (cd /tmp && python3 -c "import flash_kda.distributed") >/dev/null 2>&1; then
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) timeout 400 python3 -m pip install --no-build-isolation --no-deps -v . \
      >"$LOG/pip_install_distributed.log" 2>&1 || rc=$((rc + 1))
  fi
  [ -d "$DATA/fla" ] && export FLASH_KDA_FLA_DIR="$DATA"
  (cd /tmp && timeout 900 python3 -m pytest -q -rs -s "$ROOT/tests/python/test_distributed.py" \
    "$ROOT/tests/python/test_cp_ops.py" "$ROOT/tests/python/test_cp_plan.py" -p no:cacheprovider) \
    >"$LOG/pytest_distributed.log" 2>&1 || rc=$((rc + 1))
  grep -E "^\[distributed\]|\[cp\]|passed|failed|error|skipped" "$LOG/pytest_distributed.log" | tail -45
  timeout 300 scripts/run_distributed.sh 2 benchmarks/example_distributed.py >"$LOG/example_distributed.log" 2>&1 ||
    rc=$((rc + 1))
  grep -E "^rank|relative" "$LOG/example_distributed.log"
  timeout 900 scripts/run_distributed.sh 2 benchmarks/bench_distributed.py --T ${DIST_T:-262144 1048576} \
    --commit "$(git rev-parse --short HEAD 2>/dev/null || echo "${COMMIT:-?}")" --json "$LOG/bench_distributed.json" \
    >"$LOG/bench_distributed.log" 2>&1 || rc=$((rc + 1))
  grep -vE "^(W|I)[0-9]{4}|^\*+$|OMP_NUM_THREADS|Setting OMP" "$LOG/bench_distributed.log" | tail -20
  if [ -f "$LOG/bench_distributed.json" ]; then
    python3 scripts/make_distributed_md.py --json "$LOG/bench_distributed.json" --out "$LOG/BENCHMARK_CP_H200.md" \
      --command "scripts/gpu_verify.sh distributed (scripts/run_distributed.sh 2 benchmarks/bench_distributed.py --T ${DIST_T:-262144 1048576})" \
      >/dev/null || rc=$((rc + 1))
    cp "$LOG/bench_distributed.json" "$LOG/BENCHMARK_CP_H200.md" "$OUT/" 2>/dev/null
    tail -4 "$LOG/BENCHMARK_CP_H200.md"
  fi
  record distributed $rc "logs: pytest_distributed.log, example_distributed.log, bench_distributed.log; BENCHMARK_CP_H200.md"
}

note "flash_kda GPU verification: $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(nvidia-smi -L 2>/dev/null | head -1)"
for s in "${stages[@]}"; do
  note "stage $s"
  "stage_$s"
  tar -czf "$OUT/logs.tar.gz" -C "$LOG" .  # after every stage: a call cut short still returns its logs
done
note "summary"
printf '%s\n' "${summary[@]}" | tee "$LOG/summary.txt"
cp "$LOG/summary.txt" "$OUT/"
for f in bench.json bench_python.json; do [ -f "$LOG/$f" ] && cp "$LOG/$f" "$OUT/"; done
tar -czf "$OUT/logs.tar.gz" -C "$LOG" .
exit $failed
