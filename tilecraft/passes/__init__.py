"""IR → IR passes, run in order by `optimize` (one pass per module), and analyses backends use
(`ranges`)."""

from ..ir import Function, verify
from .contract import contract_multiply_adds
from .dce import eliminate_dead_code
from .squares import square_powers

PIPELINE = (square_powers, contract_multiply_adds, eliminate_dead_code)


def optimize(fn: Function) -> Function:
    """Run every pass of PIPELINE, verifying the IR after each."""
    for p in PIPELINE:
        fn = verify(p(fn))
    return fn


__all__ = ["optimize", "PIPELINE"]
