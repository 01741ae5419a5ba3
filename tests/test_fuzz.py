"""Fuzzed inputs: every broken file ends in a compscope error naming the file, within a time
and a memory bound, or loads into finite weights.

Mutations (``fuzz_inputs.py``, drawn by hypothesis with fixed seeds, ``derandomize``): config.json
values of four families (wrong types, negative, huge, NaN, missing and unknown keys, head counts
that do not divide), raw config text (deep nesting, non-UTF-8), safetensors headers and data,
GGUF headers, metadata and tensor tables (types, dims, offsets off alignment, counts, nested
arrays, flipped and cut bytes), compscope and toy model descriptions, and score tables.

Each case runs under a wall-clock alarm (``TIME_BOUND`` s) and an address-space limit
(``MEMORY_BOUND`` above what the process holds): a hang or a blind allocation fails the test.
``COMPSCOPE_FUZZ_EXAMPLES`` sets the cases per target (default 60; a longer run in the README).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compscope
from compscope import CompscopeError
from compscope.results.table import read_scores
from fuzz_inputs import (apply_edit, apply_gguf_edit, apply_safetensors_edit, deep_json, gguf_edit, gguf_file,
                         json_edit, llama_gguf_parts, safetensors_edit, split_safetensors)

EXAMPLES = int(os.environ.get("COMPSCOPE_FUZZ_EXAMPLES", "60"))
TIME_BOUND = 20.0  # seconds per case (most take milliseconds)
MEMORY_BOUND = 3 << 30  # bytes of address space a case may add
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
COUNTS: dict[str, dict[str, int]] = {}


class Hang(BaseException):
    pass


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def bounded():
    """An alarm after ``TIME_BOUND`` s and an address-space limit ``MEMORY_BOUND`` above now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_bytes() + MEMORY_BOUND
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)

    def alarm(*_):
        raise Hang(f"no answer within {TIME_BOUND} s")

    old = signal.signal(signal.SIGALRM, alarm)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.setitimer(signal.ITIMER_REAL, TIME_BOUND)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _allocation_failure(e: BaseException | None) -> bool:
    while e is not None:
        if isinstance(e, MemoryError) or "alloc" in str(e).lower() and "memory" in str(e).lower():
            return True
        e = e.__cause__ or e.__context__
    return False


def outcome(target: str, fn, names: list[str]) -> str:
    """Run ``fn`` bounded; it must return (finite weights) or raise a one-line compscope error that
    names one of ``names`` (the file or folder). Counts outcomes per target."""
    t0 = time.monotonic()
    try:
        with bounded():
            result = fn()
    except CompscopeError as e:
        msg = str(e)
        assert "\n" not in msg, msg
        assert any(n in msg for n in names), f"the message does not name {names}: {msg}"
        assert not _allocation_failure(e), f"a blind allocation behind: {msg}"
        kind = type(e).__name__
        if os.environ.get("COMPSCOPE_FUZZ_SHOW") and "model (" in msg:
            print("GENERIC", target, msg[-160:])
    except Hang:
        pytest.fail(f"{target}: no answer within {TIME_BOUND} s")
    else:
        if isinstance(result, compscope.HeadWeights):  # loaded: finite, and the engine can score it
            for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
                assert bool(torch.isfinite(getattr(result, name)).all()), name
            if result.n_layers > 1:
                offset = 1.0 if result.rotary is not None else 0.0  # an offset means something with rotary positions only
                t = compscope.scores(result, kinds="QK", measures=("frobenius", "overlap"), offset=offset, progress=False)
                assert all(bool(torch.isfinite(v[~v.isnan()]).all()) for v in t.values.values())
        kind = "loaded"
    assert time.monotonic() - t0 < TIME_BOUND
    COUNTS.setdefault(target, {}).setdefault(kind, 0)
    COUNTS[target][kind] += 1
    return kind


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    for target, c in sorted(COUNTS.items()):
        print(f"fuzz {target}: {sum(c.values())} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))


# ---------------------------------------------------------------- HuggingFace folders
FAMILIES = ["llama-gqa-bias", "gpt2", "neox-partial-rotary-parallel", "bert"]


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory):
    from hf_tiny import BY_ID, build

    out = {}
    for vid in FAMILIES:
        path = tmp_path_factory.mktemp("hf") / vid
        build(BY_ID[vid]).save_pretrained(path, safe_serialization=True)
        compscope.load(path)  # intact: loads
        out[vid] = path
    return out


