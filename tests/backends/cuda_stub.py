"""tilecraft's C launcher (backends/triton/native_launch.py) built on a machine without a GPU: its
four CUDA driver calls are renamed at compile time to a stand-in library built here, which
records what `cuLaunchKernel` or `cuLaunchKernelEx` was given (grid, threads, shared memory,
stream, function, each packed parameter, and whether it was a programmatic dependent launch)
instead of launching. Used by the CPU tests of the launcher's packing and of its quick path's
refusals, and by benchmarks/quick_launch_cpu.py to time it.

Renaming (not a library that is also called libcuda) keeps the stand-in apart from a real
driver the process may have loaded; the build goes to its own Triton cache directory, so the
real launcher's cached module is never this one.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CALLS = ("cuCtxGetCurrent", "cuLaunchKernel", "cuLaunchKernelEx", "cuGetErrorString")

_STUB = r"""
#include "cuda.h"
#include <stdint.h>
#include <string.h>

#define MAX_RECORDED 64
static uint64_t context = %(context)d;
static int error = 0, launches = 0, recorded = 0, dependent = 0;
static unsigned int grid[3], block[3], shared;
static uint64_t stream, function, params[MAX_RECORDED];

CUresult tc_stub_cuCtxGetCurrent(CUcontext* ctx) { *ctx = (CUcontext)(uintptr_t)context; return CUDA_SUCCESS; }

CUresult tc_stub_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void** kernel_params,
                                void** extra) {
  if (error) return (CUresult)error;
  ++launches;
  grid[0] = gx; grid[1] = gy; grid[2] = gz; block[0] = bx; block[1] = by; block[2] = bz; shared = smem;
  stream = (uint64_t)(uintptr_t)s; function = (uint64_t)(uintptr_t)f;
  for (int i = 0; i < recorded && i < MAX_RECORDED; ++i) memcpy(&params[i], kernel_params[i], 8);
  dependent = 0;
  return CUDA_SUCCESS;
}

/* A launch with attributes: recorded as cuLaunchKernel's, dependent where it asks for
   programmatic stream serialization. */
CUresult tc_stub_cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** kernel_params, void** extra) {
  CUresult r = tc_stub_cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                                      c->blockDimZ, c->sharedMemBytes, c->hStream, kernel_params, extra);
  for (unsigned int i = 0; r == CUDA_SUCCESS && i < c->numAttrs; ++i)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      dependent = c->attrs[i].value.programmaticStreamSerializationAllowed;
  return r;
}

CUresult tc_stub_cuGetErrorString(CUresult e, const char** what) { *what = "stub error"; return CUDA_SUCCESS; }

/* test controls: the current context (0: none), the error cuLaunchKernel returns, how many params to record */
void tc_stub_set(uint64_t current, int launch_error, int record) { context = current; error = launch_error; recorded = record; }
int tc_stub_launches(void) { return launches; }
void tc_stub_last(unsigned int* dims, uint64_t* handles, uint64_t* out) {
  for (int i = 0; i < 3; ++i) { dims[i] = grid[i]; dims[3 + i] = block[i]; }
  dims[6] = shared; dims[7] = dependent; handles[0] = stream; handles[1] = function;
  memcpy(out, params, sizeof(params));
}
"""


CONTEXT = 0x1000
"""The stand-in's current CUDA context unless a test sets another (`StubDriver.set`)."""

_FORMATS = {"b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I", "q": "q", "Q": "Q", "p": "Q", "f": "f", "d": "d"}
"""The launcher's packing letters as `struct` formats."""


