"""Tools on top of the runtime: inspection of every compilation stage (imports Triton and torch)."""

from .inspect_kernel import STAGES, Inspection, inspect_kernel

__all__ = ["STAGES", "Inspection", "inspect_kernel"]
