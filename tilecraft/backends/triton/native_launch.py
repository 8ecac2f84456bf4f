"""A small C launcher for the fast path: one `cuLaunchKernel` call per launch, its arguments
packed from a type string made once per compiled kernel.

Triton's own launcher (what `CompiledKernel.run` calls) parses a long format string per call,
unpacks its metadata tuple, makes the CUDA context current if none is, releases the GIL and
launches through `cuLaunchKernelEx`: on the H200 host that is 4.0 us of a cached launch's 8.5
(`benchmarks/results/launch-profile-h200-2026-12-01-b.txt`). This launcher takes the arguments
as a vector call (no argument tuple) and packs each by one letter of `types`. It covers what the
fast path launches: one CTA per program, no cooperative grid or dependent launch, no scratch
memory, and scalar parameters of integer, float32 or float64 type; `launcher_for` returns None
for anything else (or when no C compiler is there), and the caller keeps Triton's launcher.

It is built once per machine through Triton's module builder and cache, with Triton's CUDA
header and library settings.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

_TYPES = {"i1": "b", "i8": "b", "u1": "B", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I",
          "i64": "q", "u64": "Q", "fp32": "f", "f32": "f", "fp64": "d", "constexpr": "x"}
"""Triton signature type -> packing letter ('p': a pointer given as an int, 'x': not passed)."""

_MAX_PARAMS = 256

_SOURCE = r"""
#include "cuda.h"
#include <stdint.h>
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_PARAMS %(max_params)d

typedef union { uint64_t u64; int64_t i64; double f64; float f32; int32_t i32; uint32_t u32;
                int16_t i16; uint16_t u16; int8_t i8; uint8_t u8; } Slot;

/* launch(grid_x, grid_y, grid_z, stream, function, threads, shared_bytes, types, *args) -> bool
   False: no CUDA context is current in this thread (the caller launches another way). */
static PyObject* launch(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 8 || !PyBytes_Check(args[7])) {
    PyErr_SetString(PyExc_TypeError, "launch(gx, gy, gz, stream, function, threads, shared, types, *args)");
    return NULL;
  }
  const char* types = PyBytes_AS_STRING(args[7]);
  Py_ssize_t ntypes = PyBytes_GET_SIZE(args[7]);
  if (nargs - 8 != ntypes || ntypes + 2 > MAX_PARAMS) {
    PyErr_Format(PyExc_TypeError, "launch: %%zd kernel arguments for %%zd types", nargs - 8, ntypes);
    return NULL;
  }
  CUcontext ctx = NULL;
  if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == NULL) Py_RETURN_FALSE;
  unsigned int grid[3], threads, shared;
  for (int i = 0; i < 3; ++i) grid[i] = (unsigned int)PyLong_AsUnsignedLong(args[i]);
  CUstream stream = (CUstream)(uintptr_t)PyLong_AsUnsignedLongLong(args[3]);
  CUfunction function = (CUfunction)(uintptr_t)PyLong_AsUnsignedLongLong(args[4]);
  threads = (unsigned int)PyLong_AsUnsignedLong(args[5]);
  shared = (unsigned int)PyLong_AsUnsignedLong(args[6]);
  Slot slots[MAX_PARAMS];
  void* params[MAX_PARAMS];
  int n = 0;
  for (Py_ssize_t i = 0; i < ntypes; ++i) {
    PyObject* a = args[8 + i];
    Slot* s = &slots[n];
    switch (types[i]) {
      case 'x': continue;
      case 'p': case 'Q': s->u64 = PyLong_AsUnsignedLongLong(a); break;
      case 'q': s->i64 = PyLong_AsLongLong(a); break;
      case 'i': s->i32 = (int32_t)PyLong_AsLong(a); break;
      case 'I': s->u32 = (uint32_t)PyLong_AsUnsignedLong(a); break;
      case 'h': s->i16 = (int16_t)PyLong_AsLong(a); break;
      case 'H': s->u16 = (uint16_t)PyLong_AsUnsignedLong(a); break;
      case 'b': s->i8 = (int8_t)PyLong_AsLong(a); break;
      case 'B': s->u8 = (uint8_t)PyLong_AsUnsignedLong(a); break;
      case 'f': s->f32 = (float)PyFloat_AsDouble(a); break;
      case 'd': s->f64 = PyFloat_AsDouble(a); break;
      default:
        PyErr_Format(PyExc_TypeError, "launch: unknown argument type '%%c'", types[i]);
        return NULL;
    }
    params[n] = s;
    ++n;
  }
  slots[n].u64 = 0; params[n] = &slots[n]; ++n;  /* global scratch: none */
  slots[n].u64 = 0; params[n] = &slots[n]; ++n;  /* profile scratch: none */
  if (PyErr_Occurred()) return NULL;
  if ((uint64_t)grid[0] * grid[1] * grid[2] == 0) Py_RETURN_TRUE;
  CUresult err = cuLaunchKernel(function, grid[0], grid[1], grid[2], threads, 1, 1, shared, stream, params, NULL);
  if (err != CUDA_SUCCESS) {
    const char* what = NULL;
    cuGetErrorString(err, &what);
    PyErr_Format(PyExc_RuntimeError, "CUDA error from cuLaunchKernel: %%s", what ? what : "unknown");
    return NULL;
  }
  Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
  {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "Launch a loaded CUDA kernel."},
  {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tilecraft_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tilecraft_launch(void) { return PyModule_Create(&module); }
""" % {"max_params": _MAX_PARAMS}


@functools.cache
def _module() -> Any:
    """The built launcher module, or None when it cannot be built here."""
    try:
        from triton.backends.nvidia import driver
        from triton.runtime.build import compile_module_from_src
        return compile_module_from_src(_SOURCE, "tilecraft_launch", library_dirs=driver.library_dirs(),
                                       include_dirs=driver.include_dirs, libraries=driver.libraries)
    except Exception:  # no compiler, headers or libcuda: Triton's launcher stays
        return None


def argument_types(compiled: Any) -> bytes | None:
    """The packing letters of `compiled`'s parameters, or None when this launcher cannot launch
    it (see the module's docstring)."""
    meta = compiled.metadata
    if (getattr(meta, "num_ctas", 1) != 1 or meta.launch_cooperative_grid or meta.launch_pdl
            or meta.global_scratch_size or meta.profile_scratch_size or getattr(meta, "tensordesc_meta", None)):
        return None
    letters = []
    for ty in compiled.src.signature.values():
        letter = "p" if isinstance(ty, str) and ty.startswith("*") else _TYPES.get(ty)
        if letter is None:
            return None
        letters.append(letter)
    return "".join(letters).encode()


def launcher_for(compiled: Any) -> tuple[Callable[..., bool], tuple[Any, ...]] | None:
    """(launch, head) for launching `compiled` (a loaded Triton CompiledKernel) as
    `launch(grid_x, grid_y, grid_z, stream, *head, *args)`, args as its Triton arguments with
    arrays as addresses; the call returns False when no CUDA context is current. None when this
    launcher cannot launch `compiled`."""
    types = argument_types(compiled)
    native = _module() if types is not None else None
    if native is None:
        return None
    return native.launch, (compiled.function, 32 * compiled.metadata.num_warps, compiled.metadata.shared, types)
