#!/usr/bin/env bash
# Runs a Python script on the GPUs of this host, one process per GPU, through torchrun, with NVLink
# multicast off (NCCL_NVLS_ENABLE=0, as flash_kda.distributed is tested):
#   scripts/run_distributed.sh [NPROC] script.py [args ...]      (NPROC: default 2)
#   scripts/run_distributed.sh 2 benchmarks/example_distributed.py
#   scripts/run_distributed.sh 2 benchmarks/bench_distributed.py --json bench_distributed.json
set -euo pipefail
export NCCL_NVLS_ENABLE=0
export PYTHONUNBUFFERED=1
nproc=2
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  nproc=$1
  shift
fi
[ $# -ge 1 ] || { echo "usage: $0 [NPROC] script.py [args ...]" >&2; exit 2; }
exec torchrun --standalone --nproc_per_node="$nproc" "$@"
