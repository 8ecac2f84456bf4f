"""A C++ reader of torch tensors for the native quick launcher (native_launch.py `quick`).

The quick launcher checks each tensor argument against its specialization: dtype, device,
strides, shape and negative bit, and takes its address (`fastpath._ARRAYS`). Read through
Python (`t.dtype`, `t.stride()`, `t.data_ptr()`...), that is most of a quick launch's host time
(1.0 of 1.25 us on the CPU for three tensors, benchmarks/quick_launch_cpu.py), since each read
builds Python objects (a torch.Size, a tuple, a torch.device, ints) to be compared and dropped.
This reader takes them from the tensor's ATen object instead (`THPVariable_Unpack`), into a
`TcTensor` the launcher compares with the expected values: 0.17 us for the whole quick launch,
of which the stand-in launch is 0.16.

It answers only where the Python reads would give the same values by the same means, and leaves
the rest to them (the launcher then reads through Python as before): a plain torch.Tensor or
Parameter with no torch function mode active; its items only for a dense-layout tensor of
fixed sizes with at most TC_MAX_DIMS dims. The address is `data_ptr()` itself, under torch's
own error and warning handling, so an error there is the one Python would raise. What it reads
is torch's, not Python's: an instance attribute shadowing a tensor's method (`t.stride = ...`)
is not seen, the one difference (tests/backends/test_native_quick.py shows it).

Which checks it takes over comes from the launcher's `QuickChecks` (`plan`): a check of a path
in `ITEMS` on an argument whose address is `data_ptr()`; the launcher compares, the reader only
reads.

The reader is a C++ extension built against the installed torch (its headers and libraries):
one g++ run of about 11 s (most of it parsing torch's headers), once per machine and torch
build, kept in Triton's cache beside the C launcher and built under a file lock, so processes
started together (torchrun ranks, test workers) build it once. It is built by a process of its
own (`_COMPILE`), which outlives one that exits within those 11 s (a series of short runs on a
new machine builds it once), and a failed build is recorded, not tried again by each process
(for a day: FAILED_RETRY_S).
A background thread started when a launcher module is made (`attach`) starts or waits for the
build, not the launch that asks for it: an 11 s stall in the second launch of a program (when
its first quick launcher is made) on each new machine would cost far more than the reader saves
in that run. Until it is ready the launcher reads through Python; when it is, `use_reader`
switches the launcher module, so every quick launcher, those made before included, uses it from
its next call. Anything that keeps it from being built (no C++ compiler, no torch headers, a
failed build or load) leaves the launcher as it was; TILECRAFT_TENSOR_READER=debug says why (for
a recorded failure, the record's path: delete it to build again), =0 never builds it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

from ... import knobs
from ..base import CHECK_PATH, Path as ReadPath, QuickChecks

TC_MAX_DIMS = 8
DTYPE, DEVICE, SHAPE, STRIDES, NEG = range(1, 6)

ADDRESS: ReadPath = (("data_ptr", True),)
"""The Python read of a tensor's address that the reader replaces."""

ITEMS: dict[ReadPath, tuple[int, type]] = {
    (("dtype", False),): (DTYPE, torch.dtype),
    (("device", False),): (DEVICE, torch.device),
    (("shape", False),): (SHAPE, tuple),
    (("stride", True),): (STRIDES, tuple),
    (("is_neg", True),): (NEG, bool),
}
"""The Python reads the reader replaces, each with its item's code and the type of the value a
check of it may expect (a key holds what the read returned: a torch.Size is a tuple)."""

