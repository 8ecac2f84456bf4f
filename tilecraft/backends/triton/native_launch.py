"""A small C launcher for the fast path: one `cuLaunchKernel` call per launch, its arguments
packed from a type string made once per compiled kernel.

Triton's own launcher (what `CompiledKernel.run` calls) parses a long format string per call,
unpacks its metadata tuple, makes the CUDA context current if none is, releases the GIL and
launches through `cuLaunchKernelEx`: on the H200 host that is 4.0 us of a cached launch's 8.5
(`benchmarks/results/launch-profile-h200-2026-12-01-b.txt`). This launcher takes the arguments
as a vector call (no argument tuple) and packs each by one letter of `types`. It covers what the
fast path launches: one CTA per program, no cooperative grid, no scratch memory, programmatic
dependent launches (a kernel compiled with Triton's `launch_pdl`, split-K's FINISH: through
`cuLaunchKernelEx` with that one attribute), scalar parameters of integer, float32 or float64
type, and (asked for: `descriptors`) host tensor descriptors as Triton's launcher expands them;
`launcher_for` returns None for anything else (or when no C compiler is there), and the caller
keeps Triton's launcher.
It launches only where the CUDA context its kernel was loaded in is current, and declines
(returns False) where another device's is (runtime/devices.py: `ct.launch` then makes the
arrays' device current): comparing the context it reads anyway costs nothing.

The runtime's quick path (`fastpath.quick_launcher`: a cached launch's checks that its arguments
have the specialization of a fast-path entry, then its launch) runs here too, as one C object
per specialization made by `quick` from the checks as data (`QuickChecks`). On the CPU with a
stand-in driver (benchmarks/quick_launch_cpu.py, a 3-tensor launch) that takes a quick launch
from 1.40 to 1.07 us, most of it then torch's own time to read the tensors' items through
Python (0.8 us). Once the C++ tensor reader (tensor_reader.py) is built and handed to the module
(`use_reader`), those items come from torch's C++ tensors instead: 0.17 us in all (1.25 through
Python since the negative bit is checked too).

It is built once per machine through Triton's module builder and cache, with Triton's CUDA
header and library settings.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, NamedTuple, Sequence

from ..base import CHECK_ALIGN, CHECK_CALL, CHECK_PATH, CHECK_RANGE, CHECK_VALUE, QuickChecks
from . import tensor_reader

_TYPES = {"i1": "b", "i8": "b", "u1": "B", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I",
          "i64": "q", "u64": "Q", "fp32": "f", "f32": "f", "fp64": "d", "constexpr": "x"}
"""Triton signature type -> packing letter ('p': a pointer given as an int, 'x': not passed)."""

_MAX_PARAMS = 256

Grid = tuple[int, int, int]

_DESCRIPTOR_BLOCK = re.compile(r"tensordesc<[^[>]*\[([^]]*)\]")
"""A descriptor parameter's Triton type: group 1 is its block shape (as Triton's launcher reads it)."""

_FROM_ARG, _FROM_ADDRESS, _FROM_CONSTANT, _FROM_MAP = range(4)
"""Where a quick launcher's parameter comes from: an argument, an address, a constant, or the
tensor map of a descriptor of an array (kept per address: `quick`'s `encode`)."""

_SOURCE = r"""
#include "cuda.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_PARAMS %(max_params)d
#define MAX_MAPS 16
#define MAX_STEPS 8
#define MAX_TENSORS 32
#define MAP_WAYS 4
%(tensor_header)s
enum { CHECK_VALUE = %(value)d, CHECK_RANGE = %(range)d, CHECK_CALL = %(call)d, CHECK_PATH = %(path)d,
       CHECK_ALIGN = %(align)d };
enum { FROM_ARG = %(from_arg)d, FROM_ADDRESS = %(from_address)d, FROM_CONSTANT = %(from_constant)d,
       FROM_MAP = %(from_map)d };

typedef union { uint64_t u64; int64_t i64; double f64; float f32; int32_t i32; uint32_t u32;
                int16_t i16; uint16_t u16; int8_t i8; uint8_t u8; } Slot;

static const char OUT_OF_RANGE[] = "launch: an argument out of the range of its parameter's type";

/* `a` as a long in [lo, hi]; out of it, OverflowError set (as Triton's launcher raises). */
static long in_range(PyObject* a, long lo, long hi) {
  long v = PyLong_AsLong(a);
  if ((v < lo || v > hi) && !PyErr_Occurred()) PyErr_SetString(PyExc_OverflowError, OUT_OF_RANGE);
  return v;
}

/* `a` as an unsigned long in [0, hi]; out of it, OverflowError set. */
static unsigned long in_urange(PyObject* a, unsigned long hi) {
  unsigned long v = PyLong_AsUnsignedLong(a);
  if (v > hi && !PyErr_Occurred()) PyErr_SetString(PyExc_OverflowError, OUT_OF_RANGE);
  return v;
}

/* Packs `a` into `s` by its letter: 1, or 0 for 'x' (not passed), -1 for an unknown letter (an
   exception set). A failed conversion (also a value its type does not hold: never truncated)
   leaves its exception set for the caller's PyErr_Occurred. */
static int pack(char type, PyObject* a, Slot* s) {
  switch (type) {
    case 'x': return 0;
    case 'p': case 'Q': s->u64 = PyLong_AsUnsignedLongLong(a); return 1;
    case 'q': s->i64 = PyLong_AsLongLong(a); return 1;
    case 'i': s->i32 = (int32_t)in_range(a, INT32_MIN, INT32_MAX); return 1;
    case 'I': s->u32 = (uint32_t)in_urange(a, UINT32_MAX); return 1;
    case 'h': s->i16 = (int16_t)in_range(a, INT16_MIN, INT16_MAX); return 1;
    case 'H': s->u16 = (uint16_t)in_urange(a, UINT16_MAX); return 1;
    case 'b': s->i8 = (int8_t)in_range(a, INT8_MIN, INT8_MAX); return 1;
    case 'B': s->u8 = (uint8_t)in_urange(a, UINT8_MAX); return 1;
    case 'f': s->f32 = (float)PyFloat_AsDouble(a); return 1;
    case 'd': s->f64 = PyFloat_AsDouble(a); return 1;
    default:
      PyErr_Format(PyExc_TypeError, "launch: unknown argument type '%%c'", type);
      return -1;
  }
}

/* Launches `function` with the `n` parameters in `slots`/`params` and the two scratch pointers
   (none; the arrays have room for them), `dependent`: as a programmatic dependent launch; True,
   or NULL with the CUDA error raised. */
static PyObject* run(CUfunction function, const unsigned int grid[3], unsigned int threads, unsigned int shared,
                     int dependent, CUstream stream, Slot* slots, void** params, int n) {
  slots[n].u64 = 0; params[n] = &slots[n]; ++n;  /* global scratch: none */
  slots[n].u64 = 0; params[n] = &slots[n]; ++n;  /* profile scratch: none */
  CUresult err;
  const char* call;
  if (dependent) {
    CUlaunchAttribute attribute;
    memset(&attribute, 0, sizeof(attribute));
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config;
    memset(&config, 0, sizeof(config));
    config.gridDimX = grid[0]; config.gridDimY = grid[1]; config.gridDimZ = grid[2];
    config.blockDimX = threads; config.blockDimY = 1; config.blockDimZ = 1;
    config.sharedMemBytes = shared; config.hStream = stream;
    config.attrs = &attribute; config.numAttrs = 1;
    call = "cuLaunchKernelEx";
    err = cuLaunchKernelEx(&config, function, params, NULL);
  } else {
    call = "cuLaunchKernel";
    err = cuLaunchKernel(function, grid[0], grid[1], grid[2], threads, 1, 1, shared, stream, params, NULL);
  }
  if (err != CUDA_SUCCESS) {
    const char* what = NULL;
    cuGetErrorString(err, &what);
    PyErr_Format(PyExc_RuntimeError, "CUDA error from %%s: %%s", call, what ? what : "unknown");
    return NULL;
  }
  Py_RETURN_TRUE;
}

/* Whether `context` (not NULL) is the CUDA context current in this thread. */
static int is_current(CUcontext context) {
  CUcontext ctx = NULL;
  return context != NULL && cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx == context;
}

/* context() -> the CUDA context current in this thread, as an int (0: none). */
static PyObject* current_context(PyObject* self, PyObject* unused) {
  CUcontext ctx = NULL;
  if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = NULL;
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)ctx);
}

/* launch(grid_x, grid_y, grid_z, stream, function, threads, shared_bytes, types, context, dependent,
   *args) -> bool
   False: `context`, where `function` was loaded, is not the CUDA context current in this thread
   (none is, or another device's: the caller launches another way). */
static PyObject* launch(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 10 || !PyBytes_Check(args[7])) {
    PyErr_SetString(PyExc_TypeError,
                    "launch(gx, gy, gz, stream, function, threads, shared, types, context, dependent, *args)");
    return NULL;
  }
  const char* types = PyBytes_AS_STRING(args[7]);
  Py_ssize_t ntypes = PyBytes_GET_SIZE(args[7]);
  if (nargs - 10 != ntypes || ntypes + 2 > MAX_PARAMS) {
    PyErr_Format(PyExc_TypeError, "launch: %%zd kernel arguments for %%zd types", nargs - 10, ntypes);
    return NULL;
  }
  CUcontext context = (CUcontext)(uintptr_t)PyLong_AsUnsignedLongLong(args[8]);
  int dependent = PyObject_IsTrue(args[9]);
  if (dependent < 0 || PyErr_Occurred()) return NULL;
  if (!is_current(context)) Py_RETURN_FALSE;
  unsigned int grid[3], threads, shared;
  for (int i = 0; i < 3; ++i) grid[i] = (unsigned int)PyLong_AsUnsignedLong(args[i]);
  CUstream stream = (CUstream)(uintptr_t)PyLong_AsUnsignedLongLong(args[3]);
  CUfunction function = (CUfunction)(uintptr_t)PyLong_AsUnsignedLongLong(args[4]);
  threads = (unsigned int)PyLong_AsUnsignedLong(args[5]);
  shared = (unsigned int)PyLong_AsUnsignedLong(args[6]);
  Slot slots[MAX_PARAMS];
  void* params[MAX_PARAMS];
  _Alignas(128) CUtensorMap maps[MAX_MAPS];
  int n = 0, nmaps = 0;
  for (Py_ssize_t i = 0; i < ntypes; ++i) {
    if (types[i] == 'm') {  /* a TMA descriptor: its 128 bytes (map_bytes), copied to aligned memory */
      PyObject* m = args[10 + i];
      if (nmaps == MAX_MAPS || !PyBytes_Check(m) || PyBytes_GET_SIZE(m) != (Py_ssize_t)sizeof(CUtensorMap)) {
        PyErr_SetString(PyExc_TypeError, "launch: a tensor map parameter takes the 128 bytes of map_bytes()");
        return NULL;
      }
      memcpy(&maps[nmaps], PyBytes_AS_STRING(m), sizeof(CUtensorMap));
      params[n++] = &maps[nmaps++];
      continue;
    }
    int packed = pack(types[i], args[10 + i], &slots[n]);
    if (packed < 0) return NULL;
    if (packed) { params[n] = &slots[n]; ++n; }
  }
  if (PyErr_Occurred()) return NULL;
  if ((uint64_t)grid[0] * grid[1] * grid[2] == 0) Py_RETURN_TRUE;
  return run(function, grid, threads, shared, dependent, stream, slots, params, n);
}

/* The tensor reader (tensor_reader.py), once `use_reader` is given it: module-wide, so that
   quick launchers made before it was built use it too. */
static const TcReader* reader = NULL;
static PyObject* reader_capsule = NULL;

static PyObject* use_reader(PyObject* self, PyObject* capsule) {
  const TcReader* r = capsule == Py_None ? NULL : PyCapsule_GetPointer(capsule, "tilecraft.TcReader");
  if (r == NULL && capsule != Py_None) return NULL;
  Py_INCREF(capsule);
  Py_XSETREF(reader_capsule, capsule);
  reader = r;
  Py_RETURN_NONE;
}

/* The quick launcher of one specialization (QuickChecks in backends/base.py): quick(stream,
   grid, args) checks a launch as the runtime's generated Python would and launches, or returns
   False having done nothing. Every object it points to is owned by `table`. A tensor the
   reader reads (`tensor_of` its place among those, else -1) has its checks of an `item`
   compared with what the reader read, `want` the expected shape, strides or negative bit. */
typedef struct { int n; PyObject* names[MAX_STEPS]; int called[MAX_STEPS]; } Path;
typedef struct { int kind; Py_ssize_t index; Path path; PyObject* detail; PyObject* expected;
                 long long bound; uint64_t mask, aligned;
                 int item, tensor, nwant; int64_t want[TC_MAX_DIMS]; } Check;
typedef struct { int source; Py_ssize_t index; char type; Slot slot; } Param;
/* One descriptor's tensor maps, by the address of the array it describes (the rest of what a map
   encodes, the array's dtype, shape and strides, is the specialization's): MAP_WAYS of them,
   replaced in turn. */
typedef struct { uint64_t address[MAP_WAYS]; int filled[MAP_WAYS]; int next;
                 unsigned char bytes[MAP_WAYS][sizeof(CUtensorMap)]; } MapCache;
typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* table;
  PyObject *env, *knob, *raw;
  PyObject** types; Py_ssize_t ntypes;
  Py_ssize_t naddresses; Py_ssize_t address_of[MAX_PARAMS]; Path address_path[MAX_PARAMS];
  int tensor_of[MAX_PARAMS];
  Check* checks; Py_ssize_t nchecks;
  long long grid_limit;
  PyObject* encode; MapCache* maps;
  int fixed_grid; unsigned int grid_given[3], grid_launched[3];
  PyObject *stream_type, *stream_attr, *stream_handle;
  CUfunction function; CUcontext context; unsigned int threads, shared; int dependent;
  Param params[MAX_PARAMS]; int nparams;
} Quick;

/* `obj` read along `path`: a new reference, or NULL with an exception. */
static PyObject* read_path(PyObject* obj, const Path* path) {
  Py_INCREF(obj);
  for (int s = 0; s < path->n; ++s) {
    PyObject* next = path->called[s] ? PyObject_CallMethodNoArgs(obj, path->names[s])
                                     : PyObject_GetAttr(obj, path->names[s]);
    Py_DECREF(obj);
    if (next == NULL) return NULL;
    obj = next;
  }
  return obj;
}

/* 1 when `x` differs from `expected`, 0 when not, -1 on an exception; steals `x`. */
static int differs(PyObject* x, PyObject* expected) {
  if (x == NULL) return -1;
  int r = PyObject_RichCompareBool(x, expected, Py_NE);
  Py_DECREF(x);
  return r;
}

/* 1 when the int `x` is outside [-bound, bound), 0 when inside, -1 on an exception. */
static int out_of_range(PyObject* x, long long bound) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
  if (v == -1 && PyErr_Occurred()) return -1;
  return overflow || v < -bound || v >= bound;
}

/* 1 when the read tensor `t` differs from what check `k` expects, 0 when not. */
static int tensor_differs(const Check* k, const TcTensor* t, const TcReader* r) {
  switch (k->item) {
    case TC_DTYPE: return t->dtype != k->expected;  /* torch's dtypes compare by identity */
    case TC_DEVICE: return t->device != r->device_key(k->expected);
    case TC_NEG: return t->neg != k->want[0];
    case TC_SHAPE: return t->ndim != k->nwant || memcmp(t->sizes, k->want, sizeof(int64_t) * t->ndim) != 0;
    default: return t->ndim != k->nwant || memcmp(t->strides, k->want, sizeof(int64_t) * t->ndim) != 0;
  }
}

/* The tensor map of descriptor `d` of `array` at `address`: kept, else made by `encode(d, array)`
   (its 128 bytes) and kept; NULL with an exception where that fails. */
static const unsigned char* map_for(Quick* q, int d, uint64_t address, PyObject* array) {
  MapCache* c = &q->maps[d];
  for (int w = 0; w < MAP_WAYS; ++w)
    if (c->filled[w] && c->address[w] == address) return c->bytes[w];
  PyObject* made = PyObject_CallFunction(q->encode, "iO", d, array);
  if (made == NULL) return NULL;
  if (!PyBytes_Check(made) || PyBytes_GET_SIZE(made) != (Py_ssize_t)sizeof(CUtensorMap)) {
    Py_DECREF(made);
    PyErr_SetString(PyExc_TypeError, "quick: encode(d, array) returns a tensor map's 128 bytes");
    return NULL;
  }
  int w = c->next;
  c->next = (w + 1) %% MAP_WAYS;
  memcpy(c->bytes[w], PyBytes_AS_STRING(made), sizeof(CUtensorMap));
  c->address[w] = address;
  c->filled[w] = 1;
  Py_DECREF(made);
  return c->bytes[w];
}

#define REFUSE(cond) do { int r_ = (cond); if (r_ < 0) return NULL; if (r_) Py_RETURN_FALSE; } while (0)

static PyObject* quick_call(PyObject* self, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
  Quick* q = (Quick*)self;
  if (PyVectorcall_NARGS(nargsf) != 3 || kwnames != NULL) {
    PyErr_SetString(PyExc_TypeError, "quick(stream, grid, args)");
    return NULL;
  }
  PyObject *stream = argv[0], *grid = argv[1], *args = argv[2];
  PyObject* now = PyDict_GetItemWithError(q->env, q->knob);
  if (now == NULL && PyErr_Occurred()) return NULL;
  REFUSE(PyObject_RichCompareBool(now != NULL ? now : Py_None, q->raw, Py_NE));
  if (stream == Py_None || !PyTuple_CheckExact(grid)) Py_RETURN_FALSE;
  if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != q->ntypes) Py_RETURN_FALSE;
  PyObject** a = &PyTuple_GET_ITEM(args, 0);
  for (Py_ssize_t i = 0; i < q->ntypes; ++i)
    if ((PyObject*)Py_TYPE(a[i]) != q->types[i]) Py_RETURN_FALSE;
  for (Py_ssize_t c = 0; c < q->nchecks; ++c)  /* ranges before addresses, as the Python guards them */
    if (q->checks[c].kind == CHECK_RANGE) REFUSE(out_of_range(a[q->checks[c].index], q->checks[c].bound));
  uint64_t p[MAX_PARAMS];
  TcTensor t[MAX_TENSORS];
  const TcReader* r = reader;  /* as it is now: a call it makes may let the reader's build finish */
  for (Py_ssize_t j = 0; j < q->naddresses; ++j) {
    if (q->address_of[j] < 0) continue;
    int s = q->tensor_of[j];
    if (s >= 0) {
      t[s].items = 0;
      int got = r != NULL ? r->read(a[q->address_of[j]], &t[s]) : 0;
      if (got < 0) return NULL;
      if (got > 0) { p[j] = t[s].address; continue; }
    }
    PyObject* address = read_path(a[q->address_of[j]], &q->address_path[j]);
    if (address == NULL) return NULL;
    p[j] = PyLong_Check(address) ? PyLong_AsUnsignedLongLong(address) : (uint64_t)-1;
    int bad = p[j] == (uint64_t)-1 && (!PyLong_Check(address) || PyErr_Occurred());
    Py_DECREF(address);
    if (bad) { PyErr_Clear(); Py_RETURN_FALSE; }  /* not an address: the full path decides */
  }
  for (Py_ssize_t c = 0; c < q->nchecks; ++c) {
    const Check* k = &q->checks[c];
    PyObject* x = a[k->index];
    switch (k->kind) {
      case CHECK_RANGE: break;  /* checked before the addresses */
      case CHECK_VALUE: REFUSE(PyObject_RichCompareBool(x, k->expected, Py_NE)); break;
      case CHECK_CALL: REFUSE(differs(PyObject_CallOneArg(k->detail, x), k->expected)); break;
      case CHECK_PATH:
        if (k->item && t[k->tensor].items) { if (tensor_differs(k, &t[k->tensor], r)) Py_RETURN_FALSE; }
        else REFUSE(differs(read_path(x, &k->path), k->expected));
        break;
      case CHECK_ALIGN: if ((p[k->index] & k->mask) != k->aligned) Py_RETURN_FALSE; break;
    }
  }
  Py_ssize_t dims = PyTuple_GET_SIZE(grid);
  if (dims < 1 || dims > 3) Py_RETURN_FALSE;
  unsigned int g[3] = {1, 1, 1};
  for (Py_ssize_t d = 0; d < dims; ++d) {
    PyObject* x = PyTuple_GET_ITEM(grid, d);
    if (!PyLong_CheckExact(x)) Py_RETURN_FALSE;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (overflow || v < 1 || v > q->grid_limit) Py_RETURN_FALSE;
    g[d] = (unsigned int)v;
  }
  if (q->fixed_grid) {  /* only the grid it was made for, launched as another */
    if (memcmp(g, q->grid_given, sizeof g) != 0) Py_RETURN_FALSE;
    memcpy(g, q->grid_launched, sizeof g);
  }
  PyObject* handle;
  if (PyLong_CheckExact(stream)) { handle = stream; Py_INCREF(handle); }
  else if ((PyObject*)Py_TYPE(stream) == q->stream_type) handle = PyObject_GetAttr(stream, q->stream_attr);
  else handle = PyObject_CallOneArg(q->stream_handle, stream);
  if (handle == NULL) return NULL;
  if (!is_current(q->context)) { Py_DECREF(handle); Py_RETURN_FALSE; }  /* none, or another device's */
  CUstream cu_stream = (CUstream)(uintptr_t)PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  Slot slots[MAX_PARAMS];
  void* params[MAX_PARAMS];
  _Alignas(128) CUtensorMap maps[MAX_MAPS];
  int nmaps = 0;
  for (int i = 0; i < q->nparams; ++i) {
    const Param* m = &q->params[i];
    if (m->source == FROM_MAP) {  /* copied at once: the next map's encode may run Python, which may */
      const unsigned char* bytes = map_for(q, m->slot.i32, p[m->index], a[q->address_of[m->index]]);
      if (bytes == NULL) return NULL;
      memcpy(&maps[nmaps], bytes, sizeof(CUtensorMap));
      params[i] = &maps[nmaps++];
      continue;
    }
    if (m->source == FROM_ARG) { if (pack(m->type, a[m->index], &slots[i]) < 0) return NULL; }
    else slots[i] = m->source == FROM_ADDRESS ? (Slot){.u64 = p[m->index]} : m->slot;
    params[i] = &slots[i];
  }
  if (PyErr_Occurred()) return NULL;
  return run(q->function, g, q->threads, q->shared, q->dependent, cu_stream, slots, params, q->nparams);
}

/* Check `k` of a tensor item: the tensor it reads (none: the item is dropped, the check reads
   through Python) and the values it expects, as the reader's. 0, or -1 with an exception. */
static int want(const Quick* q, Check* k) {
  k->tensor = -1;
  for (Py_ssize_t j = 0; j < q->naddresses; ++j)
    if (q->address_of[j] == k->index && q->tensor_of[j] >= 0) k->tensor = q->tensor_of[j];
  PyObject* e = k->expected;
  if (k->item == TC_NEG && PyBool_Check(e)) { k->want[0] = e == Py_True; }
  else if ((k->item == TC_SHAPE || k->item == TC_STRIDES) && PyTuple_Check(e) && PyTuple_GET_SIZE(e) <= TC_MAX_DIMS) {
    k->nwant = (int)PyTuple_GET_SIZE(e);
    for (int d = 0; d < k->nwant; ++d) {
      PyObject* x = PyTuple_GET_ITEM(e, d);
      int overflow = 0;
      k->want[d] = PyLong_Check(x) ? PyLong_AsLongLongAndOverflow(x, &overflow) : 0;
      if (PyErr_Occurred()) return -1;
      if (!PyLong_CheckExact(x) || overflow) k->tensor = -1;  /* compared in Python */
    }
  } else if (k->item != TC_DTYPE && k->item != TC_DEVICE) {
    k->tensor = -1;
  }
  if (k->tensor < 0) k->item = 0;
  return 0;
}

static int parse_path(PyObject* steps, Path* path) {
  if (!PyTuple_Check(steps) || PyTuple_GET_SIZE(steps) < 1 || PyTuple_GET_SIZE(steps) > MAX_STEPS) {
    PyErr_SetString(PyExc_ValueError, "quick: a path is a tuple of 1 to 8 (name, called) steps");
    return -1;
  }
  path->n = (int)PyTuple_GET_SIZE(steps);
  for (int s = 0; s < path->n; ++s) {
    PyObject* step = PyTuple_GET_ITEM(steps, s);
    if (!PyArg_ParseTuple(step, "Up", &path->names[s], &path->called[s])) return -1;
  }
  return 0;
}

static void quick_dealloc(PyObject* self) {
  Quick* q = (Quick*)self;
  PyMem_Free(q->types);
  PyMem_Free(q->checks);
  PyMem_Free(q->maps);
  Py_XDECREF(q->table);
  Py_TYPE(self)->tp_free(self);
}

static PyTypeObject QuickType = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "%(name)s.Quick",
  .tp_basicsize = sizeof(Quick),
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
  .tp_vectorcall_offset = offsetof(Quick, vectorcall),
  .tp_call = PyVectorcall_Call,
  .tp_dealloc = quick_dealloc,
};

/* quick(env, knob, raw, types, addresses, checks, grid_limit, stream_type, stream_attr,
   stream_handle, function, context, threads, shared, dependent, params, encode, grid) -> Quick;
   `native_launch.quick` documents them. */
static PyObject* make_quick(PyObject* self, PyObject* table) {
  PyObject *env, *knob, *raw, *types, *addresses, *checks, *stream_type, *stream_attr, *stream_handle, *params,
           *encode, *grid;
  long long grid_limit;
  unsigned long long function, context;
  unsigned int threads, shared;
  int dependent;
  if (!PyArg_ParseTuple(table, "O!OOO!O!O!LOUOKKIIpO!OO:quick", &PyDict_Type, &env, &knob, &raw, &PyTuple_Type,
                        &types, &PyTuple_Type, &addresses, &PyTuple_Type, &checks, &grid_limit, &stream_type,
                        &stream_attr, &stream_handle, &function, &context, &threads, &shared, &dependent,
                        &PyTuple_Type, &params, &encode, &grid))
    return NULL;
  if (PyTuple_GET_SIZE(addresses) > MAX_PARAMS || PyTuple_GET_SIZE(params) + 2 > MAX_PARAMS) {
    PyErr_SetString(PyExc_ValueError, "quick: too many parameters");
    return NULL;
  }
  Quick* q = PyObject_New(Quick, &QuickType);
  if (q == NULL) return NULL;
  q->vectorcall = quick_call;
  Py_INCREF(table);
  q->table = table;
  q->env = env; q->knob = knob; q->raw = raw;
  q->grid_limit = grid_limit;
  q->encode = encode; q->maps = NULL;
  q->stream_type = stream_type; q->stream_attr = stream_attr; q->stream_handle = stream_handle;
  q->function = (CUfunction)(uintptr_t)function; q->context = (CUcontext)(uintptr_t)context;
  q->threads = threads; q->shared = shared; q->dependent = dependent;
  q->ntypes = PyTuple_GET_SIZE(types);
  q->nchecks = PyTuple_GET_SIZE(checks);
  q->types = PyMem_Calloc(q->ntypes + 1, sizeof(PyObject*));
  q->checks = PyMem_Calloc(q->nchecks + 1, sizeof(Check));
  if (q->types == NULL || q->checks == NULL) { Py_DECREF(q); return PyErr_NoMemory(); }
  q->fixed_grid = grid != Py_None;
  if (q->fixed_grid && !PyArg_ParseTuple(grid, "(III)(III):quick's grid", &q->grid_given[0], &q->grid_given[1],
                                         &q->grid_given[2], &q->grid_launched[0], &q->grid_launched[1],
                                         &q->grid_launched[2])) {
    Py_DECREF(q);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < q->ntypes; ++i) q->types[i] = PyTuple_GET_ITEM(types, i);
  q->naddresses = PyTuple_GET_SIZE(addresses);
  int ntensors = 0;
  for (Py_ssize_t j = 0; j < q->naddresses; ++j) {
    PyObject* entry = PyTuple_GET_ITEM(addresses, j);
    q->address_of[j] = -1;
    q->tensor_of[j] = -1;
    if (entry == Py_None) continue;
    PyObject* steps;
    int by_reader = 0;
    if (!PyArg_ParseTuple(entry, "nO|p", &q->address_of[j], &steps, &by_reader) ||
        parse_path(steps, &q->address_path[j]) < 0) {
      Py_DECREF(q);
      return NULL;
    }
    if (by_reader && ntensors < MAX_TENSORS) q->tensor_of[j] = ntensors++;
  }
  for (Py_ssize_t c = 0; c < q->nchecks; ++c) {
    Check* k = &q->checks[c];
    PyObject* detail;
    k->item = 0;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(checks, c), "inOO|i", &k->kind, &k->index, &detail, &k->expected, &k->item)) {
      Py_DECREF(q);
      return NULL;
    }
    k->detail = detail;
    if (k->kind != CHECK_PATH) k->item = 0;
    else if (k->item && want(q, k) < 0) {
      Py_DECREF(q);
      return NULL;
    }
    int ok = k->index >= 0;
    if (k->kind == CHECK_ALIGN) {
      ok = ok && k->index < q->naddresses && q->address_of[k->index] >= 0;
      k->mask = PyLong_AsUnsignedLongLong(detail);
      k->aligned = PyLong_AsUnsignedLongLong(k->expected);
    } else {
      ok = ok && k->index < q->ntypes;
      if (k->kind == CHECK_RANGE) {
        k->bound = PyLong_AsLongLong(detail);
        ok = ok && q->types[k->index] == (PyObject*)&PyLong_Type;
      } else if (k->kind == CHECK_PATH && parse_path(detail, &k->path) < 0) {
        Py_DECREF(q);
        return NULL;
      } else if (k->kind != CHECK_VALUE && k->kind != CHECK_CALL && k->kind != CHECK_PATH) {
        ok = 0;
      }
    }
    if (PyErr_Occurred() || !ok) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "quick: check %%zd is malformed", c);
      Py_DECREF(q);
      return NULL;
    }
  }
  q->nparams = (int)PyTuple_GET_SIZE(params);
  int nmaps = 0, descriptors = 0;  /* map parameters; descriptors, by the highest number given */
  for (int i = 0; i < q->nparams; ++i) {
    Param* m = &q->params[i];
    PyObject* value;
    int type;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(params, i), "CinO", &type, &m->source, &m->index, &value)) {
      Py_DECREF(q);
      return NULL;
    }
    m->type = (char)type;
    int ok = m->type != 'x' && m->index >= 0;
    if (m->source == FROM_ARG) ok = ok && m->index < q->ntypes;
    else if (m->source == FROM_ADDRESS || m->source == FROM_MAP)
      ok = ok && m->index < q->naddresses && q->address_of[m->index] >= 0;
    else ok = ok && m->source == FROM_CONSTANT && pack(m->type, value, &m->slot) > 0;
    if (m->source == FROM_MAP) {  /* value: which descriptor (its maps' cache) */
      m->slot.i32 = (int32_t)PyLong_AsLong(value);
      ok = ok && m->type == 'm' && m->slot.i32 >= 0 && m->slot.i32 < MAX_MAPS && nmaps++ < MAX_MAPS
           && PyCallable_Check(encode);
      if (ok && m->slot.i32 >= descriptors) descriptors = m->slot.i32 + 1;
    }
    if (PyErr_Occurred() || !ok) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "quick: parameter %%d is malformed", i);
      Py_DECREF(q);
      return NULL;
    }
  }
  if (descriptors && (q->maps = PyMem_Calloc(descriptors, sizeof(MapCache))) == NULL) {
    Py_DECREF(q);
    return PyErr_NoMemory();
  }
  return (PyObject*)q;
}

/* Triton's host tensor map object (triton.backends.nvidia.PyCUtensorMap, Triton 3.6's driver.c):
   the map its fill_tma_descriptor encoded, 128-byte aligned after the object's head. */
typedef struct { PyObject_HEAD _Alignas(128) CUtensorMap tensorMap; } TritonTensorMap;

/* map_bytes(m) -> the 128 bytes of Triton's tensor map `m`, for a launch's 'm' parameter. */
static PyObject* map_bytes(PyObject* self, PyObject* m) {
  if (strcmp(Py_TYPE(m)->tp_name, "triton.backends.nvidia.PyCUtensorMap") != 0
      || Py_TYPE(m)->tp_basicsize < (Py_ssize_t)sizeof(TritonTensorMap)) {  /* not the layout read below */
    PyErr_Format(PyExc_TypeError, "map_bytes() takes Triton's PyCUtensorMap, not %%s", Py_TYPE(m)->tp_name);
    return NULL;
  }
  return PyBytes_FromStringAndSize((const char*)&((TritonTensorMap*)m)->tensorMap, sizeof(CUtensorMap));
}

static PyMethodDef methods[] = {
  {"map_bytes", map_bytes, METH_O, "The 128 bytes of Triton's PyCUtensorMap."},
  {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "Launch a loaded CUDA kernel."},
  {"quick", make_quick, METH_VARARGS, "The quick launcher of one specialization."},
  {"context", current_context, METH_NOARGS, "The CUDA context current in this thread, as an int (0: none)."},
  {"use_reader", use_reader, METH_O, "Read tensors through the tensor reader's capsule (None: through Python)."},
  {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, methods};

PyMODINIT_FUNC PyInit_%(name)s(void) {
  if (PyType_Ready(&QuickType) < 0) return NULL;
  return PyModule_Create(&module);
}
"""


def source(name: str) -> str:
    """The launcher's C source, as the extension module `name`."""
    return _SOURCE % {"max_params": _MAX_PARAMS, "name": name, "tensor_header": tensor_reader.HEADER,
                      "value": CHECK_VALUE, "range": CHECK_RANGE, "call": CHECK_CALL, "path": CHECK_PATH,
                      "align": CHECK_ALIGN, "from_arg": _FROM_ARG, "from_address": _FROM_ADDRESS,
                      "from_constant": _FROM_CONSTANT, "from_map": _FROM_MAP}


@functools.cache
def _module() -> Any:
    """The built launcher module, or None when it cannot be built here."""
    try:
        from triton.backends.nvidia import driver
        from triton.runtime.build import compile_module_from_src
        module = compile_module_from_src(source("tilecraft_launch"), "tilecraft_launch",
                                         library_dirs=driver.library_dirs(), include_dirs=driver.include_dirs,
                                         libraries=driver.libraries)
    except Exception:  # no compiler, headers or libcuda: Triton's launcher stays
        return None
    tensor_reader.attach(module)  # its quick launchers read tensors through Python until the reader is built
    return module


def argument_types(compiled: Any, descriptors: bool = False) -> bytes | None:
    """The packing letters of `compiled`'s parameters, or None when this launcher cannot launch
    it (see the module's docstring). With `descriptors`, a kernel that takes host tensor
    descriptors is launched too, each descriptor parameter given as Triton's launcher expands
    it: its map ('m', the bytes of `map_bytes`), then its shape (int32) and strides (int64)."""
    meta = compiled.metadata
    tensordesc = getattr(meta, "tensordesc_meta", None)
    if (getattr(meta, "num_ctas", 1) != 1 or meta.launch_cooperative_grid
            or meta.global_scratch_size or meta.profile_scratch_size
            or (tensordesc and (not descriptors or any(m is None for m in tensordesc)))):
        return None
    letters = []
    for ty in compiled.src.signature.values():
        if isinstance(ty, str) and ty.startswith("tensordesc"):
            if not tensordesc:
                return None  # a descriptor Triton's launcher would decompose into its base pointer
            block = _DESCRIPTOR_BLOCK.match(ty)  # a Gluon descriptor's type names its layout after the block
            if block is None:
                return None
            rank = block[1].count(",") + 1
            letters.append("m" + "i" * rank + "q" * rank)
            continue
        letter = "p" if isinstance(ty, str) and ty.startswith("*") else _TYPES.get(ty)
        if letter is None:
            return None
        letters.append(letter)
    return "".join(letters).encode()


class Native(NamedTuple):
    """tilecraft's launcher of one compiled kernel: `launch(grid_x, grid_y, grid_z, stream,
    *head, *args)`, args as its Triton arguments with arrays as addresses, from the launcher
    `module` (which also makes its quick launchers: `quick`). `head` is (function, threads,
    shared memory, types, context, dependent): the CUDA context current when the launcher was
    made, the one the kernel was loaded in; the call returns False, launching nothing, where
    another context is current (another device's) or none. `dependent`: each launch is a
    programmatic dependent launch (the kernel was compiled with `launch_pdl`)."""

    launch: Callable[..., bool]
    head: tuple[Any, ...]
    module: Any


def launcher_for(compiled: Any, module: Any = None, descriptors: bool = False, shared: int | None = None) -> Native | None:
    """The launcher of `compiled` (a loaded Triton CompiledKernel) from `module` (default: the
    one built here), or None when this launcher cannot launch `compiled` (`descriptors`: see
    `argument_types`). `shared`: the dynamic shared memory its launches ask for, where more
    than the kernel uses (occupancy.py)."""
    types = argument_types(compiled, descriptors)
    native = (module or _module()) if types is not None else None
    if native is None:
        return None
    shared = max(compiled.metadata.shared, shared or 0)
    head = (compiled.function, 32 * compiled.metadata.num_warps, shared, types, native.context(),
            bool(compiled.metadata.launch_pdl))
    return Native(native.launch, head, native)


def quick(native: Native, fused_args: Sequence[str], checks: QuickChecks, stream: tuple[type, str, Callable[[Any], int]],
          encode: Callable[[int, Any], bytes] | None = None,
          grid: tuple[Grid, Grid] | None = None) -> Callable[[Any, Any, Any], bool]:
    """The runtime's quick launcher (`fastpath.quick_launcher`) of one specialization, in C:
    `checks` done on each call, then `native.launch`'s launch with `fused_args` (per packing
    letter of `native`: `a<j>`, `p<j>` or a constant int, as in a `FusedLaunch`, or for a
    tensor map 'm', `m<d>.<j>`: descriptor d of runtime argument j, its map made by
    `encode(d, array)` (the 128 bytes of `map_bytes`) the first time an address is seen and
    kept for the next). `stream`: (a stream type, the attribute holding its handle, the
    function giving any other stream's handle), for streams that are not ints. `grid`: (the
    one grid it launches, the grid it launches that on) for a kernel specialized for one grid,
    which declines any other. Like `native.launch`, it declines where `native`'s context is not
    current."""
    function, threads, shared, types, context, dependent = native.head
    params = []
    for letter, arg in zip(types.decode(), fused_args):
        if letter == "x":
            continue
        if arg[0] == "a":
            params.append((letter, _FROM_ARG, checks.runtime[int(arg[1:])], None))
        elif arg[0] == "p":
            params.append((letter, _FROM_ADDRESS, int(arg[1:]), None))
        elif arg[0] == "m":
            d, j = arg[1:].split(".")
            params.append((letter, _FROM_MAP, int(j), int(d)))
        else:
            params.append((letter, _FROM_CONSTANT, 0, int(arg)))
    reads, items = tensor_reader.plan(checks)
    addresses = tuple(None if path is None else (i, path, read)
                      for i, path, read in zip(checks.runtime, checks.addresses, reads))
    table = tuple((*check, item) for check, item in zip(checks.checks, items))
    return native.module.quick(checks.env, checks.knob, checks.raw, checks.types, addresses, table,
                               checks.grid_limit, *stream, function, context, threads, shared, dependent,
                               tuple(params), encode, grid)
