"""Models by HuggingFace hub id, offline, against a cache the test builds (snapshots, refs, a
revision): never the network (HF_HUB_OFFLINE=1 in conftest)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import compscope
from compscope import LoadError
from compscope.loading.sources import load_with_positional

hub_errors = pytest.importorskip("huggingface_hub.errors")

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
    both, positional = load_with_positional("Test/tiny-llama", revision=revision, cache_dir=cache)  # passed on to load
    assert torch.equal(both.W_Q, step.W_Q) and positional is both


def test_at_revision_in_the_name(cache):
    a = compscope.load("Test/tiny-llama@step1000", cache_dir=cache)
    b = compscope.load("Test/tiny-llama", revision="step1000", cache_dir=cache)
    assert torch.equal(a.W_K, b.W_K)


@pytest.mark.parametrize("source, revision, needles", [
    ("Test/not-there", None, ["Test/not-there", "revision main", "HF_HUB_OFFLINE"]),
    ("Test/tiny-llama", "step9", ["Test/tiny-llama", "revision step9"]),
    ("gpt2", None, ["gpt2", "not a built-in model (induction-2l, smollm2"]),
    ("smollm2", "main", ["smollm2 (revision main): smollm2 is a built-in model, which has no revisions or cache folder "
                         "(name it alone), and as a hub id it is not in the HuggingFace cache"]),
])
def test_missing_id_or_revision_names_id_revision_and_cache(cache, source, revision, needles):
    with pytest.raises(LoadError) as e:
        compscope.load(source, revision=revision, cache_dir=cache)
    msg = str(e.value)
    for n in needles + [str(cache)]:
        assert n in msg, msg


def test_revision_needs_a_hub_id(tmp_path):
    """``revision=`` or ``cache_dir=`` with a path, given as a Path or as a string, is refused naming it."""
    for source, where in ((tmp_path, {"revision": "main"}), (str(tmp_path), {"revision": "main"}),
                          (str(tmp_path), {"cache_dir": str(tmp_path)})):
        said = rf"^{re.escape(str(tmp_path))}: revision= and cache_dir= apply to HuggingFace hub ids"
        with pytest.raises(LoadError, match=said):
            compscope.load(source, **where)


def test_a_snapshot_without_config_json_or_a_gguf_file_is_refused(cache, tmp_path):
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


def _http(cls, status: int, text: str):
    """The hub's HTTP error ``cls`` for a response of ``status``: an ``httpx`` response (huggingface_hub
    1.x and later), or a ``requests`` one (0.x, which transformers 4 installs)."""
    url = "https://huggingface.co/api/models/x"
    try:
        import httpx
    except ImportError:
        import requests

        response = requests.Response()
        response.status_code, response.url, response.request = status, url, requests.Request("GET", url).prepare()
        return cls(text, response=response)
    return cls(text, response=httpx.Response(status, request=httpx.Request("GET", url)))


def _unreachable():
    """What huggingface_hub 2.x raises with no network: a LocalEntryNotFoundError caused by the
    connection error, with a long multi-line text."""
    LocalEntryNotFoundError = hub_errors.LocalEntryNotFoundError
    try:
        try:
            raise ConnectionError("[Errno -2] Name or service not known")
        except ConnectionError as cause:
            raise LocalEntryNotFoundError(
                "An error happened while trying to locate the files on the Hub, and we cannot find the\n"
                "appropriate snapshot folder for the specified revision on the local disk. Please check") from cause
    except LocalEntryNotFoundError as e:
        return e


@pytest.mark.parametrize("make, needles", [
    (lambda: _unreachable(), ["the hub cannot be reached", "ConnectionError", "Name or service not known", "HF_HUB_OFFLINE=1"]),
    (lambda: _http(hub_errors.RepositoryNotFoundError, 404, "Repository Not Found for url"),
     ["the hub has no repository Test/elsewhere"]),
    (lambda: _http(hub_errors.GatedRepoError, 403, "Access restricted"),
     ["Test/elsewhere is gated", "log in"]),
    (lambda: _http(hub_errors.RevisionNotFoundError, 404, "Invalid rev id"),
     ["has no revision 'v9' on the hub"]),
    (lambda: RuntimeError("disk full. Something else follows. " + "x " * 200), ["RuntimeError: disk full"]),
])
def test_failed_download_ends_with_our_own_sentence(cache, monkeypatch, make, needles):
    """Online, a model neither cached nor downloadable: the reason is one sentence of ours (the
    library's multi-line text never shows, cut or whole)."""
    import huggingface_hub

    def fake(**kw):
        if kw.get("local_files_only"):
            raise _unreachable()  # not in the cache
        raise make()

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    with pytest.raises(LoadError) as e:
        compscope.load("Test/elsewhere", revision="v9", cache_dir=cache)
    msg = str(e.value)
    assert msg.startswith("Test/elsewhere (revision v9): not a local path") and "cannot be downloaded: " in msg, msg
    for n in needles:
        assert n in msg, msg
    assert "\n" not in msg and "Please check" not in msg and "Something else" not in msg and len(msg) < 400, msg


def test_data_based_commands_run_the_model_by_hub_id(cache, monkeypatch):
    """The runner (validate, intervene, the activations metric) runs the cached snapshot of the
    revision asked for, as ``load`` reads it; a snapshot without tokenizer files has no tokenizer
    (transformers would build an empty one), so the metric falls back to repeated sequences."""
    from huggingface_hub import constants

    from compscope.data.runner import runner_for

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    snap = cache / "models--Test--tiny-llama" / "snapshots"
    by_id, step = runner_for("Test/tiny-llama@step1000", progress=False), runner_for(snap / C_STEP, progress=False)
    main = runner_for("Test/tiny-llama", progress=False)
    assert by_id.hw.meta.name == "Test/tiny-llama@step1000" and by_id.tokenizer is None
    ids = torch.randint(0, by_id.hw.n_vocab, (2, 7), generator=torch.Generator().manual_seed(0))
    a, b, c = by_id.trace(ids), step.trace(ids), main.trace(ids)
    assert all(torch.equal(x, y) for x, y in zip(a.attn_out, b.attn_out))
    assert not torch.allclose(a.attn_out[0], c.attn_out[0])
    v = compscope.validate("Test/tiny-llama@step1000", sequences=2, half=4, intervention_sequences=2,
                           kinds="K", metrics=("identity", "activations"), progress=False)
    assert {r["metric"] for r in v.rows} == {"identity", "activations"}, v.notes
