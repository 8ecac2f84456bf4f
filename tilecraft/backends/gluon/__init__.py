"""Gluon code generation: a warp-specialized schedule for kernels whose one loop streams tiles
through MMAs (flash attention, a matmul's K loop), on Hopper (sm_90).

Gluon is Triton 3.6's lower-level language: explicit layouts, shared memory, mbarriers, TMA
and warp specialization, none of which Triton's `tl` lets a program choose. The Triton backend
wraps a kernel that `passes.warp_specialize.streamed_loop` qualifies in a
`WarpSpecializedKernel`, which launches the Gluon variant on an sm_90 GPU and the Triton
kernel everywhere else (and wherever the variant cannot be built). There is no Gluon
interpreter: on a CPU the variant can be compiled for sm_90 (`GluonKernel.compile_for`), not run.
"""

from .kernel import GluonKernel, WarpSpecializedKernel
from .lower import GluonLowered, lower, worth_building

__all__ = ["GluonKernel", "GluonLowered", "WarpSpecializedKernel", "lower", "worth_building"]