def _copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def fuzz_document(src: Path, tmp_path: Path, name: str, target: str, extra_keys: tuple[str, ...] = ()) -> None:
    """Fuzz the JSON document ``name`` of the model folder ``src``: each case, a copy of the folder
    with 1 to 3 edits of it (:func:`json_edit`, which may add ``extra_keys``), must load or be
    refused naming the folder (:func:`outcome`, counted under ``target``)."""
    original = json.loads((src / name).read_text())

    @FUZZ
    @given(st.lists(json_edit(original, extra_keys), min_size=1, max_size=3))
    def case(edits):
        folder = _copy(src, tmp_path / "m")
        doc = original
        for e in edits:
            doc = apply_edit(doc, e)
        (folder / name).write_text(json.dumps(doc))
        outcome(target, lambda: compscope.load(folder), [str(folder)])

    case()


@pytest.mark.parametrize("family", FAMILIES)
def test_fuzzed_configs(hf_folders, tmp_path, family):
    fuzz_document(hf_folders[family], tmp_path, "config.json", f"config.json ({family})",
                  ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta",
                   "partial_rotary_factor", "n_head", "n_embd"))


@pytest.fixture(scope="module")
def reference_folder(tmp_path_factory):
    """A tiny folder in Mistral's own format (params.json + consolidated.safetensors), intact: loads."""
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    d, H, G, r, V = 16, 4, 2, 4, 32
    sd = {"tok_embeddings.weight": torch.randn(V, d, generator=g), "norm.weight": torch.ones(d),
          "output.weight": torch.randn(V, d, generator=g)}
    for i in range(2):
        sd |= {f"layers.{i}.attention.wq.weight": torch.randn(H * r, d, generator=g),
               f"layers.{i}.attention.wk.weight": torch.randn(G * r, d, generator=g),
               f"layers.{i}.attention.wv.weight": torch.randn(G * r, d, generator=g),
               f"layers.{i}.attention.wo.weight": torch.randn(d, H * r, generator=g),
               f"layers.{i}.attention_norm.weight": torch.ones(d)}
    path = tmp_path_factory.mktemp("reference") / "m"
    path.mkdir()
    save_file(sd, str(path / "consolidated.safetensors"))
    (path / "params.json").write_text(json.dumps({"dim": d, "n_layers": 2, "head_dim": r, "hidden_dim": 32, "n_heads": H,
                                                  "n_kv_heads": G, "norm_eps": 1e-5, "vocab_size": V, "rope_theta": 1e4}))
    compscope.load(path)
    return path


def test_fuzzed_reference_params(reference_folder, tmp_path):
    """params.json of a reference-format folder: every edit loads or is refused naming the folder."""
    fuzz_document(reference_folder, tmp_path, "params.json", "params.json (reference format)",
                  ("sliding_window", "moe", "use_scaled_rope", "yarn", "quantization", "tied_embeddings"))


@pytest.mark.parametrize("text", [deep_json(100_000), '{"a": ' + deep_json(50_000) + "}", "\udcff", "{\"model_type\": \"llama\"",
                                  "[1, 2]", "null", "\ufeff{}"])
