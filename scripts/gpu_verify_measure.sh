# The measurement stages of scripts/gpu_verify.sh (bench, host, singlepass, decode, profile, sass,
# cpsweep; what each does: gpu_verify.sh's header). Sourced by gpu_verify.sh, whose variables (ROOT,
# BUILD, DATA, LOG, OUT) and record() they use; not run on its own.

# run_bench BIN JSON LOG: flash_kda_bench over cases.json with the GPU idle before every case. A binary
# from before the --idle-ms option (a baseline of an older commit) runs each case in a process of its
# own after 0.3 s of sleep instead, keeping the line of the case's exact name: the same conditions.
run_bench() {
  local bin=$1 json=$2 log=$3
  if "$bin" --help 2>&1 | grep -q -- --idle-ms; then
    timeout 900 "$bin" --cases "$DATA/cases.json" --json "$json" >"$log" 2>&1
    return
  fi
  local rc=0 c
  : >"$json"
  : >"$log"
  for c in $(python3 -c "import json, sys; d = json.load(open(sys.argv[1]))
print(' '.join(c['name'] for g in ('prefill', 'prefill_small_heads', 'prefill_long_memory') for c in d.get(g, [])))" \
    "$DATA/cases.json"); do
    sleep 0.3
    timeout 120 "$bin" --cases "$DATA/cases.json" --filter "$c" --json "$json.one" >>"$log" 2>&1 || rc=$((rc + 1))
    python3 -c "import json, sys
for l in open(sys.argv[1]):
    if l.strip() and json.loads(l)['name'] == sys.argv[2]: print(l.strip())" "$json.one" "$c" >>"$json"
  done
  rm -f "$json.one"
  return $rc
}

stage_bench() {
  run_bench "$BUILD/benchmarks/flash_kda_bench" "$LOG/bench.json" "$LOG/bench.log"
  local rc=$?
  cat "$LOG/bench.log"
  # Variant builds (VARIANT_BUILDS="build-x ...", e.g. other launcher knobs), timed in the same call.
  local v
  for v in ${VARIANT_BUILDS:-}; do
    [ -x "$v/benchmarks/flash_kda_bench" ] || continue
    run_bench "$v/benchmarks/flash_kda_bench" "$LOG/bench_$(basename "$v").json" "$LOG/bench_$(basename "$v").log"
    echo "--- variant $v"
    cat "$LOG/bench_$(basename "$v").log"
  done
  record bench $rc "logs: bench.log, bench.json"
}

stage_host() {
  # Host time of a kda_fwd / kda_decode call and of the runtime calls it makes (with and without
  # trusted_pointers): where an eager call's host cost goes.
  timeout 120 "$BUILD/benchmarks/flash_kda_bench_host" --reps 31 >"$LOG/bench_host.log" 2>&1
  local rc=$?
  cat "$LOG/bench_host.log"
  record host $rc "logs: bench_host.log"
}

stage_singlepass() {
  # Issue 10's measurements before the single-pass kernel exists: the chunk step with the kernel's
  # parts added one at a time (flash_kda_bench_wgmma_step --variants), the preparation by one warp
  # per chunk against chunk_prep_kernel (flash_kda_bench_prep_warp: records compared, then timed,
  # also held to 4-24 resident warps per SM), and the preparation inside the chain's CTA
  # (flash_kda_bench_fused_piece: checked against kda_fwd, then timed; again with a partial last
  # chunk, --tail 5, for the layouts that take one); the step for chunks of 16, 32 and 64 tokens
  # (flash_kda_bench_step_tokens: each checked against a CPU emulation, then timed).
  local rc=0
  timeout 120 "$BUILD/benchmarks/flash_kda_bench_wgmma_step" --variants >"$LOG/bench_wgmma_step.log" 2>&1 || rc=$((rc + 1))
  cat "$LOG/bench_wgmma_step.log"
  timeout 120 "$BUILD/benchmarks/flash_kda_bench_prep_warp" --nw 1 --warps 4,8,12,16,24 >"$LOG/bench_prep_warp.log" 2>&1 ||
    rc=$((rc + 1))
  cat "$LOG/bench_prep_warp.log"
  timeout 180 "$BUILD/benchmarks/flash_kda_bench_fused_piece" >"$LOG/bench_fused_piece.log" 2>&1 || rc=$((rc + 1))
  cat "$LOG/bench_fused_piece.log"
  timeout 120 "$BUILD/benchmarks/flash_kda_bench_fused_piece" --chunks 3,17,64 --tail 5 >"$LOG/bench_fused_piece_tail.log" 2>&1 ||
    rc=$((rc + 1))
  cat "$LOG/bench_fused_piece_tail.log"
  timeout 120 "$BUILD/benchmarks/flash_kda_bench_step_tokens" >"$LOG/bench_step_tokens.log" 2>&1 || rc=$((rc + 1))
  cat "$LOG/bench_step_tokens.log"
  record singlepass $rc "logs: bench_wgmma_step.log, bench_prep_warp.log, bench_fused_piece.log, bench_fused_piece_tail.log, bench_step_tokens.log"
}

# run_decode BIN JSON LOG [TIMEOUT]: flash_kda_bench_decode over cases.json (DECODE_ARGS added).
run_decode() {
  timeout "${4:-900}" "$1" --cases "$DATA/cases.json" --json "$2" ${DECODE_ARGS:-} >"$3" 2>&1
}

stage_decode() {
  run_decode "$BUILD/benchmarks/flash_kda_bench_decode" "$LOG/bench_decode.json" "$LOG/bench_decode.log"
  local rc=$?
  cat "$LOG/bench_decode.log"
  # Variant builds (VARIANT_BUILDS, e.g. -DCMAKE_CUDA_FLAGS=-DFLASH_KDA_DECODE_BULK_MIN_BLOCKS=5), same call.
  local v
  for v in ${VARIANT_BUILDS:-}; do
    [ -x "$v/benchmarks/flash_kda_bench_decode" ] || continue
    run_decode "$v/benchmarks/flash_kda_bench_decode" "$LOG/bench_decode_$(basename "$v").json" \
      "$LOG/bench_decode_$(basename "$v").log" 600
    echo "--- variant $v"
    cat "$LOG/bench_decode_$(basename "$v").log"
  done
  record decode $rc "logs: bench_decode*.log, bench_decode*.json"
}

stage_profile() {
  local rc=0 c
  for c in ${PROFILE_CASES:-T8192_H64 B16_T4096_H32 T8192_H8 T65536_H8}; do
    # The first call's kernels (4 launches: with context parallelism, preparation, pass 1, combine, pass 2).
    timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum -k 'regex:chunk|combine' --launch-count 4 \
      "$BUILD/benchmarks/flash_kda_bench" --cases "$DATA/cases.json" --filter "=$c" --iters 5 \
      >"$LOG/profile_$c.log" 2>&1 || rc=$((rc + 1))
    echo "$c: $(grep -E '(chunk|combine)_[a-z_]+kernel|gpu__time_duration' "$LOG/profile_$c.log" | sed -E 's/ +/ /g' |
      sed -E 's/.*([a-z]+_[a-z_]+kernel).*/\1/; s/.*gpu__time_duration.sum (\S+) (\S+)/\2 \1/' | paste -sd' ')"
  done
  record profile $rc "logs: profile_*.log"
}