HEADER = r"""
#define TC_MAX_DIMS %(max_dims)d
enum { TC_DTYPE = %(dtype)d, TC_DEVICE = %(device)d, TC_SHAPE = %(shape)d, TC_STRIDES = %(strides)d, TC_NEG = %(neg)d };

/* One tensor as the reader read it: its address (data_ptr()), and, when `items` is 1, what
   its Python reads would return: `dtype` the object `.dtype` returns (borrowed: torch keeps one
   per scalar type), `device` the key (device_key) of `.device`, `neg` `.is_neg()`, `sizes` and
   `strides` `.shape` and `.stride()`. */
typedef struct {
  uint64_t address;
  int items, neg, ndim;
  PyObject* dtype;
  int64_t device;
  int64_t sizes[TC_MAX_DIMS], strides[TC_MAX_DIMS];
} TcTensor;

/* read: 1 with `out` filled, 0 when the tensor must be read through Python (nothing done), -1
   with data_ptr()'s error raised. device_key: a torch.device's key, -1 for anything else. */
typedef struct {
  int (*read)(PyObject* tensor, TcTensor* out);
  int64_t (*device_key)(PyObject* device);
} TcReader;
""" % {"max_dims": TC_MAX_DIMS, "dtype": DTYPE, "device": DEVICE, "shape": SHAPE, "strides": STRIDES, "neg": NEG}
"""The reader's interface in C, in both its source and the launcher's."""

_SOURCE = r"""
#include <stdint.h>
#include <type_traits>
#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

%(header)s

static int64_t key_of(c10::Device device) {
  return (int64_t)(uint8_t)device.type() << 8 | (uint8_t)device.index();
}

static int64_t device_key(PyObject* device) {
  return THPDevice_Check(device) ? key_of(((THPDevice*)device)->device) : -1;
}

/* Whether a torch function mode's "skip next" flag is set, on a torch that has the flag
   (PythonTorchFunctionTLS::peek_skip_next: torch 2.13 has it, 2.11 not); false where it has none. */
template <typename T, typename = void> struct HasSkipNext : std::false_type {};
template <typename T> struct HasSkipNext<T, std::void_t<decltype(T::peek_skip_next())>> : std::true_type {};
template <typename T> static bool skip_next_pending() {
  if constexpr (HasSkipNext<T>::value) return T::peek_skip_next();
  else return false;
}

/* Python's reads of a plain Tensor or Parameter run no torch function unless a mode is active
   (a skipped one: the flag, which its reads consume, is theirs to consume). */
static int read(PyObject* obj, TcTensor* out) {
  if (!THPVariable_CheckExact(obj) || at::impl::torch_function_mode_enabled() ||
      skip_next_pending<at::impl::PythonTorchFunctionTLS>())
    return 0;
  HANDLE_TH_ERRORS
  const at::Tensor& t = THPVariable_Unpack(obj);
  out->address = (uint64_t)(uintptr_t)t.data_ptr();
  out->items = 0;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->layout() != c10::kStrided || impl->is_nested() || impl->has_symbolic_sizes_strides()) return 1;
  try {
    c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
    if (sizes.size() > TC_MAX_DIMS || strides.size() != sizes.size()) return 1;
    out->ndim = (int)sizes.size();
    for (int d = 0; d < out->ndim; ++d) { out->sizes[d] = sizes[d]; out->strides[d] = strides[d]; }
    out->dtype = (PyObject*)torch::getTHPDtype(t.scalar_type());
    out->device = key_of(t.device());
    out->neg = t.is_neg();
    out->items = 1;
  } catch (const std::exception&) {  /* its Python reads raise or run elsewhere: they decide */
  }
  return 1;
  END_HANDLE_TH_ERRORS_RET(-1)
}

static const TcReader reader = {read, device_key};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_%(name)s(void) {
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  PyObject* capsule = PyCapsule_New((void*)&reader, "tilecraft.TcReader", NULL);
  if (capsule == NULL || PyModule_AddObject(m, "reader", capsule) < 0) {
    Py_XDECREF(capsule);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
"""

_NAME = "tilecraft_tensor_reader"


