"""Interventional composition of every pair and kind on a real model (default SmolLM2-135M, 30 layers
x 9 heads: 3,915 (writer, later layer) blocks x 3 kinds), with the time of each phase and the peak
memory of the process. Target (issue): all pairs and kinds in at most 10 minutes on the project's
2-core CPU.

    python bench/interventions_real.py                       # smollm2, 16 sequences of 1 + 2 x 32 tokens
    python bench/interventions_real.py --model PATH --sequences 8 --half 64
    python bench/interventions_real.py --model PATH --device cuda   # the model and the recomputation on a GPU
    python bench/interventions_real.py --model PATH --device cuda --model-dtype bfloat16   # the model in 16 bits
    python bench/interventions_real.py --random-llama 2048,32,8,4   # a random Llama: width, heads, K/V heads, layers
    python bench/interventions_real.py --plain   # each reader's input recomputed from the residual (a GPU's route)
    python bench/interventions_real.py --plain --writer-batch-mib 256   # that route with a writer layer's heads batched
    python bench/interventions_real.py --paths all   # every path: one changed forward pass per writer (or group)
    python bench/interventions_real.py --paths all --writers 3,16   # the writers of layers 3 and 16 only

``--random-llama D,H,KV,L`` builds a Llama of that shape with random weights (seed 0, heads of
``D / H``, biases on Q/K/V, MLP as wide as the residual, 512 tokens) in a temporary folder and runs
it instead of ``--model``: how the time grows with the residual's width against a head's.

Prints the phases (load, trace + labels, interventions), the peak resident memory, and the
strongest K effects, so that a rerun can be compared. ``--live-memory`` also counts the bytes of
the tensors the interventions hold at once (every tensor an operation makes, until it is freed, on
any device, without the allocator's slack that the resident memory carries) beside the estimate the
plain route sizes its writer groups by (bench/RESULTS.md, session 69):

    python bench/interventions_real.py --plain --writers 16 --writer-batch-mib 0 --live-memory
    python bench/interventions_real.py --plain --writers 16 --writer-batch-mib 100000 --live-memory

``--save FILE`` keeps every effect (a safetensors file); ``--against FILE`` prints, per kind, the
largest difference from those of an earlier run (another commit, device or dtype):

    python bench/interventions_real.py --save before.safetensors      # on one commit
    python bench/interventions_real.py --against before.safetensors   # on another
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from compscope.data.head_labels import activation_labels  # noqa: E402
from compscope.data import intervene  # noqa: E402
from compscope.cli.common import writers as writer_list  # noqa: E402
from compscope.defaults import PATHS  # noqa: E402
from compscope.errors import OptionError  # noqa: E402
from compscope.data.intervene import intervention_effects  # noqa: E402
from compscope.data.runner import RUN_DTYPES, runner_for  # noqa: E402
from compscope.data.sequences import repeats  # noqa: E402
from compscope.results.table import top_entries  # noqa: E402
from composition_speed import check_device  # noqa: E402


#: sequences intervened on at a time (intervention_effects' default)
BATCH = 16


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


class LiveBytes:
    """A dispatch mode counting the bytes of the storages that operations make while it is on, less
    those freed since: ``peak`` is the most held at once (views of a storage already held, and of
    the arguments', count nothing)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                given = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))}
                for t in _tensors(out):
                    outer.made(t.untyped_storage(), given)
                return out

        self.mode, self.live, self.peak, self.held = Mode(), 0, 0, {}

    def made(self, storage, given: set) -> None:
        import weakref

        key = storage.data_ptr()
        if not key or key in given or key in self.held:
            return
        self.held[key] = storage.nbytes()
        self.live += self.held[key]
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self.freed, key)

    def freed(self, key: int) -> None:
        self.live -= self.held.pop(key, 0)


def _tensors(tree) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def random_llama(d_model: int, heads: int, kv_heads: int, layers: int) -> str:
    """A folder holding a random-weight Llama of that shape (module docstring)."""
    import tempfile

    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=d_model, num_attention_heads=heads, num_key_value_heads=kv_heads,
                                   head_dim=d_model // heads, num_hidden_layers=layers, intermediate_size=d_model,
                                   vocab_size=512, max_position_embeddings=128, attention_bias=True)
    folder = os.path.join(tempfile.mkdtemp(), f"random-llama-{d_model}-{heads}-{kv_heads}-{layers}")
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    return folder


