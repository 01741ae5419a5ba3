"""A progress bar for long work, silent for short work (nothing shows before ``delay`` seconds).

On a terminal it is a tqdm bar (when tqdm is installed). Where stderr is not a terminal (a log
file, CI) a bar's redraws would be hundreds of lines, so it writes one line per tenth of the
work and one per named step (``set_postfix(step=...)``), then a last line at the end: at most a
dozen lines plus the steps, ending at the total. :func:`silenced` turns every bar off for a while
(a command's ``--quiet``).
"""

from __future__ import annotations

import contextlib
import sys
import time

#: while above 0, every bar is off (:func:`silenced`)
_SILENCED = 0


class _Bar:
    def __init__(self, total: int, desc: str, enabled: bool, delay: float = 2.0) -> None:
        enabled = enabled and not _SILENCED
        self.total, self.desc, self.enabled, self.delay = total, desc, enabled, delay
        self.n, self.start, self._tqdm, self._postfix = 0, time.monotonic(), None, {}
        self._lines = None if _is_terminal() else -1  # line mode: the last tenth written (-1: none yet)
        if self._lines is None and enabled:  # a terminal: tqdm counts from 0 and shows itself after the delay
            try:
                from tqdm import tqdm

                self._tqdm = tqdm(total=total, desc=desc, file=sys.stderr, leave=False, delay=delay)
            except ImportError:
                self.enabled = False

    def update(self, n: int = 1) -> None:
        self.n += n
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.update(n)
        elif self._lines is not None and time.monotonic() - self.start > self.delay:
            tenth = 10 * self.n // max(1, self.total)
            if tenth > self._lines:
                self._lines = tenth
                self._line()

    def set_postfix(self, **values) -> None:
        step_changed = values.get("step") != self._postfix.get("step")
        self._postfix = values
        if self._tqdm is not None:
            self._tqdm.set_postfix(**values)
        elif self._lines is not None and self.enabled and step_changed and "step" in values \
                and time.monotonic() - self.start > self.delay:
            self._line()

    def _line(self) -> None:
        extra = "".join(f" {k}={v}" for k, v in self._postfix.items())
        pct = 100 * self.n // max(1, self.total)
        print(f"{self.desc}: {self.n}/{self.total} ({pct}%){extra}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.n = self.n
            self._tqdm.refresh()  # the last count drawn, not the last one throttled redraws caught
            self._tqdm.close()
        elif self._lines is not None and self._lines >= 0 and self.enabled:
            print(f"{self.desc}: {self.n}/{self.total} done in {time.monotonic() - self.start:.0f} s", file=sys.stderr, flush=True)


def _is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def progress_bar(total: int, desc: str, enabled: bool = True) -> _Bar:
    """A bar that appears only after ``delay`` seconds, so short calls print nothing."""
    return _Bar(total, desc, enabled)


@contextlib.contextmanager
def silenced():
    """No bar shows inside the block, whatever its caller's ``progress`` (``--quiet``)."""
    global _SILENCED
    _SILENCED += 1
    try:
        yield
    finally:
        _SILENCED -= 1