def test_raw_config_text(hf_folders, tmp_path, text):
    folder = _copy(hf_folders["llama-gqa-bias"], tmp_path / "m")
    (folder / "config.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    outcome("config.json text", lambda: compscope.load(folder), [str(folder)])


def test_head_count_that_does_not_divide_the_width(hf_folders, tmp_path):
    for family, key in (("gpt2", "n_head"), ("neox-partial-rotary-parallel", "num_attention_heads"), ("bert", "num_attention_heads")):
        folder = _copy(hf_folders[family], tmp_path / family)
        cfg = json.loads((folder / "config.json").read_text())
        cfg[key] = 3
        (folder / "config.json").write_text(json.dumps(cfg))
        with pytest.raises(CompscopeError, match="does not divide|divisible"):
            compscope.load(folder)


@pytest.mark.parametrize("family", ["llama-gqa-bias", "gpt2"])
def test_fuzzed_safetensors(hf_folders, tmp_path, family):
    src = hf_folders[family]
    header, _ = split_safetensors((src / "model.safetensors").read_bytes())

    @FUZZ
    @given(st.lists(safetensors_edit(header), min_size=1, max_size=2))
    def case(edits):
        folder = _copy(src, tmp_path / "m")
        for e in edits:
            apply_safetensors_edit(folder / "model.safetensors", e)
        outcome(f"model.safetensors ({family})", lambda: compscope.load(folder), [str(folder)])

    case()


# ---------------------------------------------------------------- GGUF files
def test_intact_serialised_gguf_loads(tmp_path):
    pytest.importorskip("gguf")
    meta, tensors = llama_gguf_parts()
    (tmp_path / "m.gguf").write_bytes(gguf_file(meta, tensors))
    hw = compscope.load(tmp_path / "m.gguf")
    assert (hw.n_layers, hw.n_heads, hw.n_kv_heads, hw.d_model) == (2, 4, 2, 16)


def test_fuzzed_gguf(tmp_path):
    pytest.importorskip("gguf")
    meta, tensors = llama_gguf_parts()

    @FUZZ
    @given(gguf_edit(meta, tensors))
    def case(edit):
        path = tmp_path / "m.gguf"
        path.write_bytes(apply_gguf_edit(meta, tensors, edit))
        outcome("gguf", lambda: compscope.load(path), [str(path)])

    case()


@pytest.mark.parametrize("shift", [1, 4, 16, -32])
def test_gguf_offsets_off_alignment_are_refused(tmp_path, shift):
    """GGUF requires every tensor offset to be a multiple of the alignment; a shifted offset
    used to load shifted weights silently."""
    pytest.importorskip("gguf")
    meta, tensors = llama_gguf_parts()
    path = tmp_path / "m.gguf"
    path.write_bytes(apply_gguf_edit(meta, tensors, ("offset", 3, shift)))
    with pytest.raises(CompscopeError, match="align|offset"):
        compscope.load(path)


# ---------------------------------------------------------------- compscope and toy descriptions
@pytest.fixture(scope="module")
def native_folder(hf_folders, tmp_path_factory):
    from compscope.loading.formats import native

    path = tmp_path_factory.mktemp("native") / "m"
    native.save(compscope.load(hf_folders["llama-gqa-bias"]), path)
    return path


@pytest.fixture(scope="module")
def toy_folder():
    from compscope.loading.builtin import resolve

    return Path(resolve("induction-2l"))


@pytest.mark.parametrize("folder_fixture, manifest", [("native_folder", "compscope.json"), ("toy_folder", "toy.json")])
def test_fuzzed_model_descriptions(request, tmp_path, folder_fixture, manifest):
    """compscope's own model folders: their JSON description edited."""
    fuzz_document(request.getfixturevalue(folder_fixture), tmp_path, manifest, manifest)


# ---------------------------------------------------------------- score tables
@pytest.fixture(scope="module")
def score_frame(toy_folder):
    return compscope.scores(toy_folder, kinds="K", measures=("frobenius",), progress=False).to_pandas()


COLUMN_VALUES = {"src_layer": [-1, 2, 10**6, 2**40, 1.5], "src_head": [-1, 4, 10**7], "dst_layer": [-2, 0, 2**33],
                 "dst_head": [-1, 99], "value": [float("nan"), float("inf"), -1.0], "measure": ["", "nope"],
                 "kind": ["X", ""], "metric": ["identity", "embed"]}


def test_fuzzed_score_tables(score_frame, tmp_path):
    @FUZZ
    @given(st.sampled_from(sorted(COLUMN_VALUES)), st.data(), st.sampled_from([".parquet", ".csv"]), st.booleans())
    def case(column, data, suffix, drop):
        df = score_frame.copy()
        if drop:
            df = df.drop(columns=[column])
        else:
            row = data.draw(st.integers(0, len(df) - 1))
            value = data.draw(st.sampled_from(COLUMN_VALUES[column]))
            df[column] = df[column].astype(object)
            df.loc[row, column] = value
        path = tmp_path / f"t{suffix}"
        df.to_parquet(path) if suffix == ".parquet" else df.to_csv(path, index=False)
        outcome("score table", lambda: read_scores(path), [str(path)])

    case()


# ---------------------------------------------------------------- files that are not files
@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "x.gguf", "toy.json", "toy/model.safetensors",
                                  "compscope.json", "heads.safetensors", "t.parquet"])
