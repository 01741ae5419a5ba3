"""Score tables: tidy rows ``measure, metric, kind, src_layer, src_head, dst_layer, dst_head,
value`` with a dense view, written to and read from CSV and Parquet."""

from ..registry import submodules as _submodules

__getattr__ = _submodules(__name__)
