#!/usr/bin/env bash
# The checks a GPU machine can make, in one run (about 8 minutes on an H100), each output kept
# in OUT (default cuda-check/). Run from the repository root with compscope importable (installed,
# or PYTHONPATH=src) and a CUDA build of torch:
#
#     bash bench/cuda_check.sh [OUT]
#
# 1. the CUDA tests; 2. the five tests that failed on the H100 without a kept traceback
# (bench/RESULTS.md, "CUDA: an H100"); 3. the benchmarks of that section, on the device.
set -uo pipefail
out=${1:-cuda-check}
mkdir -p "$out"
py=${PYTHON:-python3}
run() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout "$limit" "$@" 2>&1 | grep -v "^composition: [0-9]*/" | tee "$out/$name.txt"; }
run test_device 200 "$py" -m pytest -q -p no:cacheprovider tests/test_device.py -rs
run open_tests 300 "$py" -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_axioms.py::test_seeded_results_repeat \
  "tests/test_rough_edges.py::test_track_with_a_pair_that_is_not_in_the_model" \
  tests/test_bench.py::test_measures_vs_interventions_on_the_shipped_model \
  tests/test_hub.py::test_data_based_commands_run_the_model_by_hub_id
run speed 300 "$py" bench/composition_speed.py --device cuda --no-tl --repeats 3 --wait 0
run 7b 120 "$py" bench/composition_7b.py --device cuda --wait 0
run precision_7b 200 "$py" bench/product_precision.py --shape 7b --device cuda
