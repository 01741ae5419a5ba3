"""The sweep's Parquet dataset: ``OUT/model=<name>/step=<step>/part-<task key>.parquet``, one file
per task, written to a hidden temporary name and renamed into place (atomic on one file system):
a part is either absent or complete, a rerun of a task replaces its own file (no duplicate rows),
and readers skip the hidden leftovers of a worker killed mid-write."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from ..errors import LoadError
from .tasks import Task


def _safe(name: str) -> str:
    return re.sub(r"[^\w.@-]", "_", name)


def part_path(out: Path, task: Task) -> Path:
    return Path(out) / f"model={_safe(task.model)}" / f"step={task.step}" / f"part-{task.key()}.parquet"


def is_done(out: Path, task: Task) -> bool:
    return part_path(out, task).is_file()


def write_part(out: Path, task: Task, df) -> Path:
    """Write ``df`` as ``task``'s part, atomically."""
    path = part_path(out, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{uuid.uuid4().hex}.parquet"
    df.drop(columns=[c for c in ("model", "step") if c in df]).to_parquet(tmp, index=False)
    os.replace(tmp, path)
    return path


def read_dataset(out: str | Path):
    """Every finished part of the dataset in ``out`` as one pandas frame (``model`` and ``step``
    columns from the partitions). Parts of different jobs have different columns: the frame has
    all of them (missing values where a part lacks one), not only those of the first part read."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    out = Path(out)
    if not out.is_dir():
        raise LoadError(f"{out}: no sweep dataset here")
    files = sorted(str(p) for p in out.glob("model=*/step=*/part-*.parquet"))
    if not files:  # nothing finished yet: the partition columns all the same
        return pd.DataFrame({"model": pd.Series(dtype=str), "step": pd.Series(dtype="int64")})
    inferred = ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(out)).schema
    schemas = [inferred] + [pq.read_schema(f) for f in files]
    try:
        schema = pa.unify_schemas(schemas, promote_options="permissive")  # pyarrow >= 14: int and float columns meet
    except TypeError:
        schema = pa.unify_schemas(schemas)
    return ds.dataset(files, schema=schema, format="parquet", partitioning="hive",
                      partition_base_dir=str(out)).to_table().to_pandas()