def shape(text: str) -> tuple[int, int, int, int]:
    try:
        d, h, kv, l = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected D_MODEL,HEADS,KV_HEADS,LAYERS") from None
    if min(d, h, kv, l) < 1 or d % h or h % kv:
        raise argparse.ArgumentTypeError(f"{text!r}: positive, with HEADS dividing D_MODEL and KV_HEADS dividing HEADS")
    return d, h, kv, l


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--random-llama", type=shape, metavar="D,H,KV,L", help="a random Llama of this shape instead")
    ap.add_argument("--sequences", type=int, default=16)
    ap.add_argument("--half", type=int, default=32)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--device", default="cpu", help="where the model runs and the heads are recomputed (default cpu)")
    ap.add_argument("--model-dtype", default="float32", choices=list(RUN_DTYPES),
                    help="what the model computes in (default float32; the recomputation stays float32)")
    ap.add_argument("--plain", action="store_true",
                    help="every reader's input recomputed from the residual (no direct path in the writer's "
                         "coordinates; on a GPU always so)")
    ap.add_argument("--writer-batch-mib", type=float, metavar="MIB",
                    help="on the plain route, batch a writer layer's heads in about this much memory of changed "
                         "reads (default: on a GPU 2048 or a quarter of its free memory, on the CPU one writer "
                         "at a time; 0: one writer at a time)")
    ap.add_argument("--paths", choices=PATHS, default="direct",
                    help="the direct path (default) or every path (a changed forward pass per writer, or group of writers)")
    ap.add_argument("--writers", type=writer_list, metavar="LIST",
                    help="intervene on these writers only (LAYER.HEAD, LAYER or A-B, comma-separated; default every head)")
    ap.add_argument("--live-memory", action="store_true",
                    help="count the bytes of the tensors the interventions hold at once (slower)")
    ap.add_argument("--save", metavar="FILE", help="write every effect to FILE (safetensors)")
    ap.add_argument("--against", metavar="FILE", help="print the largest difference from the effects in FILE")
    args = ap.parse_args()
    if args.random_llama:
        args.model = random_llama(*args.random_llama)
    check_device(args.device)
    intervene.FACTORED = not args.plain
    if args.writer_batch_mib is not None:
        if args.writer_batch_mib < 0:
            ap.error(f"--writer-batch-mib {args.writer_batch_mib:g}: give 0 or more")
        intervene.WRITER_BATCH_BYTES = int(args.writer_batch_mib * 2**20)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    runner = runner_for(args.model, device=args.device, dtype=args.model_dtype)
    t1 = time.perf_counter()
    hw = runner.hw
    try:
        intervene.writer_heads(args.writers, hw.n_layers, hw.n_heads, hw.meta.name)
    except OptionError as e:
        ap.error(f"--writers: {e}")
    reps = repeats(args.sequences, args.half, hw.n_vocab, args.seed, runner.bos)
    labels = activation_labels(runner, reps, progress=False)  # returns on the CPU: the device is done
    t2 = time.perf_counter()
    live = LiveBytes() if args.live_memory else None
    with live.mode if live else contextlib.nullcontext():
        eff = intervention_effects(runner, reps.tokens, "QKV", progress=True, paths=args.paths, batch_size=BATCH,
                                   writers=args.writers)
    t3 = time.perf_counter()
    L, H = hw.n_layers, hw.n_heads
    chosen = eff.writers or [(l, h) for l in range(L - 1) for h in range(H)]
    blocks = sum(L - 1 - l for l, _ in chosen)
    print(f"{hw.meta.name}: {L} layers x {H} heads, {args.sequences} sequences of {reps.tokens.shape[1]} tokens, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}, device {runner.device}, "
          f"model in {str(runner.dtype).removeprefix('torch.')}, {intervene.route(hw, reps.tokens[:BATCH].shape, runner.device, args.paths)} route where it applies"
          + ("; every path" if args.paths == "all" else "") + (f"; {intervene.writers_text(eff.writers)}" if eff.writers else ""))
    print(f"load (transformers + HeadWeights)   {t1 - t0:7.1f} s")
    print(f"activation labels                   {t2 - t1:7.1f} s")
    print(f"interventions, all pairs and kinds  {t3 - t2:7.1f} s   ({blocks} writer x later-layer blocks, "
          f"{1e3 * (t3 - t2) / blocks:.1f} ms each)")
    print(f"peak resident memory                {peak_mib():7.0f} MiB")
    if runner.device.type == "cuda":
        print(f"peak GPU memory                     {torch.cuda.max_memory_allocated(runner.device) / 2**20:7.0f} MiB")
    if live:
        way = intervene.route(hw, reps.tokens[:BATCH].shape, runner.device, args.paths)
        estimate = intervene.writer_bytes(hw, reps.tokens[:BATCH].shape, args.paths) / 2**20
        print(f"peak live tensors (interventions)   {live.peak / 2**20:7.0f} MiB   ({way} route; the writer-group "
              f"estimate is {estimate:.1f} MiB a writer)")
    print("strongest K effects: " + "   ".join("{}.{}->{}.{} ".format(*i) + f"{v:.3f}"
                                             for i, v in top_entries(eff.by_kind["K"], 5)))
    print("best previous-token heads: " + "   ".join(f"{l}.{h} {v:.2f}" for (l, h), v in top_entries(labels.previous_token, 3))
          + ";  best induction heads: " + "   ".join(f"{l}.{h} {v:.2f}" for (l, h), v in top_entries(labels.induction, 3)))
    effects = {**eff.by_kind, "V (direction)": eff.v_direction}
    if args.save:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in effects.items()}, args.save)
    if args.against:
        from safetensors.torch import load_file

        before = load_file(args.against)
        for kind, now in effects.items():
            was = before[kind]
            same_pairs = torch.equal(now.isfinite(), was.isfinite())
            d = (now - was)[now.isfinite()].abs()
            print(f"against {args.against}: {kind:<14} largest |difference| {d.max().item():.3g} "
                  f"(largest effect {now[now.isfinite()].abs().max().item():.3g}){'' if same_pairs else '; other pairs measured'}")


if __name__ == "__main__":
    main()
