"""A progress bar for long work (tqdm when installed and the work is long; silent otherwise)."""

from __future__ import annotations

import sys
import time


class _Bar:
    def __init__(self, total: int, desc: str, enabled: bool, delay: float = 2.0) -> None:
        self.total, self.desc, self.enabled, self.delay = total, desc, enabled, delay
        self.n, self.start, self._tqdm, self._postfix = 0, time.monotonic(), None, {}

    def update(self, n: int = 1) -> None:
        self.n += n
        if not self.enabled:
            return
        if self._tqdm is None and time.monotonic() - self.start > self.delay:
            try:
                from tqdm import tqdm

                self._tqdm = tqdm(total=self.total, desc=self.desc, initial=self.n, file=sys.stderr, leave=False)
                if self._postfix:
                    self._tqdm.set_postfix(**self._postfix)
            except ImportError:
                self.enabled = False
                return
        elif self._tqdm is not None:
            self._tqdm.update(n)

    def set_postfix(self, **values) -> None:
        self._postfix = values
        if self._tqdm is not None:
            self._tqdm.set_postfix(**values)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()


def progress_bar(total: int, desc: str, enabled: bool = True) -> _Bar:
    """A bar that appears only after ``delay`` seconds, so short calls print nothing."""
    return _Bar(total, desc, enabled)
