#!/usr/bin/env bash
# Fetch the wheels benchmarks/gpu_check.py needs on the GPU machine and that it lacks, into gpu_wheels/ (git-ignored).
#
# That machine has Python 3.12 with JAX and PyTorch (CUDA), nvidia-ml-py, psutil, py-cpuinfo,
# numpy, h5py, ml-dtypes, absl-py, rich and packaging, and no network. The check's own process
# needs nothing more (core's imports on its path are numpy and psutil); its JAX and PyTorch jobs
# and probes train through Keras 3, which also needs namex and optree (optree's typing-extensions
# comes with PyTorch); the history and the log folder need platformdirs (its absence failed every
# command on an H200, 2026-11-28; tests/benchmarks/test_gpu_check.py checks pyproject's list
# against this one). The versions are the ones the tests run here. Pure wheels are "any";
# optree is built per platform, CPython 3.12 on x86_64: its releases since 0.17 are manylinux_2_28
# only (glibc 2.28), which the GPU machine has if its PyTorch is 2.6 or newer (built for
# manylinux_2_28 too); manylinux2014 is asked for as well, should a release still ship it.
#
#     bash benchmarks/gpu_wheels.sh      # here, with network: a few MB into gpu_wheels/ (and then-c4a2cd1.tar)
#     # there, from the repository root:
#     pip install --no-index --no-deps --target /tmp/gpu_wheels gpu_wheels/*.whl; PYTHONPATH=/tmp/gpu_wheels python benchmarks/gpu_check.py --out "$OUT/gpu_check.json"
set -euo pipefail

cd "$(dirname "$0")/.."
FOLDER=gpu_wheels
WHEELS=(keras==3.15.1 namex==0.1.0 optree==0.20.0 platformdirs==4.14.8)
LIMIT_BYTES=$((64 * 1024 * 1024))  # everything carried to the GPU machine, the working tree included

PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
mkdir -p "$FOLDER"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any --dest "$FOLDER" "${WHEELS[@]}"

# The version of the app that ran the H100's GPU check, for benchmarks/then_version.py (needs this clone's history).
git archive --format=tar -o "$FOLDER/then-c4a2cd1.tar" c4a2cd1

ls -l "$FOLDER"
total=$(du -cb "$FOLDER"/* | tail -1 | cut -f1)
echo "$FOLDER: $(ls "$FOLDER"/*.whl | wc -l) wheels and the 2026-11-27 version's archive, $total bytes"
if [ "$total" -ge "$LIMIT_BYTES" ]; then
    echo "more than the 64 MiB the GPU machine's copy may carry" >&2
    exit 1
fi
