#!/usr/bin/env bash
# The GPU checks of issue 8, for a session that is lent a device (the `device` tool, nvidia-h200).
#
#   here, once:     bash bench/gpu_session.sh prepare   # wheels the device image lacks (lark) into .whl/, git-ignored
#   on the device:  run(command="bash bench/gpu_session.sh run", carry=[".whl"], timeout_s=560)
#
# The device image has Python 3.12 with CuPy (cuda13x), NumPy, Typer, Rich, pytest and Hypothesis, but
# not Lark, and it cannot download: Lark travels as a wheel. `run` prints the devices, runs the GPU half of
# the backend contract tests (the same tests the fake device runs in CI), then the GPU benchmark; its
# report lands in $OUT/gpu.md for bench/RESULTS.md.
set -euo pipefail
case "${1:-}" in
prepare)
    grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 -d .whl 'lark>=1.2'
    ls -l .whl ;;
run)
    # Each step is bounded and runs even when an earlier one fails: one device call must bring back
    # everything (the lease is 15 minutes, a machine's start included). Logs land in $OUT.
    out="${OUT:-/tmp}"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
    status=0
    timeout 60 python3 -m gradcalc doctor 2>&1 | tee "$out/doctor.txt" || status=1
    timeout 60 python3 -m gradcalc grad samples/neuron_tensor.eq --vector ones --device gpu --dtype float32 || status=1
    timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_backend.py 2>&1 | tee "$out/pytest.txt" || status=1
    timeout 300 python3 bench/bench_gpu.py | tee "$out/gpu.md" || status=1
    timeout 60 python3 bench/bench_gpu.py --profile > "$out/profile.txt" 2>&1 || status=1
    timeout 60 python3 bench/gpu_mlp_probe.py 2>&1 | tee "$out/probe.txt" || status=1
    exit $status ;;
*)
    echo "usage: bash bench/gpu_session.sh prepare|run" >&2
    exit 2 ;;
esac
