#!/usr/bin/env bash
# The whole GPU verification in one call, for the GPU machine (H200):
#   build      configure + build the library, tests and benchmark (skipped when BUILD holds a build)
#   tests      host tests, GPU tests (golden cases, options matrix, safety, PTX layer), the demo
#   sanitizer  compute-sanitizer memcheck, racecheck, synccheck on the small golden cases (SANITIZER_TIMEOUT
#              per tool, default 600 s; SANITIZER_INFO=0 skips the informational racecheck run;
#              SANITIZER_PARALLEL=1 runs the tools at once, each in a process of its own), racecheck
#              also on runs that reuse the recurrence's stage ring and on the decode kernels, the
#              numerics and in-place cases; memcheck on the 8-thread x 4-stream concurrency test
#   random     GpuRandomMatrix (tests/gpu/test_gpu_random_matrix.cpp) and GpuDecodeRandomMatrix
#              (test_gpu_decode_random.cpp) on a longer draw: RANDOM_CONFIGS configurations (default 400)
#              of seed RANDOM_SEED (default 7) each, then RANDOM_SAN_CONFIGS (default 12) of them under
#              compute-sanitizer memcheck, synccheck and racecheck (at once)
#   bench      C++ benchmark over bench/cases.json -> bench.json (input of make_benchmark_md.py); the GPU
#              idles 0.3 s before every case (run_bench), also for older baselines' binaries
#   decode     C++ decode benchmark (decode group of cases.json, bf16-pool twins, verify T = 4; every
#              kernel configuration of kda_decode, eager and graph; a plain copy of the same state
#              bytes as the practical floor) -> bench_decode.json
#   host       host time of one kda_fwd / kda_decode call and of the CUDA runtime calls it makes
#   publish    every input of BENCHMARK_H200.md in one call, on an H200 only (elsewhere it fails at once,
#              timing nothing; PUBLISH_ANY_GPU=1 for a dry run): the package installed, PUBLISH_ROUNDS
#              rounds (default 2) of the benchmark alternated with BASE_BUILD's (an earlier commit's build
#              folder, optional), the decode benchmark, pybench (PUBLISH_PYBENCH=0: neither the package nor
#              pybench, a call of ~2 minutes); prints the make_benchmark_md.py command
#   singlepass issue 10's measurement benchmarks: the wgmma chunk step with the recurrence kernel's
#              parts added one at a time, the preparation by one warp per chunk against the library's
#              (every record field compared), and the preparation inside the chain's CTA (checked
#              against kda_fwd: bitwise with prepare_chunk, to 3e-3 with the warp preparation; also with a
#              partial last chunk), and the step for chunks of 16, 32 and 64 tokens, each timed
#   profile    Nsight Compute kernel durations on a few benchmark cases (PROFILE_CASES)
#   sass       Nsight Compute full set on one launch of each kernel of SASS_CASE (default T8192_H64) whose
#              name matches SASS_KERNELS (default "chunk_prep chunk_recurrence"; "single_pass" with a case
#              the single pass takes): details page and per-instruction SASS counters (source page, CSV)
#              in the logs, and per role the stall split and HGMMA / HMMA / LDL / STL counts
#   spills     SASS of every kernel (cuobjdump, scripts/sass_spills.py): instructions, HGMMA / HMMA counts and
#              each local-memory store and load with the instructions around it; fails if any kernel has one
#              (none since version 51)
#   mutants    the GPU tests against the mutants of tests/mutants (scripts/mutants.sh: built from BUILD's
#              ninja files into BUILD/mutants unless carried there; MUTANT_JOBS runs at once, default 8;
#              ~10 min): fails if the unpatched build fails or a mutant not marked "expect: survives" passes
#   cpsweep    the benchmark on few-head cases (SWEEP_CASES) for several forced context_split values
#              (SWEEP_SPLITS; 0 = the automatic plan) with context_method SWEEP_METHOD (0 automatic,
#              1 exact, 2 warm-up; default 0): calibrates src/launch/plan.cpp
#   python     pip install of the flash_kda package, pytest (FLA comparison when FLA is present)
#   pybench    Python benchmark: this package and FLA's Triton kernels in one run (FLA_CASES; the decode
#              group against FLA's fused_recurrent_kda whenever FLA imports)
#   distributed  context parallelism across GPUs (needs >= 2 GPUs, else skipped with a message; installs
#              the package when it is not importable): the 2-process NCCL tests and the building blocks'
#              tests (pytest), the example, and the scaling benchmark (1 and 2 GPUs, DIST_T tokens, H = 8)
#              -> bench_distributed.json and BENCHMARK_CP_H200.md in OUT; NCCL_NVLS_ENABLE=0 throughout
# Code: build, tests, sanitizer, spills and mutants here; the measurement stages in gpu_verify_measure.sh,
# the Python ones in gpu_verify_python.sh (both sourced below).
# Usage: scripts/gpu_verify.sh [stage ...]  (default: build tests sanitizer random bench decode python pybench)
# Environment: OUT (results folder, default /tmp/flash_kda_out: logs.tar.gz with every log, plus
#   summary.txt, bench.json, bench_python.json), BUILD (build folder, default build),
#   FLASH_KDA_DATA (optional golden/ (the shared, independent check), cases.json (bench stages),
#   fla/; default .gpu_data, made by scripts/prepare_gpu_data.sh --shared DIR --fla-mirror GIT_DIR;
#   the golden tests' own vectors are generated by the build into $BUILD/tests/golden),
#   VARIANT_BUILDS (extra build folders whose benchmark is timed too, for comparing launcher knobs),
#   FLA_CASES (benchmark cases to time with FLA, default "T8192_H64 T8192_H8"; FLA autotunes each
#   new shape, minutes on a fresh machine), PROFILE_CASES (default "T8192_H64 B16_T4096_H32 T8192_H8 T65536_H8").
# Prints a summary last. Exit status: number of failed stages.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/flash_kda_out}
LOG=$(mktemp -d "${TMPDIR:-/tmp}/flash_kda_logs.XXXX")
BUILD=${BUILD:-build}
DATA=${FLASH_KDA_DATA:-$ROOT/.gpu_data}
# The shared golden copy, when there is one (else the shared check skips; the generated vectors,
# written by the build, always run and a missing folder fails them).
if [ -z "${FLASH_KDA_GOLDEN_DIR:-}" ] && [ -d "$DATA/golden" ]; then export FLASH_KDA_GOLDEN_DIR=$DATA/golden; fi
case "$BUILD" in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac
export FLASH_KDA_REPO_GOLDEN_DIR=${FLASH_KDA_REPO_GOLDEN_DIR:-$BUILD_ABS/tests/golden}
mkdir -p "$OUT"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build tests sanitizer random bench decode python pybench)
summary=()
failed=0

