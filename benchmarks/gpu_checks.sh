#!/usr/bin/env bash
# The GPU checks that docs/scale.rst reports: tests/test_cuda.py (every
# estimator on CUDA, the private search, a pipeline, no host synchronisation
# in the step loops, a data-parallel fit over nccl, the CUDA graph of the
# fixed-shape steps), bench_cuda_steps.py (eager steps against the graph)
# and bench_scale.py on CUDA, with scikit-learn's epoch on the machine's CPU
# as the peer (extra options, e.g. --eager-steps, go to bench_scale.py;
# ROWS=0 runs the tests alone).
#
# Usage, from the repository root on a machine with a GPU:
#     SKDP_COMMIT=$(git rev-parse --short HEAD) bash benchmarks/gpu_checks.sh [ROWS [BENCH_SCALE_OPTIONS]]
# Logs go to $OUT (default benchmarks/results), named after the commit.
set -u
rows=${1:-10000000}
commit=${SKDP_COMMIT:-unknown}
out=${OUT:-benchmarks/results}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
log=$out/gpu_checks_$commit.log
{
    echo "# skdp GPU checks at commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import sys, torch, sklearn, numpy; print('python', sys.version.split()[0], \
'torch', torch.__version__, 'cuda', torch.version.cuda, 'sklearn', sklearn.__version__, \
'numpy', numpy.__version__, 'nccl', torch.cuda.nccl.version())"
    echo "## tests/test_cuda.py"
    timeout 150 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda.py
    [ "$rows" = 0 ] && exit 0
    echo "## bench_cuda_steps.py (eager steps against the CUDA graph)"
    (cd benchmarks && timeout 120 python3 bench_cuda_steps.py)
    echo "## bench_scale.py --rows $rows --device cuda --batch-256 --max-epochs 1 ${*:2}"
    (cd benchmarks && timeout 200 python3 bench_scale.py --rows "$rows" --cache /tmp/skdp_scale \
        --estimators dpsgd,sklearn --batch-256 --max-epochs 1 --device cuda "${@:2}")
} 2>&1 | tee "$log"
