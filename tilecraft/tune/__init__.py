"""`tilecraft.tune` (cuTile's `cuda.tile.tune`): find a kernel's fastest configuration by timing
each one (`exhaustive_search`), with the L2 cache flushed between CUDA timings."""

from .search import Measurement, TuningResult, exhaustive_search

__all__ = ["exhaustive_search", "TuningResult", "Measurement"]
