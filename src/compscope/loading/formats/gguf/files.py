"""The GGUF container on disk: one file's header and tensor table, mapped (every defect named by file), and
the shards of a file llama.cpp split (``NAME-0000k-of-0000n.gguf``), read as one."""

from __future__ import annotations

import mmap
import re
import struct
from pathlib import Path

from ...checkpoint import one_line
from ...gguf_file import check_magic, read_header
from ....errors import LoadError

#: how llama.cpp names shard ``k`` of ``n`` of a split GGUF file (``llama-gguf-split``, gguf-py's
#: ``GGUFWriter(split_max_tensors=...)``): ``NAME-0000k-of-0000n.gguf``
SHARD_NAME = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def open_file(path: Path):
    """``(metadata, tensor table, mapped bytes)`` of one GGUF file, every defect named by file
    (missing, empty, not GGUF, truncated header or tensor data, no ``gguf`` package)."""
    if not path.is_file():
        raise LoadError(f"{path}: no such file")
    size = path.stat().st_size
    if size == 0:
        raise LoadError(f"{path}: empty file, not a GGUF file")
    try:
        with open(path, "rb") as fh:
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise LoadError(f"{path}: cannot be read ({one_line(e)})") from e
    try:  # a file that is no GGUF file is named so, whether or not the reader's package is there
        if size >= 4:  # shorter: read_header calls it truncated
            check_magic(bytes(buf[:4]))
    except ValueError as e:
        raise LoadError(f"{path}: not a readable GGUF file: {e}") from e
    try:
        import gguf.constants  # noqa: F401  (read_header and the type names need it)
    except ImportError as e:
        raise LoadError(f"{path}: reading GGUF files needs the 'gguf' package: pip install 'compscope[gguf]'") from e
    try:
        fields, infos = read_header(buf, size)
    except (EOFError, ValueError, UnicodeDecodeError, struct.error, OverflowError) as e:
        kind = "truncated GGUF file" if isinstance(e, EOFError) else "not a readable GGUF file"
        raise LoadError(f"{path}: {kind}: {one_line(e)}") from e
    for info in infos:
        if info.nbytes is not None and info.offset + info.nbytes > size:
            raise LoadError(
                f"{path}: truncated GGUF file: tensor '{info.name}' needs bytes {info.offset}..{info.offset + info.nbytes}, "
                f"the file has {size}"
            )
    return fields, infos, buf


def shards(path: Path, fields: dict) -> list[Path]:
    """The files of the split GGUF file that ``path`` (metadata ``fields``) is a shard of, in order
    (``split.no``, ``split.count``: llama.cpp's split metadata); ``[path]`` for a whole file. A shard
    named otherwise than llama.cpp names them is refused: the others could not be found."""
    count, no = fields.get("split.count"), fields.get("split.no")
    if count in (None, 1) and no in (None, 0):
        return [path]
    if not isinstance(count, int) or not isinstance(no, int) or not 0 <= no < count:
        raise LoadError(f"{path}: inconsistent split metadata (split.no={no!r}, split.count={count!r})")
    m = SHARD_NAME.match(path.name)
    if m is None or (int(m["no"]), int(m["count"])) != (no + 1, count):
        raise LoadError(f"{path}: shard {no + 1} of a GGUF file split in {count}, named otherwise than llama.cpp "
                        f"names shards (NAME-{no + 1:05d}-of-{count:05d}.gguf), so the other shards cannot be found: "
                        "give the shards their names, or merge them into one file (llama-gguf-split --merge)")
    return [path.with_name(f"{m['stem']}-{k:05d}-of-{count:05d}.gguf") for k in range(1, count + 1)]


def architecture(path: str | Path) -> object:
    """The ``general.architecture`` a GGUF file's header states (None where it states none); only the
    header is read."""
    return open_file(Path(path))[0].get("general.architecture")


def shard_set(files: list[Path]) -> bool:
    """Whether ``files`` (sorted) are by their names every shard of one split GGUF file."""
    names = [SHARD_NAME.match(f.name) for f in files]
    if not all(names):
        return False
    count = len(files)
    return all((m["stem"], int(m["no"]), int(m["count"])) == (names[0]["stem"], k, count)
               for k, m in enumerate(names, start=1))


def open_shards(path: Path) -> tuple[list[Path], dict, list[tuple]]:
    """``(its files, metadata, [(tensor info, mapped bytes, file), ...])`` of the GGUF file at
    ``path``, whole or split (any of its shards given: every shard is read, the metadata is the
    first's); a missing shard, a shard whose split metadata disagrees with its name, a tensor in two
    shards or a tensor count other than the first shard's ``split.tensors.count`` is refused."""
    fields, infos, buf = open_file(path)
    files = shards(path, fields)
    if len(files) == 1:
        return files, fields, [(info, buf, path) for info in infos]
    n, located, where = len(files), [], {}
    for k, shard in enumerate(files):
        if shard != path and not shard.is_file():
            raise LoadError(f"{shard}: no such file: {path.name} is one of {n} shards of a split GGUF file, and "
                            "every shard must lie beside it")
        f, inf, b = (fields, infos, buf) if shard == path else open_file(shard)
        said = (f.get("split.no", 0), f.get("split.count", 1))
        if said != (k, n):
            says = (f"shard {said[0] + 1} of {said[1]}" if all(isinstance(x, int) for x in said)
                    else f"split.no={said[0]!r}, split.count={said[1]!r}")
            raise LoadError(f"{shard}: its split metadata says {says}, its name shard {k + 1} of {n}")
        if k == 0:
            first = f
        for info in inf:
            if info.name in where:
                raise LoadError(f"{shard}: tensor '{info.name}' is also in {where[info.name]}")
            where[info.name] = shard
            located.append((info, b, shard))
    total = first.get("split.tensors.count")
    if total is not None and total != len(located):
        raise LoadError(f"{files[0]}: the split GGUF file says it holds {total} tensors, and its {n} shards hold "
                        f"{len(located)}")
    return files, first, located