note() { echo "=== $* ($(date -u +%H:%M:%S))"; }
record() {  # record NAME STATUS DETAIL
  summary+=("$(printf '%-10s %s %s' "$1" "$([ "$2" -eq 0 ] && echo PASS || echo "FAIL($2)")" "$3")")
  [ "$2" -eq 0 ] || failed=$((failed + 1))
}

# The generated golden vectors (24 MB) may not have been carried with the build: write them (the build
# stage, and the python stage when run without it; pytest's repo golden test fails without them).
ensure_repo_golden() {
  if [ ! -f "$FLASH_KDA_REPO_GOLDEN_DIR/index.json" ] && [ -x "$BUILD/tests/flash_kda_make_golden" ]; then
    "$BUILD/tests/flash_kda_make_golden" "$FLASH_KDA_REPO_GOLDEN_DIR" >/dev/null
  fi
}

stage_build() {
  if [ -x "$BUILD/tests/gpu/test_gpu" ] && [ -x "$BUILD/benchmarks/flash_kda_bench" ] &&
    [ -x "$BUILD/benchmarks/flash_kda_bench_decode" ]; then
    ensure_repo_golden
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
  ensure_repo_golden  # (the build stage writes them too; `tests` alone on a carried build needs them)
  for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    timeout 600 "$t" --gtest_brief=1 >"$LOG/$(basename "$t").log" 2>&1 || rc=$((rc + 1))
    tail -3 "$LOG/$(basename "$t").log"
  done
  # Outside the sanitizer, the PDL probe must also see its dependent grid start early.
  FLASH_KDA_REQUIRE_PDL_OVERLAP=1 timeout 900 "$BUILD/tests/gpu/test_gpu" --gtest_output="xml:$LOG/test_gpu.xml" \
    >"$LOG/test_gpu.log" 2>&1 || rc=$((rc + 1))
  grep -E "^\[ (errors|check|pdl) \]|FAILED|PASSED|SKIPPED" "$LOG/test_gpu.log" | head -120
  # The whole suite again with every problem the single pass takes forced onto it (gpu_harness.h:
  # FLASH_KDA_TEST_SINGLE_PASS=always; the automatic choice takes it only with many (sequence, head) pairs).
  FLASH_KDA_TEST_SINGLE_PASS=always timeout 900 "$BUILD/tests/gpu/test_gpu" --gtest_brief=1 \
    >"$LOG/test_gpu_single_pass.log" 2>&1 || rc=$((rc + 1))
  echo "test_gpu with FLASH_KDA_TEST_SINGLE_PASS=always:"
  grep -E "FAILED|PASSED|SKIPPED" "$LOG/test_gpu_single_pass.log" | head -40
  # Concurrency (8 threads x 4 streams) in a process of its own: the library's first calls race too.
  timeout 600 "$BUILD/tests/gpu/test_gpu" --gtest_filter='GpuConcurrency.ThreadsAndStreams*' \
    >"$LOG/test_gpu_concurrency.log" 2>&1 || rc=$((rc + 1))
  tail -3 "$LOG/test_gpu_concurrency.log"
  # The README's main job: the demo on the GPU, checked against the float64 CPU recurrence.
  timeout 300 "$BUILD/benchmarks/flash_kda_demo" >"$LOG/demo.log" 2>&1 || rc=$((rc + 1))
  cat "$LOG/demo.log"
  record tests $rc "logs: test_*.log, test_gpu.log, test_gpu.xml, test_gpu_single_pass.log, demo.log"
}

