"""Models by HuggingFace hub id, offline, against a cache the test builds (snapshots, refs, a
revision): never the network (HF_HUB_OFFLINE=1 in conftest)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import compscope
from compscope import LoadError

C_MAIN, C_STEP = "a" * 40, "b" * 40


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """``models--Test--tiny-llama`` with two snapshots: ``main`` and the tag ``step1000``."""
    from hf_tiny import BY_ID, build

    root = tmp_path_factory.mktemp("hub")
    repo = root / "models--Test--tiny-llama"
    for commit, seed in ((C_MAIN, 0), (C_STEP, 1)):
        build(BY_ID["llama-gqa-bias"], seed=seed).save_pretrained(repo / "snapshots" / commit, safe_serialization=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(C_MAIN)
    (repo / "refs" / "step1000").write_text(C_STEP)
    return root


def test_hub_id_reads_the_cached_snapshot(cache):
    hw = compscope.load("Test/tiny-llama", cache_dir=cache)
    direct = compscope.load(cache / "models--Test--tiny-llama" / "snapshots" / C_MAIN)
    assert torch.equal(hw.W_Q, direct.W_Q)
    assert hw.meta.name == "Test/tiny-llama"
    assert "hub id Test/tiny-llama" in hw.meta.source


@pytest.mark.parametrize("revision", ["step1000", C_STEP])
def test_revision_by_tag_or_commit(cache, revision):
    hw = compscope.load("Test/tiny-llama", revision=revision, cache_dir=cache)
    step = compscope.load(cache / "models--Test--tiny-llama" / "snapshots" / C_STEP)
    main = compscope.load("Test/tiny-llama", cache_dir=cache)
    assert torch.equal(hw.W_Q, step.W_Q) and not torch.equal(hw.W_Q, main.W_Q)
    assert hw.meta.name == f"Test/tiny-llama@{revision}"


def test_at_revision_in_the_name(cache):
    a = compscope.load("Test/tiny-llama@step1000", cache_dir=cache)
    b = compscope.load("Test/tiny-llama", revision="step1000", cache_dir=cache)
    assert torch.equal(a.W_K, b.W_K)


@pytest.mark.parametrize("source, revision, needles", [
    ("Test/not-there", None, ["Test/not-there", "revision main", "HF_HUB_OFFLINE"]),
    ("Test/tiny-llama", "step9", ["Test/tiny-llama", "revision step9"]),
    ("gpt2", None, ["gpt2", "induction-2l"]),
])
def test_missing_id_or_revision_names_id_revision_and_cache(cache, source, revision, needles):
    with pytest.raises(LoadError) as e:
        compscope.load(source, revision=revision, cache_dir=cache)
    msg = str(e.value)
    for n in needles + [str(cache)]:
        assert n in msg, msg


def test_revision_needs_a_hub_id(tmp_path):
    with pytest.raises(LoadError, match="hub ids"):
        compscope.load(tmp_path, revision="main")


def test_snapshot_without_config_or_with_one_gguf(cache, tmp_path):
    root = tmp_path / "c"
    shutil.copytree(cache, root)
    snap = root / "models--Test--tiny-llama" / "snapshots" / C_MAIN
    (snap / "config.json").unlink()
    with pytest.raises(LoadError, match="no config.json"):
        compscope.load("Test/tiny-llama", cache_dir=root)


def test_cli_scores_by_hub_id_offline(cache):
    """``compscope scores owner/name@revision`` with the cache named by HF_HUB_CACHE, offline."""
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "compscope.cli.main", *a], env=env, capture_output=True, text=True)  # noqa: E731
    ok = run("scores", "Test/tiny-llama@step1000", "--kinds", "K", "--top", "2")
    assert ok.returncode == 0, ok.stderr
    assert "Test/tiny-llama@step1000" in ok.stdout + ok.stderr
    bad = run("scores", "Test/nope")
    assert bad.returncode == 2 and "Test/nope" in bad.stderr and "HF_HUB_OFFLINE" in bad.stderr