@dataclass(frozen=True)
class Launch:
    """One recorded launch; `values`: each parameter read as its letter says (the two scratch
    pointers last); `dependent`: a programmatic dependent launch (through `cuLaunchKernelEx`)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    stream: int
    function: int
    values: tuple[Any, ...]
    dependent: bool = False


class StubDriver:
    """The stand-in driver of a launcher module built by `build`."""

    def __init__(self, library: Path) -> None:
        self._lib = ctypes.CDLL(str(library))
        self._lib.tc_stub_set.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_int]
        self.set()

    def set(self, context: bool | int = True, error: int = 0, types: bytes = b"") -> None:
        """The current CUDA context (True: `CONTEXT`, False: none, an int: that one, as
        another device's), what cuLaunchKernel returns, and the packing letters of the kernel
        launched next (what `last` reads; 'x' is not passed)."""
        self._letters = [letter for letter in types.decode() if letter != "x"] + ["p", "p"]
        current = CONTEXT if context is True else int(context)
        self._lib.tc_stub_set(current, error, len(self._letters) if types else 0)

    @property
    def launches(self) -> int:
        return self._lib.tc_stub_launches()

    def last(self) -> Launch:
        """The last launch."""
        dims, handles, out = (ctypes.c_uint * 8)(), (ctypes.c_uint64 * 2)(), (ctypes.c_uint64 * 64)()
        self._lib.tc_stub_last(dims, handles, out)
        values = tuple(struct.unpack_from("<" + _FORMATS[letter], int(raw).to_bytes(8, "little"))[0]
                       for letter, raw in zip(self._letters, out))
        return Launch(tuple(dims[:3]), tuple(dims[3:6]), dims[6], handles[0], handles[1], values,  # type: ignore[arg-type]
                      bool(dims[7]))


def missing() -> str | None:
    """Why the launcher cannot be built here (no C compiler, Python headers or Triton), or None."""
    if shutil.which("gcc") is None and shutil.which("clang") is None and not os.environ.get("CC"):
        return "no C compiler"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers"
    try:
        from triton.backends.nvidia import driver  # noqa: F401
    except ImportError:
        return "no Triton"
    return None


_BUILT: list[tuple[Any, StubDriver]] = []


def build(directory: Path) -> tuple[Any, StubDriver]:
    """(launcher module, its stand-in driver), built in `directory` (callers skip on `missing()`)
    the first time in this process and the same pair after: a second stand-in library would be
    a second copy, and the second module would still call the first (the loader reuses the
    loaded library of the same name), so its driver would record nothing."""
    if _BUILT:
        return _BUILT[0]
    from triton.backends.nvidia import driver
    from triton.runtime.build import compile_module_from_src

    from tilecraft.backends.triton import native_launch
    directory.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    stub = directory / "stub.c"
    stub.write_text(_STUB % {"context": CONTEXT})
    library = directory / "libtc_stub_cuda.so"
    subprocess.run([cc, str(stub), "-O2", "-shared", "-fPIC", f"-I{driver.include_dirs[0]}", "-o", str(library)],
                   check=True, capture_output=True)
    name = "tilecraft_launch_stub"
    renames = [f"-D{call}=tc_stub_{call}" for call in _CALLS]
    before = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(directory / "cache")
    try:
        module = compile_module_from_src(native_launch.source(name), name, library_dirs=[str(directory)],
                                         include_dirs=driver.include_dirs, libraries=["tc_stub_cuda"],
                                         ccflags=[*renames, f"-Wl,-rpath,{directory}"])
    finally:
        if before is None:
            del os.environ["TRITON_CACHE_DIR"]
        else:
            os.environ["TRITON_CACHE_DIR"] = before
    _BUILT.append((module, StubDriver(library)))
    return _BUILT[0]


class _Meta:
    num_ctas, num_warps, shared = 1, 4, 0
    launch_cooperative_grid = launch_pdl = False
    global_scratch_size = profile_scratch_size = 0
    tensordesc_meta = None


class CompiledStandIn:
    """What `native_launch.launcher_for` reads of a loaded Triton kernel, for a Triton
    `signature` (a generated kernel's is `LoweredKernel.signature`)."""

    def __init__(self, signature: dict[str, str], function: int = 0x5EED, dependent: bool = False) -> None:
        self.metadata = _Meta()
        self.metadata.launch_pdl = dependent
        self.src = type("Src", (), {"signature": dict(signature)})()
        self.function = function


def direct_launcher(kernel: Any, args: tuple, module: Any, dependent: bool = False) -> Any:
    """A `DirectLauncher` of `kernel` specialized for `args` (torch CPU tensors), made on the CPU
    as `TritonKernel.specialize` makes it on a GPU, launching through `module`'s launcher
    (`build`): the generated kernel comes from a triton-interpret launch with `args` (which
    checks it runs), and its loaded form is a `CompiledStandIn` (`dependent`: compiled for a
    programmatic dependent launch)."""
    import tilecraft as ct
    from tilecraft.backends.triton import launching, native_launch
    ct.launch(None, (1,), kernel, args, backend="triton-interpret")
    compiled = next(v.compiled for k, v in kernel.variants.items() if k.backend == "triton-interpret")
    runtime = [a for a, p in zip(args, kernel.params) if not p.constant]
    flat = compiled._flatten(*runtime)
    dl = object.__new__(launching.DirectLauncher)
    dl._flatten = launching.baked_flatten(compiled.lowered, runtime, flat)
    dl._fused_args = launching.baked_exprs(compiled.lowered, runtime, flat, address="p{}")
    dl._slots = dl._grid = dl._small_grid = dl._small = dl._host = dl._host_variant = None
    dl._descriptors = False
    dl._expanded = None  # no host descriptors
    dl._launcher = native_launch.launcher_for(CompiledStandIn(compiled.lowered.signature, dependent=dependent), module)
    dl._native, dl._native_head = dl._launcher[:2]
    dl._call = dl._head = None  # Triton's launcher: none on the CPU
    return dl