stage_sass() {
  local rc=0 k c=${SASS_CASE:-T8192_H64}
  for k in ${SASS_KERNELS:-chunk_prep chunk_recurrence}; do
    timeout 300 ncu --set full --import-source yes -k "regex:$k" --launch-skip 2 --launch-count 1 -f -o "$LOG/sass_$k" \
      "$BUILD/benchmarks/flash_kda_bench" --cases "$DATA/cases.json" --filter "=$c" --iters 5 >"$LOG/sass_$k.run.log" 2>&1 ||
      rc=$((rc + 1))
    ncu --import "$LOG/sass_$k.ncu-rep" --page details >"$LOG/sass_${k}_details.txt" 2>&1 || rc=$((rc + 1))
    ncu --import "$LOG/sass_$k.ncu-rep" --page source --csv --print-source sass >"$LOG/sass_${k}_source.csv" 2>&1 ||
      rc=$((rc + 1))
    rm -f "$LOG/sass_$k.ncu-rep"
    grep -E "Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Executed Instructions  " \
      "$LOG/sass_${k}_details.txt" | head -8
    # Per role (split at setmaxnreg.dec): stall reasons, and the HGMMA / HMMA / local-memory instructions.
    python3 scripts/ncu_role_stalls.py "$LOG/sass_${k}_source.csv" 2>&1 | head -6
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

# publish: every input of BENCHMARK_H200.md in one call. On an H200 only: on any other GPU the stage
# fails at once and times nothing (PUBLISH_ANY_GPU=1 times anyway, for a dry run of the procedure). The
# package is built and installed first (its compile would disturb the host timings); then PUBLISH_ROUNDS
# rounds (default 2) of the protocol, alternated with BASE_BUILD's benchmark when BASE_BUILD names the
# build folder of an earlier commit (odd rounds this build first, even rounds the base first); the
# decode benchmark after round 1 (BASE_BUILD's too); then bench_python.py with FLA (the pybench stage;
# PUBLISH_PYBENCH=0 leaves out the package and pybench, below).
# bench.json, bench_base.json, bench_decode.json and bench_python.json go to OUT (gpu_verify.sh copies
# them at its end; the other rounds stay in the logs). Prints the make_benchmark_md.py command that makes
# the table from them on the CPU machine, with the commit the benchmark binary names (kda_version_string;
# the GPU machine's .git may be older).
stage_publish() {
  local rc=0 gpu r sfx base=${BASE_BUILD:-} n=${PUBLISH_ROUNDS:-2}
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  if [[ "$gpu" != *H200* && "${PUBLISH_ANY_GPU:-0}" != 1 ]]; then
    echo "publish: BENCHMARK_H200.md is measured on an H200; this GPU is '${gpu:-none}': nothing timed"
    record publish 1 "not an H200 (${gpu:-no GPU}): nothing timed"
    return
  fi
  if [ -n "$base" ] && [ ! -x "$base/benchmarks/flash_kda_bench" ]; then
    echo "publish: BASE_BUILD=$base holds no benchmarks/flash_kda_bench: nothing timed"
    record publish 1 "BASE_BUILD without a benchmark"
    return
  fi
  # PUBLISH_PYBENCH=0: no package, no pybench (a short call: the table's FLA column falls back to the
  # anchors of cases.json, and the decode table has no FLA column).
  local py=${PUBLISH_PYBENCH:-1}
  if [ "$py" != 0 ]; then
    install_package pip_install.log || rc=$((rc + 1))  # (gpu_verify_python.sh)
    tail -1 "$LOG/pip_install.log"
  fi
  for ((r = 1; r <= n; r++)); do
    sfx=$([ "$r" -eq 1 ] || echo "_r$r")
    if [ -n "$base" ] && [ $((r % 2)) -eq 0 ]; then
      run_bench "$base/benchmarks/flash_kda_bench" "$LOG/bench_base$sfx.json" "$LOG/bench_base$sfx.log" || rc=$((rc + 1))
    fi
    run_bench "$BUILD/benchmarks/flash_kda_bench" "$LOG/bench$sfx.json" "$LOG/bench$sfx.log" || rc=$((rc + 1))
    if [ -n "$base" ] && [ $((r % 2)) -eq 1 ]; then
      run_bench "$base/benchmarks/flash_kda_bench" "$LOG/bench_base$sfx.json" "$LOG/bench_base$sfx.log" || rc=$((rc + 1))
    fi
    grep -h "geometric mean" "$LOG/bench$sfx.log" "$LOG/bench_base$sfx.log" 2>/dev/null
    if [ "$r" -eq 1 ]; then
      run_decode "$BUILD/benchmarks/flash_kda_bench_decode" "$LOG/bench_decode.json" "$LOG/bench_decode.log" ||
        rc=$((rc + 1))
      if [ -n "$base" ] && [ -x "$base/benchmarks/flash_kda_bench_decode" ]; then
        run_decode "$base/benchmarks/flash_kda_bench_decode" "$LOG/bench_decode_base.json" \
          "$LOG/bench_decode_base.log" || rc=$((rc + 1))
      fi
    fi
  done
  [ "$py" = 0 ] || stage_pybench  # (bench_python.json; a summary line of its own)
  echo "publish: on the CPU machine, with the files above in benchmarks/results/ under names of their own:"
  echo "  python3 scripts/make_benchmark_md.py --bench BENCH.json$([ "$py" = 0 ] || echo ' --python BENCH_PYTHON.json') --decode BENCH_DECODE.json" \
    "${base:+--baseline BENCH_BASE.json --baseline-label BASE_COMMIT }--date '$(date -u '+%Y-%m-%d %H:%M') UTC'" \
    "--commit '$(sed -n 's/.*flash_kda [0-9.]*+\([0-9a-z-]*\).*/\1/p' "$LOG/bench.log" | head -1)' --device '$gpu' --command '...'"
  record publish $rc "on $gpu, $n rounds${base:+ alternated with $base}$([ "$py" != 0 ] || echo ', no pybench'): bench*.json, bench_decode*.json (logs), bench_base.json (OUT)"
}
