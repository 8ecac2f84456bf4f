"""`tilecraft.tune` (cuTile's `cuda.tile.tune`): find a kernel's fastest configuration by timing
each one (`exhaustive_search`), with the L2 cache flushed between CUDA timings; tilecraft adds a
progress bar and a persistent cache of results (tune/progress.py, tune/cache.py)."""

from .result import Measurement, TuningResult
from .search import exhaustive_search

__all__ = ["exhaustive_search", "TuningResult", "Measurement"]
