#!/usr/bin/env bash
# The checks a GPU machine can make, in one run, each output kept
# in OUT (default cuda-check/). Run from the repository root with compscope importable (installed,
# or PYTHONPATH=src) and a CUDA build of torch:
#
#     bash bench/cuda_check.sh [OUT]
#
# In the order run: 1. the CUDA tests; 2. the data side (interventions of every pair and kind,
# with the labels) on a random Llama of SmolLM2-135M's shape, built from a config (no download),
# on the GPU in float32 and bfloat16; 3. the four tests that failed on the H100 without a kept
# traceback (bench/RESULTS.md, "CUDA: an H100"); 4. the data side on the machine's CPU; 5. the
# engine benchmarks of that section, on the device (and, as `cores`, the per-head SVD cores on the
# machine's CPU: bench/cpu_limits.py section 1c). ONLY="name ..." runs the checks named
# (test_device interventions_cuda interventions_cuda_bf16 interventions_cuda_single open_tests interventions_cpu
# verdict_cuda cores speed 7b precision_7b pattern_memory; interventions_cuda_single: the route before a writer layer's heads
# were batched, for an A/B with interventions_cuda; named only, never by default: post_ln_cuda
# post_ln_cuda_single on a random BERT-base-shaped model, all_paths_cuda all_paths_cuda_single, every path of
# the SmolLM2 shape: the A/B of batched writers where the direct path passes through norms, and on
# every path, measured on an H200 in bench/RESULTS.md, session 68; live_memory_cuda: the tensors one and
# nine every-path writers of layer 16 hold, counted, beside max_memory_allocated: session 69); the first five took 194 s on an H100 (bench/RESULTS.md, 2026-11-26). ONLY=suite
# (named only, never by default) runs the whole test suite but the docs test on 16 workers, each
# test's name and outcome printed as it ends (a run cut off by the lease still names its failures);
# with OMP_WAIT_POLICY=PASSIVE, as `make test` does (its workers share the cores), the whole suite took
# 127-154 s on an H200 with the gguf, plotly and narwhals wheels carried (bench/RESULTS.md, session 87;
# without PASSIVE an H100 reached 95 % of it in 530 s).
set -uo pipefail
out=${1:-cuda-check}
mkdir -p "$out"
py=${PYTHON:-python3}
only=${ONLY:-}
wanted() { [[ -z "$only" || " $only " == *" $1 "* ]]; }
named() { [[ " $only " == *" $1 "* ]]; }
run() {
  local name=$1 limit=$2; shift 2
  wanted "$name" || return 0
  echo "== $name"; timeout "$limit" "$@" 2>&1 | grep -v "^composition: [0-9]*/" | tee "$out/$name.txt"
}
run test_device 200 "$py" -m pytest -q -p no:cacheprovider tests/test_device.py -rs
model=$(mktemp -d)/random-smollm2-shape  # about 0.5 GB: kept out of OUT
if wanted interventions_cuda || wanted interventions_cuda_bf16 || wanted interventions_cuda_single || wanted interventions_cpu \
  || wanted verdict_cuda || wanted pattern_memory || named all_paths_cuda || named all_paths_cuda_single || named live_memory_cuda; then
"$py" - "$model" <<'EOF'
import sys, torch, transformers
torch.manual_seed(0)
cfg = transformers.LlamaConfig(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
                               num_hidden_layers=30, vocab_size=49152, rope_theta=100000.0, tie_word_embeddings=True)
transformers.LlamaForCausalLM(cfg).save_pretrained(sys.argv[1])
EOF
fi
run interventions_cuda 300 "$py" bench/interventions_real.py --model "$model" --device cuda
run interventions_cuda_bf16 300 "$py" bench/interventions_real.py --model "$model" --device cuda --model-dtype bfloat16
run interventions_cuda_single 300 "$py" bench/interventions_real.py --model "$model" --device cuda --writer-batch-mib 0  # one writer at a time
if named post_ln_cuda || named post_ln_cuda_single; then
  bert=$(mktemp -d)/random-bert-base-shape
  "$py" - "$bert" <<'EOF'
import sys, torch, transformers
torch.manual_seed(0)
transformers.BertForMaskedLM(transformers.BertConfig()).save_pretrained(sys.argv[1])  # 12 layers x 12 heads, 768 wide
EOF
  named post_ln_cuda && run post_ln_cuda 300 "$py" bench/interventions_real.py --model "$bert" --device cuda \
    --save "$out/post_ln.safetensors"
  named post_ln_cuda_single && run post_ln_cuda_single 300 "$py" bench/interventions_real.py --model "$bert" --device cuda \
    --writer-batch-mib 0 --against "$out/post_ln.safetensors"
fi
named all_paths_cuda && run all_paths_cuda 300 "$py" bench/interventions_real.py --model "$model" --device cuda --paths all \
  --save "$out/all_paths.safetensors"
named all_paths_cuda_single && run all_paths_cuda_single 300 "$py" bench/interventions_real.py --model "$model" --device cuda \
  --paths all --writer-batch-mib 0 --against "$out/all_paths.safetensors"
# the tensors one writer and a group of nine hold, counted, beside max_memory_allocated (RESULTS, session 69)
named live_memory_cuda && run live_memory_cuda 400 bash -c 'for group in 0 100000; do "$0" bench/interventions_real.py \
  --model "$1" --device cuda --paths all --writers 16 --writer-batch-mib $group --live-memory; done' "$py" "$model"
run open_tests 300 "$py" -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_axioms.py::test_seeded_results_repeat \
  "tests/test_rough_edges.py::test_track_with_a_pair_that_is_not_in_the_model" \
  tests/test_bench.py::test_measures_vs_interventions_on_the_shipped_model \
  tests/test_hub.py::test_data_based_commands_run_the_model_by_hub_id
run interventions_cpu 300 "$py" bench/interventions_real.py --model "$model" --device cpu
run verdict_cuda 400 "$py" bench/validate_real.py --model "$model"  # the whole verdict, on CUDA by default
run cores 120 "$py" bench/cpu_limits.py --sections 1c --repeats 3 --wait 0
run speed 300 "$py" bench/composition_speed.py --device cuda --no-tl --repeats 3 --wait 0
run 7b 120 "$py" bench/composition_7b.py --device cuda --wait 0
# the peak GPU memory of a traced batch against the estimate the runner refuses too-long sequences by (RESULTS, session 87)
run pattern_memory 200 "$py" bench/pattern_memory.py --model "$model" --device cuda --lengths 1025,2049,4097,8193
run precision_7b 200 "$py" bench/product_precision.py --shape 7b --device cuda
if [[ " $only " == *" suite "* ]]; then
  echo "== suite"
  OMP_WAIT_POLICY=PASSIVE timeout "${SUITE_LIMIT:-560}" "$py" -m pytest -p no:cacheprovider -n 16 -v --tb=short -rfE --ignore=tests/test_docs.py tests 2>&1 \
    | tee "$out/suite.txt" | grep -E "FAILED|ERROR|passed|failed"
fi