# One compute-sanitizer run of test_gpu: its log in $LOG/sanitizer_NAME.log, its exit status in
# $LOG/sanitizer_NAME.rc (the sanitizer and random stages).
san_run() {  # NAME TOOL FILTER [VAR=VALUE ...]
  local name=$1 tool=$2 filter=$3
  shift 3
  env "$@" timeout "${SANITIZER_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
    "$BUILD/tests/gpu/test_gpu" --gtest_filter="$filter" >"$LOG/sanitizer_$name.log" 2>&1
  echo $? >"$LOG/sanitizer_$name.rc"
}

stage_sanitizer() {
  # memcheck and synccheck: the golden cases, the PTX probes and one run of every kernel
  # configuration; racecheck (pass/fail): the golden cases, the probes, runs that reuse the
  # recurrence's stage ring many times (every value-row split, every segment count) and the decode
  # kernels; then, for information, the ring probe whose release racecheck cannot follow
  # (tests/gpu/test_ring_sync.cu: it is expected to report there, and only there).
  local rc=0 r name
  local golden='Repo/RepoGoldenGpu.*/basic:Repo/RepoGoldenGpu.*/varlen_edges:Repo/RepoGoldenGpu.*/gva:Repo/RepoGoldenGpu.*/softplus_gate:Ptx.*'
  local all="$golden:GpuOptions.EveryValueRowSplit:GpuContext.EverySegmentCount:GpuContext.VarlenInt32AndInt64Agree"
  all="$all:GpuWarmup.EveryPieceCount:GpuWarmup.MixedFallbackIsExactAndDeterministic:GpuWarmup.IgnoringTheBoundFailsOnLongMemory"
  all="$all:GpuDecode.*"  # every decode test: both kernels, every configuration, the content check
  all="$all:GpuNumerics.*:GpuMemory.InPlaceStateUpdateEqualsOutOfPlace"
  all="$all:GpuTransition.LastSequencesOnlyAndVarlen:GpuTransition.BoundedTailIsTheLastChunks"
  all="$all:Wgmma.*:Tma.*:Tile.*"  # the tile layer's PTX (wgmma, TMA, setmaxnreg, named barriers)
  all="$all:RingSync.*"            # the stage-ring hand-off probes
  all="$all:GpuStreamOrder.*:GpuSafety.PointerKinds"  # after an early-triggering caller kernel; pointer kinds
  all="$all:GpuSinglePass.*"  # the single pass: shapes, options, the rescaled norms, in place
  local race="$golden:GpuOptions.EveryValueRowSplit:GpuContext.EverySegmentCount:RingSync.EveryLaneReleases:RingSync.BulkCopyThen*"
  race="$race:GpuWarmup.MixedFallbackIsExactAndDeterministic:RingSync.RolesHandOver*"  # the warm-up's tail jobs (combine, pass 2) reuse the ring
  race="$race:GpuDecode.EveryConfigurationBitwiseIdenticalAndDeterministic"
  race="$race:GpuSinglePass.ShapesAgainstFloat64AndTheTwoKernels:GpuSinglePass.DeterministicAndInPlace"  # its ring, reused up to 64 times
  race="$race:GpuSinglePass.WalkingCtasMatchOneCtaPerUnit"  # the walk: the ring runs on across units
  # SANITIZER_PARALLEL=1 runs the four at once (processes of their own on the one GPU; about the slowest
  # one's time instead of the sum, which keeps the stage inside a 10-minute call).
  local names=(memcheck synccheck racecheck concurrency) pids=()
  for name in "${names[@]}"; do
    case $name in
      memcheck | synccheck) set -- "$name" "$name" "$all" ;;
      racecheck) set -- racecheck racecheck "$race" ;;
      # 8 host threads x 4 streams, one round, in a process of its own (first calls race): memcheck.
      concurrency) set -- concurrency memcheck 'GpuConcurrency.ThreadsAndStreams*' FLASH_KDA_CONCURRENCY_ROUNDS=1 ;;
    esac
    if [ "${SANITIZER_PARALLEL:-0}" = 1 ]; then
      san_run "$@" &
      pids+=($!)
    else
      san_run "$@"
    fi
  done
  [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"
  for name in "${names[@]}"; do
    r=$(cat "$LOG/sanitizer_$name.rc" 2>/dev/null || echo 99)
    echo "$name: exit $r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer_$name.log" | tail -1)"
    [ "$r" -eq 0 ] || rc=$((rc + 1))
  done
  if [ "${SANITIZER_INFO:-1}" = 0 ]; then record sanitizer $rc "logs: sanitizer_*.log (informational racecheck run skipped)"; return; fi
  timeout 600 compute-sanitizer --tool racecheck "$BUILD/tests/gpu/test_gpu" --gtest_filter=RingSync.LaneZeroReleasesAfterSyncwarp \
    >"$LOG/sanitizer_racecheck_lane0.log" 2>&1
  echo "racecheck (information, expected to report: one release per warp after __syncwarp): $(grep -E 'RACECHECK SUMMARY' "$LOG/sanitizer_racecheck_lane0.log" | tail -1)"
  record sanitizer $rc "logs: sanitizer_*.log"
}

