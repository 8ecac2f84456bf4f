"""What a search returns: each configuration's measurement, and the fastest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Measurement(Generic[T]):
    """One configuration's timing: mean, number of timed launches and the half-width of the 95%
    confidence interval of the mean, in microseconds."""

    config: T
    mean_us: float
    num_samples: int
    error_margin_us: float


@dataclass(frozen=True, kw_only=True)
class TuningResult(Generic[T]):
    """The fastest configuration, every measured one, and `(config, exception type, message)`
    for each configuration that failed."""

    best: Measurement[T]
    successes: Sequence[Measurement[T]]
    failures: Sequence[tuple[T, type[BaseException], str]]

    def summary(self, *, top_k: int = 10, bottom_k: int = 2) -> str:
        """A table of the fastest `top_k` and slowest `bottom_k` configurations and the failures."""
        ranked = sorted(self.successes, key=lambda m: m.mean_us)
        lines = [f"{len(self.successes)} succeeded, {len(self.failures)} failed"]
        hidden = range(top_k, len(ranked) - bottom_k)
        if len(hidden) == 1:  # one hidden line says no more than the configuration itself
            hidden = range(0)
        width = max(len(str(m.config)) for m in ranked)
        for i, m in enumerate(ranked):
            if i in hidden:
                if i == hidden.start:
                    lines.append(f"    ... {len(hidden)} more not shown")
                continue
            mark = "*" if m == self.best else " "
            lines.append(f"{mark} {str(m.config):<{width}}: {m.mean_us:.1f}±{m.error_margin_us:.1f} us "
                         f"({m.num_samples} samples)")
        if self.failures:
            lines.append(f"  {len(self.failures)} failed:")
            for config, exc_type, message in self.failures[:top_k]:
                first = message.split("\n", 1)[0]
                lines.append(f"    {config}: {exc_type.__name__}: {first[:57] + '...' if len(first) > 60 else first}")
            if len(self.failures) > top_k:
                lines.append(f"    ... {len(self.failures) - top_k} more not shown")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()
