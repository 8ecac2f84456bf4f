"""Tile kernels called from JAX: cuTile's `cuda.tile.jax`.

    from tilecraft.jax import InputOutput, OutputPlaceholder, cutile_call

    @jax.jit
    def scale(x):
        return cutile_call((ct.cdiv(x.shape[0], 128),), scale_kernel, (x, OutputPlaceholder(x.shape, x.dtype), 2.0))

On a GPU the kernel's generated Triton code is launched by jax_triton as the XLA custom call
`cutile_launch` (gpu.py); elsewhere it runs on the host through `jax.pure_callback` (host.py).
Needs JAX (`pip install "jax>=0.8.2"`); on a GPU also jax_triton (`pip install jax-triton`).
"""

from ..environment import require

require("jax", "tilecraft.jax")

from . import call as _jax  # noqa: E402,F401  (cuTile's name for its implementation module, which holds _COMPILE_CACHE)
from .call import InputOutput, OutputPlaceholder, cutile_call  # noqa: E402
from .gpu import register_target  # noqa: E402

register_target()  # so that modules exported with cutile_launch calls run in this process

__all__ = ["cutile_call", "OutputPlaceholder", "InputOutput"]
