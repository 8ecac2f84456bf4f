"""Launching a compiled kernel that takes host tensor descriptors, each descriptor encoded once
per array rather than at every launch.

Triton's launcher for such a kernel wraps its C launch function in Python
(`triton.backends.nvidia.driver.wrap_handle_tensordesc`): at every call it encodes each
`TensorDescriptor` argument into a 128-byte CUtensorMap (`cuTensorMapEncodeTiled`) followed by the
array's shape and strides, and the descriptor itself was validated when it was made. An encoding
depends only on the array's address, dtype, shape and strides and on the kernel's metadata for that
descriptor (block, swizzle, element type), so `ExpandedLauncher` keeps the encoded arguments per
(descriptor, address, dtype, shape, strides) and launches with them through tilecraft's C launcher
(native_launch.py, which takes each map as its 128 bytes), else through Triton's C function with
the leading arguments the wrapper passes. Where Triton's launcher is not shaped that way (another
Triton, global or profiling scratch), `ExpandedLauncher.of` returns None and the caller keeps
Triton's path.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

from . import native_launch

CACHE_LIMIT = 1024
"""Encoded descriptors kept per launcher (about half a KiB each); past this the cache starts over
(arrays that change at every launch then cost what Triton's path costs, plus a dict lookup). 64
were too few for a kernel whose arrays rotate through more addresses, as a matmul shared by a
model's layers: each new address costs the Gluon variant's launch about 9 us of host time
(benchmarks/results/fresh-output-probe-h200-2026-12-03-b.json, its `rotated` rows)."""


def encode(descriptor: Any, meta: Any) -> list[Any]:
    """Triton's expansion of one host descriptor argument (CUtensorMap, shape..., strides...)."""
    from triton.backends.nvidia.driver import make_tensordesc_arg
    return make_tensordesc_arg(descriptor, meta)


def _c_launch(run: Any) -> Callable[..., Any] | None:
    """The C launch function under Triton's descriptor wrapper: the wrapper's closure holds it as
    `launcher` (Triton 3.6); None for anything else."""
    wrapper = getattr(run, "launch", None)
    names = getattr(getattr(wrapper, "__code__", None), "co_freevars", ())
    if "launcher" not in names or not wrapper.__closure__:
        return None
    return wrapper.__closure__[names.index("launcher")].cell_contents


class _Encoded(NamedTuple):
    """One descriptor's arguments: as Triton's C function takes them, and as tilecraft's does."""

    triton: tuple
    native: tuple | None


class ExpandedLauncher:
    """`launch(grid, stream, head, arrays, tail)` runs `compiled` with arguments `head`, then a
    descriptor of each of `arrays` (made by `make[i]` on a cache miss), then `tail`; through
    `native` (tilecraft's C launcher, which declines where its CUDA context is not current) when
    there is one, else Triton's C function `c_launch`."""

    def __init__(self, compiled: Any, c_launch: Callable[..., Any], metas: Sequence[Any],
                 make: Sequence[Callable[[Any], Any]], native: native_launch.Native | None = None) -> None:
        run = compiled.run
        self._c_launch = c_launch
        self._lead = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
                      compiled.packed_metadata, None, None, None)
        self._metas = list(metas)
        self._make = list(make)
        self._native = native
        self._pointers: list[int] | None = None  # positions in `head` of arrays (the native launch takes addresses)
        self._encoded: dict[tuple, _Encoded] = {}

    @classmethod
    def of(cls, compiled: Any, make: Sequence[Callable[[Any], Any]]) -> "ExpandedLauncher | None":
        """The launcher for `compiled`, whose descriptor parameters `make` makes (in order); None
        where Triton's own path must run it."""
        run = getattr(compiled, "run", None)
        c_launch = _c_launch(run)
        metas = getattr(getattr(compiled, "metadata", None), "tensordesc_meta", None)
        if c_launch is None or not metas or len(metas) != len(make) or any(m is None for m in metas) \
                or run.global_scratch_size or run.profile_scratch_size:
            return None
        return cls(compiled, c_launch, metas, make, native_launch.launcher_for(compiled, descriptors=True))

    def launch(self, grid: tuple[int, int, int], stream: int, head: Sequence[Any], arrays: Sequence[Any],
               tail: Sequence[Any] = ()) -> None:
        encoded = [self._descriptor(i, array) for i, array in enumerate(arrays)]
        native = self._native
        if native is not None:
            if self._pointers is None:
                self._pointers = [i for i, x in enumerate(head) if hasattr(x, "data_ptr")]
            if self._pointers:
                head = list(head)
                for i in self._pointers:
                    head[i] = head[i].data_ptr()
            if native.launch(grid[0], grid[1], grid[2], stream, *native.head, *head,
                             *(x for e in encoded for x in e.native), *tail):
                return
        self._c_launch(grid[0], grid[1], grid[2], stream, *self._lead, *head, *(x for e in encoded for x in e.triton),
                       *tail)

    @property
    def native(self) -> native_launch.Native | None:
        """tilecraft's C launcher of the kernel, where it has one."""
        return self._native

    def expansion(self, i: int, array: Any) -> tuple:
        """Descriptor i of `array` as tilecraft's C launcher takes it: its map's 128 bytes, then
        the shape and strides Triton's launcher passes (only with `native`)."""
        return self._descriptor(i, array).native

    def map_bytes(self, i: int, array: Any) -> bytes:
        """The map's 128 bytes of descriptor i of `array` (only with `native`)."""
        return self._descriptor(i, array).native[0]

    def _descriptor(self, i: int, array: Any) -> _Encoded:
        """Descriptor i of `array`, encoded (once per address, dtype, shape and strides)."""
        key = (i, array.data_ptr(), array.dtype, array.shape, array.stride())
        hit = self._encoded.get(key)
        if hit is None:
            if len(self._encoded) >= CACHE_LIMIT:
                self._encoded.clear()
            triton = tuple(encode(self._make[i](array), self._metas[i]))
            native = None if self._native is None else (self._native.module.map_bytes(triton[0]), *triton[1:])
            hit = self._encoded[key] = _Encoded(triton, native)
        return hit