stage_random() {
  # Random configurations of the option matrices against the float64 recurrence: kda_fwd's (each also run
  # again, and as a graph replay, strided views, in place, with int32 offsets or f32 g and beta) and
  # kda_decode's (every stored value correctly rounded; again as a graph replay, another kernel
  # configuration or the same call), then a few of each under the three sanitizer tools.
  local rc=0 r name
  local seed=${RANDOM_SEED:-7} n=${RANDOM_CONFIGS:-400} nsan=${RANDOM_SAN_CONFIGS:-12}
  local tests='GpuRandomMatrix.*:GpuDecodeRandomMatrix.*'
  FLASH_KDA_RANDOM_SEED=$seed FLASH_KDA_RANDOM_CONFIGS=$n timeout 900 "$BUILD/tests/gpu/test_gpu" \
    --gtest_filter="$tests" >"$LOG/random.log" 2>&1 || rc=$((rc + 1))
  echo "GpuRandomMatrix and GpuDecodeRandomMatrix, seed $seed, $n configurations each: $(grep -cE '^\[ random \] #' "$LOG/random.log") and $(grep -cE '^\[ decode-random \] #' "$LOG/random.log") drawn; $(grep -E 'PASSED|FAILED' "$LOG/random.log" | tail -2 | tr '\n' ' ')"
  grep -E '^\[ decode-random \] [0-9]+ configurations' "$LOG/random.log"
  grep -E "Failure|Expected|Which is|random \] #" "$LOG/random.log" | grep -B1 -A3 Failure | head -60
  for name in memcheck synccheck racecheck; do
    san_run "random_$name" $name "$tests" FLASH_KDA_RANDOM_SEED=$seed FLASH_KDA_RANDOM_CONFIGS=$nsan &
  done
  wait
  for name in memcheck synccheck racecheck; do
    r=$(cat "$LOG/sanitizer_random_$name.rc" 2>/dev/null || echo 99)
    echo "random under $name: exit $r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer_random_$name.log" | tail -1)"
    [ "$r" -eq 0 ] || rc=$((rc + 1))
  done
  record random $rc "logs: random.log, sanitizer_random_{memcheck,synccheck,racecheck}.log"
}

