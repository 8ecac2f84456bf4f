"""The tuner's progress bar: one line on stderr, redrawn in place as configurations are timed.

    tuning matmul_kernel [##########----------] 12/24 configs  best 812.4 us  (3 failed)

Shown by default only where stderr is a terminal (a log file gets no carriage returns).
"""

from __future__ import annotations

import sys
from typing import IO

WIDTH = 20  # characters of the bar


class Progress:
    """A bar over `total` steps named `title`; does nothing when not `shown`."""

    def __init__(self, title: str, total: int, shown: bool | None = None, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.shown = shown if shown is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.title, self.total = title, total
        self._width = 0  # of the line drawn last, to blank what a shorter line leaves

    def update(self, done: int, best_us: float | None, failed: int, phase: str = "configs") -> None:
        """Redraw: `done` of the steps, the best mean so far, the failures so far."""
        if not self.shown:
            return
        filled = WIDTH * done // max(self.total, 1)
        line = f"{self.title} [{'#' * filled}{'-' * (WIDTH - filled)}] {done}/{self.total} {phase}"
        if best_us is not None:
            line += f"  best {best_us:.1f} us"
        if failed:
            line += f"  ({failed} failed)"
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def close(self) -> None:
        """End the bar's line (the next output starts on a line of its own)."""
        if self.shown and self._width:
            self.stream.write("\n")
            self.stream.flush()
