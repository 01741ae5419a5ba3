"""Sweeps: scores or validation over many models, checkpoints or revisions × options, as
independent tasks whose results stream into one Parquet dataset partitioned by model and step.

:mod:`.tasks` says what one task is and computes it; :mod:`.dataset` writes and reads the dataset
(one part file per task, written atomically, so a rerun skips finished parts and a retried task
leaves no duplicate rows); :mod:`.executors` runs the tasks, on this process (``local``) or on
Ray (a local instance by default, an existing cluster by address).
"""

from .dataset import read_dataset
from .executors import EXECUTORS, sweep
from .tasks import Task, expand_sources

__all__ = ["EXECUTORS", "Task", "expand_sources", "read_dataset", "sweep"]