stage_spills() {
  # Where the kernels spill (scripts/sass_spills.py on cuobjdump's SASS of the benchmark binary, which
  # holds every kernel of the library): a line per kernel, and each STL / LDL with 6 instructions around
  # it for the kernels that spill. No profiling: seconds.
  local rc=0
  command -v cuobjdump >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
  timeout 300 cuobjdump -sass "$BUILD/benchmarks/flash_kda_bench" >"$LOG/spills_sass.txt" 2>&1 || rc=$((rc + 1))
  python3 scripts/sass_spills.py "$LOG/spills_sass.txt" >"$LOG/spills.txt" 2>&1 || rc=$((rc + 1))
  python3 scripts/sass_spills.py "$LOG/spills_sass.txt" --spilling --context 6 >"$LOG/spills_sites.txt" 2>&1
  rm -f "$LOG/spills_sass.txt"
  grep -E "instructions  HGMMA|^[0-9]+ kernels" "$LOG/spills_sites.txt"  # the kernels that spill, and the count
  # No kernel may touch local memory (the SASS twin of .ci/check_wgmma_serialization.sh's ptxas check).
  grep -qE "^[1-9][0-9]* kernels, 0 with local-memory" "$LOG/spills_sites.txt" || rc=$((rc + 1))
  record spills $rc "logs: spills.txt (every kernel), spills_sites.txt (the sites)"
}

stage_mutants() {
  local rc=0
  ensure_repo_golden
  if [ ! -d "$BUILD_ABS/mutants" ]; then
    scripts/mutants.sh build "$BUILD_ABS" "$BUILD_ABS/mutants" >"$LOG/mutants_build.log" 2>&1 || rc=$((rc + 1))
    tail -3 "$LOG/mutants_build.log"
  fi
  MUTANT_LOGS=$LOG/mutants MUTANT_JOBS=${MUTANT_JOBS:-8} scripts/mutants.sh run "$BUILD_ABS" "$BUILD_ABS/mutants" \
    >"$LOG/mutants.log" 2>&1 || rc=$((rc + 1))
  grep -vE "^logs:" "$LOG/mutants.log"
  record mutants $rc "logs: mutants.log, mutants/ (one log per run; tests/mutants/README.md)"
}

# The measurement and Python stages live in files of their own (stage_NAME functions).
source "$ROOT/scripts/gpu_verify_measure.sh"
source "$ROOT/scripts/gpu_verify_python.sh"

note "flash_kda GPU verification: tree $(git describe --always --dirty --abbrev=12 2>/dev/null || echo '?') on $(nvidia-smi -L 2>/dev/null | head -1)"
for s in "${stages[@]}"; do
  note "stage $s"
  "stage_$s"
  tar -czf "$OUT/logs.tar.gz" -C "$LOG" .  # after every stage: a call cut short still returns its logs
done
note "summary"
printf '%s\n' "${summary[@]}" | tee "$LOG/summary.txt"
cp "$LOG/summary.txt" "$OUT/"
for f in bench.json bench_base.json bench_decode.json bench_python.json; do [ -f "$LOG/$f" ] && cp "$LOG/$f" "$OUT/"; done
tar -czf "$OUT/logs.tar.gz" -C "$LOG" .
exit $failed
