#!/usr/bin/env bash
# Issue 27's checks that need a GPU and 16 cores, as ONE device run (about 8 minutes on an H100/H200).
#
# Prepare here (no device time), in the repository root: the device image has torch, cupy, jax, numba,
# numpy, scipy, pyarrow, rich, typer and pytest, but not array-api-compat / array-api-strict:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl array-api-compat array-api-strict
# Then one `run` with carry [".whl"], timeout_s 600 and the command `bash benchmarks/device_check.sh`.
# Everything it prints is also written under $OUT (it comes back as files). SMALL=1 runs the same
# steps at small shapes on any machine (a dry run of the script; the GPU steps then skip).
set -uo pipefail
out="${OUT:-/tmp/ldp-device-check}"
mkdir -p "$out"
python="${PYTHON:-python3}"
if compgen -G ".whl/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
if [ "${SMALL:-0}" = 1 ]; then gpu=20000x500; cpu=20000x500; api=--quick; else gpu=2000000x500; cpu=400000x500; api=; fi

step() {  # step NAME SECONDS COMMAND...: run it with a time limit, its output to the screen and $out/NAME.txt
    local name=$1 limit=$2; shift 2
    echo "== $name: $*" | tee "$out/$name.txt"
    timeout "$limit" "$@" 2>&1 | tee -a "$out/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]}" | tee -a "$out/$name.txt"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nproc; uptime; \
  "$python" -c "import numpy, scipy, pyarrow; print('numpy', numpy.__version__, 'pyarrow', pyarrow.__version__)"; } \
  | tee "$out/machine.txt"
step arrays 120 "$python" -m pytest -q -p no:cacheprovider tests/arrays -rs
step torch 150 "$python" benchmarks/device_arrays.py --library torch --shape "$gpu" --dtype float32 --repeat 3 --no-numpy
step cupy 90 "$python" benchmarks/device_arrays.py --library cupy --shape "$gpu" --dtype float32 --repeat 3 --no-numpy
step threads 240 "$python" benchmarks/threads.py --shape "$cpu" --repeat 1
step api 90 "$python" benchmarks/run.py --only api $api --repeat 3