def test_fifo_named_like_a_weight_file_does_not_hang(hf_folders, native_folder, toy_folder, tmp_path, name):
    src = toy_folder if name.startswith("toy") else native_folder if name in ("compscope.json", "heads.safetensors") else hf_folders["llama-gqa-bias"]
    name = name.removeprefix("toy/")
    folder = _copy(src, tmp_path / "m")
    target = folder / name
    if target.exists():
        target.unlink()
    os.mkfifo(target)
    source = target if name.endswith((".gguf", ".parquet")) else folder
    fn = (lambda: read_scores(target)) if name.endswith(".parquet") else (lambda: compscope.load(source))
    assert outcome("fifo", fn, [str(folder)]) != "loaded"


# ---------------------------------------------------------------- the cases a hostile probe found
def test_float8_tensors_are_checked_for_finiteness():
    from compscope.loading.checkpoint import all_finite

    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        assert all_finite(torch.ones(4).to(dt))
        assert not all_finite(torch.tensor([1.0, float("nan")]).to(dt))


def test_negative_layer_in_a_score_table_does_not_wrap(score_frame, tmp_path):
    df = score_frame.copy()
    df.loc[0, "src_layer"] = -1
    df.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(CompscopeError, match="src_layer.*negative"):
        read_scores(tmp_path / "t.parquet")


@pytest.mark.parametrize("field, value, needle", [
    ("kv_map", [0.0, 0.5, 1.0, 1.0], "kv_map"),
    ("rotary.dim", 0, "rotary dim"), ("rotary.dim", 3, "rotary dim"), ("rotary.dim", 8.5, "rotary dim"),
    ("attn_scale", "big", "attn_scale"), ("sliding_window", [0, None], "sliding_window"),
])
def test_native_settings_are_checked(native_folder, tmp_path, field, value, needle):
    folder = _copy(native_folder, tmp_path / "m")
    doc = json.loads((folder / "compscope.json").read_text())
    d = doc["fields"]
    *head, last = field.split(".")
    for k in head:
        d = d[k]
    d[last] = value
    (folder / "compscope.json").write_text(json.dumps(doc))
    with pytest.raises(CompscopeError, match=needle):
        compscope.load(folder)


@pytest.mark.parametrize("theta", [0, -5.0, float("nan"), 1.0, "10000"])
def test_rope_bases_that_give_no_finite_frequencies_are_refused(hf_folders, tmp_path, theta):
    folder = _copy(hf_folders["llama-gqa-bias"], tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CompscopeError, match="rope_theta"):
        compscope.load(folder)
