# The Python stages of scripts/gpu_verify.sh (python, pybench, distributed; what each does: gpu_verify.sh's
# header). Sourced by gpu_verify.sh, whose variables (ROOT, BUILD, DATA, LOG, OUT) and record() they use;
# not run on its own.

# install_package LOG_NAME: builds and installs the flash_kda package from this tree (all cores), its
# output in $LOG/LOG_NAME; the exit status pip's.
install_package() {
  PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) timeout 400 python3 -m pip install --no-build-isolation \
    --no-deps -v . >"$LOG/$1" 2>&1
}

stage_python() {
  local rc=0
  ensure_repo_golden
  export PYTHONUNBUFFERED=1
  install_package pip_install.log || rc=$((rc + 1))
  tail -3 "$LOG/pip_install.log"
  if [ -d "$DATA/fla" ]; then export FLASH_KDA_FLA_DIR="$DATA"; fi
  # tests/python/test_golden.py reads the generated vectors from FLASH_KDA_REPO_GOLDEN_DIR (exported above).
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
    install_package pip_install_distributed.log || rc=$((rc + 1))
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
