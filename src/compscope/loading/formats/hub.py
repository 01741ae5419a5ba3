"""Models by HuggingFace hub id (``"EleutherAI/pythia-70m"``, ``"gpt2"``), through ``huggingface_hub``.

Not one of :data:`FORMATS`: ``load`` asks it last, for a name no format knows. The local cache
is read first (``snapshots/<commit>`` of ``models--owner--name``, a branch or tag through
``refs/<revision>``). A download happens only where the environment allows it: never
with ``HF_HUB_OFFLINE`` set, and then only the config, tokenizer and safetensors files (and, for a
model that has no safetensors, its ``pytorch_model*.bin``, read through torch's weights-only unpickler;
for one in the makers' own format only, its ``consolidated`` files).
A missing model is an error naming the id, the revision and the cache folder. The
snapshot is read by the folder (or GGUF) format like any local path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import LoadError, one_line

#: what a hub id looks like: ``name`` or ``owner/name`` (letters, digits, ``-``, ``_``, ``.``),
#: optionally ``@revision`` (a branch, tag or commit: how the command line names a revision)
_ID = re.compile(r"^(?P<id>[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?)(@(?P<rev>[\w./-]{1,128}))?$")
#: files fetched when a download is allowed (weights as safetensors; configs and tokenizers)
ALLOW = ["*.json", "*.safetensors", "tokenizer.model", "*.txt"]
#: fetched too where a snapshot has no safetensors: PyTorch's pickled weights, which compscope reads
#: through torch's weights-only unpickler only (:mod:`compscope.loading.pickled`)
PICKLED = ["pytorch_model*.bin"]
#: the same weights again in the model makers' own format (Mistral's repositories hold both): fetched
#: only where the snapshot has no config.json, that is where they are the model's only weights
REFERENCE = ["consolidated*"]


@dataclass(frozen=True)
class HubModel:
    """A hub id with the revision (branch, tag or commit; default ``main``) and cache folder
    (default: huggingface_hub's) to read it from."""

    repo_id: str
    revision: str | None = None
    cache_dir: str | Path | None = None

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


def looks_like_id(source: object) -> bool:
    """A string shaped like a hub id that is not a local path or a file name."""
    if isinstance(source, HubModel):
        return True
    if not isinstance(source, str) or not _ID.match(source) or source.endswith((".gguf", ".safetensors", ".json", ".parquet", ".csv")):
        return False
    try:
        path = Path(source)
        # a path whose folder exists locally ("runs/a" beside "runs/") is a missing file, not a hub id
        return not path.exists() and not (len(path.parts) > 1 and Path(path.parts[0]).is_dir())
    except OSError:
        return False


def parse(text: str, revision: str | None = None, cache_dir: str | Path | None = None) -> HubModel:
    """``owner/name`` or ``owner/name@revision`` as a :class:`HubModel` (``revision`` given here wins)."""
    m = _ID.match(text)
    if m is None:
        raise LoadError(f"{text!r} is not a HuggingFace hub id (owner/name, optionally @revision)")
    return HubModel(m["id"], revision or m["rev"], cache_dir)


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def cache_folder(cache_dir: str | Path | None) -> str:
    if cache_dir is not None:
        return str(cache_dir)
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def snapshot(model: HubModel) -> Path:
    """The local snapshot folder of ``model``: from the cache, or downloaded where allowed."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:
        from ..builtin import BUILTINS

        raise LoadError(f"{model}: not a local path, not a built-in model ({', '.join(BUILTINS)}); loading it by hub "
                        "id needs 'huggingface_hub' (pip install huggingface_hub)") from e
    kw = dict(repo_id=model.repo_id, revision=model.revision, cache_dir=model.cache_dir, allow_patterns=ALLOW,
              ignore_patterns=REFERENCE)
    where = f"{model.repo_id} (revision {model.revision or 'main'}): {_not_found_as(model)}"
    try:
        return Path(snapshot_download(**kw, local_files_only=True))
    except Exception as cached_error:  # not cached (huggingface_hub raises several kinds)
        if offline():
            raise LoadError(
                f"{where} not in the HuggingFace cache {cache_folder(model.cache_dir)} (HF_HUB_OFFLINE is set, so nothing "
                "is downloaded)"
            ) from cached_error
    try:
        folder = Path(snapshot_download(**kw))
        if (folder / "params.json").is_file() and not (folder / "config.json").is_file():  # the makers' format only
            folder = Path(snapshot_download(**{**kw, "ignore_patterns": None}))
        elif not any(folder.glob("*.safetensors")) and not any(folder.glob("*.gguf")):  # older models: pickles only
            folder = Path(snapshot_download(**{**kw, "allow_patterns": ALLOW + PICKLED}))
        return folder
    except Exception as e:
        raise LoadError(
            f"{where} not in the HuggingFace cache {cache_folder(model.cache_dir)}, and cannot be downloaded: "
            f"{download_failure(e, model)}"
        ) from e


def _not_found_as(model: HubModel) -> str:
    """What ``model``'s name is not, before "not in the HuggingFace cache": a built-in model's name
    reaches the hub only with a revision or cache folder, which built-in models do not have."""
    from ..builtin import BUILTINS

    if model.repo_id in BUILTINS:
        return (f"{model.repo_id} is a built-in model, which has no revisions or cache folder (name it alone), and as a "
                "hub id it is")
    return f"not a local path, not a built-in model ({', '.join(BUILTINS)}), and"


def download_failure(e: BaseException, model: HubModel) -> str:
    """Why a download failed, as one sentence of ours (huggingface_hub's own text is long and
    multi-line; it is quoted only as the name of the error underneath)."""
    from huggingface_hub import errors

    if isinstance(e, errors.GatedRepoError):
        return f"{model.repo_id} is gated (accept its terms on the hub, then log in with `hf auth login`)"
    if isinstance(e, errors.RevisionNotFoundError):
        return f"{model.repo_id} has no revision {model.revision!r} on the hub"
    if isinstance(e, errors.RepositoryNotFoundError):
        return f"the hub has no repository {model.repo_id} (or it is private: log in with `hf auth login`)"
    chain, cause = [], e
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    network = next((c for c in chain if _is_network(c)), None)
    if network is not None:
        return f"the hub cannot be reached ({type(network).__name__}: {_first_sentence(network)}); set HF_HUB_OFFLINE=1 to work from the cache only"
    return f"{type(e).__name__}: {_first_sentence(e)}"


def _is_network(e: BaseException) -> bool:
    name = type(e).__name__
    return any(word in name for word in ("Connect", "Timeout", "NetworkError", "ProxyError")) or isinstance(e, ConnectionError)


def _first_sentence(e: BaseException, limit: int = 160) -> str:
    """The first sentence of ``e``'s message, at most ``limit`` characters, cut at a word."""
    text = one_line(e)
    end = text.find(". ")
    text = text if end < 0 else text[: end]
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + " ..."
    return text.rstrip(".")


def local_model(source: str | HubModel) -> tuple[HubModel, Path, Path]:
    """``(model, snapshot folder, what to read there)``: the folder when it has a ``config.json`` (or,
    in the model makers' own format, a ``params.json``), else its one ``.gguf`` file (or the first
    shard, where the files are the shards of one split GGUF file). What the loader reads and what
    the data runner runs."""
    from .gguf import shard_set

    model = source if isinstance(source, HubModel) else parse(source)
    folder = snapshot(model)
    if (folder / "config.json").is_file() or (folder / "params.json").is_file():
        return model, folder, folder
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) > 1 and shard_set(ggufs):
        return model, folder, ggufs[0]
    if len(ggufs) != 1:
        raise LoadError(f"{model}: the snapshot {folder} has no config.json" + (f" and {len(ggufs)} .gguf files" if ggufs else ""))
    return model, folder, ggufs[0]


def read(source):
    import dataclasses

    from ..sources import read_unprocessed

    model, folder, target = local_model(source)
    hw = read_unprocessed(target)
    return dataclasses.replace(hw, meta=dataclasses.replace(hw.meta, name=str(model), source=f"hub id {model} ({folder})"))