def plan(checks: QuickChecks) -> tuple[tuple[bool, ...], tuple[int, ...]]:
    """(per address of `checks`: whether the reader reads it, per check: the `ITEMS` code it
    compares instead of a Python read, 0 for none). The reader reads a torch tensor's
    `data_ptr()`, for types whose Python reads run no torch function but under a mode (Tensor and
    Parameter: `THPVariable_CheckExact`)."""
    reads = tuple(path == ADDRESS and checks.types[i] in (torch.Tensor, torch.nn.Parameter)
                  for i, path in zip(checks.runtime, checks.addresses))
    read_args = {i for i, read in zip(checks.runtime, reads) if read}
    items = []
    for kind, i, detail, expected in checks.checks:
        code, expects = ITEMS.get(detail, (0, object)) if kind == CHECK_PATH and i in read_args else (0, object)
        items.append(code if isinstance(expected, expects) else 0)
    return reads, tuple(items)


def _flags() -> list[str]:
    """The compiler's flags for a reader linked against the torch of this process (its headers
    ship in its wheels, CPU and CUDA alike)."""
    root = Path(torch.__file__).parent
    return ["-O2", "-std=c++20", "-fPIC", "-shared", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            f"-I{root / 'include'}", f"-I{sysconfig.get_paths()['include']}", f"-L{root / 'lib'}",
            "-ltorch_python", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{root / 'lib'}"]


FAILED_RETRY_S = 24 * 3600
"""A failure record older than this no longer stands: the next process builds again. A compiler
killed for memory (g++ exits 1: "Killed signal terminated program cc1plus") or a full disk looks
like any other error, so a record is not kept for good; one build a day at most."""

_COMPILE = r"""
import fcntl, os, subprocess, sys, time
final, failed, retry, source, cxx, *flags = sys.argv[1:]
def recorded():
    try:
        return time.time() - os.path.getmtime(failed) < float(retry)
    except OSError:
        return False
with open(os.path.join(os.path.dirname(final), "build.lock"), "w") as lock:
    fcntl.lockf(lock, fcntl.LOCK_EX)
    if os.path.exists(final) or recorded():
        sys.exit()
    src = os.path.join(os.path.dirname(final), "reader.cpp")
    out, log = f"{final}.{os.getpid()}.tmp", f"{failed}.{os.getpid()}.tmp"
    with open(src, "w") as file:
        file.write(source)
    with open(log, "w") as file:
        try:
            code = subprocess.run([cxx, src, *flags, "-o", out], stdin=subprocess.DEVNULL, stdout=file,
                                  stderr=file, timeout=600).returncode
        except (OSError, subprocess.SubprocessError) as exc:
            code = exc
        built = code == 0 and os.path.exists(out)
        if not built:
            print(f"\n{cxx} failed: {code!r}", file=file)
    if built:
        os.replace(out, final)
        os.unlink(log)
    elif type(code) is int and code > 0:  # the compiler's own verdict: recorded
        os.replace(log, failed)
    else:  # killed, stopped at the time limit or not started: tried again by the next build
        os.unlink(log)
    if os.path.exists(out):
        os.unlink(out)
    if not built:
        sys.exit(f"{cxx}: {code!r}")
"""
"""The build, run by a Python of its own (argv: the module's path, the failure record's, how
long a record stands (FAILED_RETRY_S), the source, the compiler and its flags), detached from
the process that needs the reader, so that the build outlives a process that exits within its
11 s and the next one finds the module. One at a time, under a POSIX lock that dies with the
build's process (not its compiler's children), held for 10 minutes at most (a compiler still
running then is stopped), and none once the module or a standing failure record is there. Only
a compiler that ran and exited with an error is recorded; one killed by a signal, stopped at the
time limit or that could not be started is not: the next build tries again. The module and the
record appear whole (`os.replace`); the compiler's output goes to a file, not a pipe, which a
compiler's lingering child (a compile server) would keep open."""


def _standing(failed: Path) -> bool:
    """Whether the failure record `failed` is there and younger than FAILED_RETRY_S."""
    try:
        return time.time() - failed.stat().st_mtime < FAILED_RETRY_S
    except OSError:
        return False


def _build() -> Any:
    """The reader's module: from Triton's cache, else built into it by `_COMPILE` (waited for
    here). A failed build is recorded there (`_NAME.failed`, holding the compiler's output)
    and not tried again until torch, the compiler, its flags or the source change the cache key,
    the record is deleted, or it is FAILED_RETRY_S old."""
    from triton.runtime.build import platform_key
    from triton.runtime.cache import get_cache_manager
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++, clang++ or $CXX)")
    source = _SOURCE % {"header": HEADER, "name": _NAME}
    flags = _flags()
    key = hashlib.sha256("\n".join([source, cxx, *flags, torch.__version__, platform_key(), sys.version]).encode())
    cache = get_cache_manager(key.hexdigest())
    directory = Path(getattr(cache, "cache_dir", None) or Path(tempfile.gettempdir()) / f"tilecraft-{key.hexdigest()}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (_NAME + sysconfig.get_config_var("EXT_SUFFIX"))
    failed = directory / f"{_NAME}.failed"
    code = None
    if not path.exists() and not _standing(failed):
        argv = [sys.executable, "-I", "-S", "-c", _COMPILE, str(path), str(failed), str(FAILED_RETRY_S), source, cxx,
                *flags]
        code = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True).wait()
    if not path.exists():
        if _standing(failed):
            raise RuntimeError(f"its build failed (recorded in {failed}; delete it to build again): "
                               f"{failed.read_text()[-2000:]}")
        raise RuntimeError(f"its build's process exited with {code} and left no module")
    spec = importlib.util.spec_from_file_location(_NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Build:
    """The reader's build, once per process: the launcher modules waiting for it, its result."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.waiting: list[Any] = []
        self.reader: Any = None  # the reader's capsule, once built
        self.started = False

    def start(self) -> None:
        """Build it (or wait for its build) in a background thread, not in a launch."""
        self.started = True
        threading.Thread(target=self.run, name="tilecraft-tensor-reader", daemon=True).start()

    def run(self) -> None:
        try:
            capsule = _build().reader
        except Exception as exc:  # noqa: BLE001 - any failure leaves the launchers reading through Python
            capsule = None
            if knobs.TENSOR_READER.get() == "debug":
                print(f"tilecraft: no tensor reader: {type(exc).__name__}: {exc}", file=sys.stderr)
        with self.lock:
            self.reader = capsule
            self.done.set()
            for launcher in self.waiting if capsule is not None else ():
                launcher.use_reader(capsule)
            self.waiting.clear()


_BUILD = _Build()


def _after_fork() -> None:
    """In a process forked while the build was under way (a data loader's worker), which the
    build's thread did not follow: start it afresh for the launcher modules waiting. The fork
    happened under `_BUILD.lock` (`os.register_at_fork` below), so the state copied is whole."""
    global _BUILD
    old, _BUILD = _BUILD, _Build()
    if old.done.is_set():
        _BUILD.reader, _BUILD.started = old.reader, True
        _BUILD.done.set()
    elif old.started:
        _BUILD.waiting = old.waiting
        _BUILD.start()


os.register_at_fork(before=lambda: _BUILD.lock.acquire(), after_in_parent=lambda: _BUILD.lock.release(),
                    after_in_child=_after_fork)


def attach(launcher: Any, wait: bool = False) -> bool:
    """Make the launcher module `launcher` (native_launch.py's) read tensors through the reader:
    now when it is built, else once its build (started here, in the background) is done.
    `wait`: wait for the build. True when `launcher` uses the reader on return."""
    if knobs.TENSOR_READER.get() in ("0", "off"):
        return False
    with _BUILD.lock:
        if _BUILD.done.is_set():
            if _BUILD.reader is not None:
                launcher.use_reader(_BUILD.reader)
            return _BUILD.reader is not None
        _BUILD.waiting.append(launcher)
        if not _BUILD.started:
            _BUILD.start()
        build = _BUILD
    if wait:
        build.done.wait()
    return build.done.is_set() and build.reader is not None
