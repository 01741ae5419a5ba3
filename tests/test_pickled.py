"""HuggingFace folders with PyTorch's pickled weights only (``pytorch_model.bin``, sharded or not):
read through torch's weights-only unpickler as the same model in safetensors reads; a pickle that
would run code is refused without running it; and a hub model without safetensors fetches them."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

import compscope
from compscope import LoadError

pytest.importorskip("transformers")
from hf_tiny import BY_ID, build  # noqa: E402

NAMES = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E", "W_U")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The same tiny Llama with attention biases as safetensors (``st``), as one ``pytorch_model.bin``
    (``bin``) and as two pickled shards with their index (``shards``)."""
    root = tmp_path_factory.mktemp("pickled")
    model = build(BY_ID["llama-gqa-bias"], seed=3)
    model.save_pretrained(root / "st")
    sd = model.state_dict()
    for name in ("bin", "shards"):
        (root / name).mkdir()
        shutil.copy(root / "st" / "config.json", root / name)
    torch.save(sd, root / "bin" / "pytorch_model.bin")
    keys = sorted(sd)
    parts = {"pytorch_model-00001-of-00002.bin": keys[: len(keys) // 2], "pytorch_model-00002-of-00002.bin": keys[len(keys) // 2:]}
    for file, names in parts.items():
        torch.save({k: sd[k] for k in names}, root / "shards" / file)
    (root / "shards" / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {k: f for f, ks in parts.items() for k in ks}}))
    return root


@pytest.mark.parametrize("name", ["bin", "shards"])
def test_pickled_weights_read_as_the_same_model_in_safetensors(folders, name):
    a, b = compscope.load(folders / "st"), compscope.load(folders / name)
    for n in NAMES:
        assert torch.equal(getattr(a, n), getattr(b, n)), n
    assert any("torch.load(weights_only=True)" in note for note in b.meta.notes)
    assert not any("weights_only" in note for note in a.meta.notes)


def test_the_legacy_pickle_format_is_read_too(folders, tmp_path):
    """torch's format before 1.6 (not a zip: cannot be memory-mapped) is read without mapping."""
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(folders / "st" / "config.json", old)
    sd = torch.load(folders / "bin" / "pytorch_model.bin", weights_only=True)
    torch.save(sd, old / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    assert torch.equal(compscope.load(old).W_K, compscope.load(folders / "st").W_K)


def test_safetensors_are_read_where_a_folder_has_both(folders, tmp_path):
    both = tmp_path / "both"
    shutil.copytree(folders / "st", both)
    torch.save({"junk": torch.zeros(1)}, both / "pytorch_model.bin")  # not read: the safetensors are
    assert torch.equal(compscope.load(both).W_Q, compscope.load(folders / "st").W_Q)


class _RunsCode:
    """Pickled as a call of ``os.system``: what a malicious checkpoint holds."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused_without_running_it(folders, tmp_path):
    evil = tmp_path / "evil"
    evil.mkdir()
    shutil.copy(folders / "st" / "config.json", evil)
    marker = tmp_path / "ran"
    torch.save({"model.embed_tokens.weight": torch.zeros(2, 2), "x": _RunsCode(marker)}, evil / "pytorch_model.bin")
    with pytest.raises(LoadError, match=r"evil/pytorch_model\.bin: holds objects other than tensors \(it names "
                                        r"posix\.system\), which torch's weights-only loader refuses"):
        compscope.load(evil)
    assert not marker.exists()


@pytest.mark.parametrize("write, needle", [
    (lambda f, good: f.write_bytes(good.read_bytes()[: good.stat().st_size // 2]), "not a readable PyTorch checkpoint"),
    (lambda f, good: f.write_bytes(b"not a checkpoint at all"), "not a readable PyTorch checkpoint"),
    (lambda f, good: torch.save([torch.ones(2)], f), "expected a mapping of tensor names to tensors \\(a state dict\\), got a list"),
    (lambda f, good: torch.save({"a": 1}, f), "expected a mapping .*, got a dict holding other values"),
])
def test_a_broken_or_foreign_pickle_is_refused_by_file(folders, tmp_path, write, needle):
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(folders / "st" / "config.json", bad)
    write(bad / "pytorch_model.bin", folders / "bin" / "pytorch_model.bin")
    with pytest.raises(LoadError, match=rf"bad/pytorch_model\.bin: {needle}"):
        compscope.load(bad)


def test_a_folder_without_weights_names_both_kinds(folders, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(folders / "st" / "config.json", empty)
    with pytest.raises(LoadError, match=r"empty: no weights: neither \*\.safetensors files nor pytorch_model\.bin"):
        compscope.load(empty)
    (empty / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"a": "gone.bin"}}))
    with pytest.raises(LoadError, match=r"empty/gone\.bin: shard listed in pytorch_model\.bin\.index\.json is missing"):
        compscope.load(empty)


def test_a_pickled_model_runs_on_data(folders):
    """transformers reads the same pickled folder to run it, and computes what compscope read."""
    from compscope.data.runner import runner_for

    if tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 6):
        pytest.skip("transformers loads pickled weights only with torch >= 2.6 (its torch.load safeguard)")

    runner = runner_for(folders / "bin", progress=False, device="cpu")
    runner.trace(torch.randint(0, runner.hw.n_vocab, (2, 6), generator=torch.Generator().manual_seed(0)))
    assert runner._agreed  # its attention is what compscope recomputes from the weights it read


def test_a_hub_model_without_safetensors_fetches_its_pickled_weights(folders, tmp_path, monkeypatch):
    """Online, the first download asks for safetensors; where the snapshot has none (and no GGUF
    file), a second asks for ``pytorch_model*.bin`` as well; a model with safetensors never does."""
    pytest.importorskip("huggingface_hub")
    import huggingface_hub

    asked = []

    def fake(**kw):
        if kw.get("local_files_only"):
            raise FileNotFoundError("not cached")
        asked.append(kw["allow_patterns"])
        source = folders / ("bin" if kw["repo_id"] == "Test/pickled" else "st")
        snap = tmp_path / kw["repo_id"].replace("/", "--")
        snap.mkdir(exist_ok=True)
        for f in source.iterdir():  # what the patterns let through
            if any(f.match(p) for p in kw["allow_patterns"]):
                shutil.copy(f, snap)
        return str(snap)

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    hw = compscope.load("Test/pickled")
    assert torch.equal(hw.W_Q, compscope.load(folders / "st").W_Q)
    assert len(asked) == 2 and "pytorch_model*.bin" not in asked[0] and "pytorch_model*.bin" in asked[1]
    asked.clear()
    compscope.load("Test/safe")
    assert len(asked) == 1
