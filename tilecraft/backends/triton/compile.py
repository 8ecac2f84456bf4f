"""From generated source to a launchable kernel: write, import, wrap, launch, report errors.

The source goes to `<cache>/triton-src/<kernel>_<hash>.py` (written atomically), followed by a
last line `# tilecraft-checksum: <sha256 of file name and content>` (last, so the generated line
numbers stay those of `LoweredKernel.source`). Before a file is used its whole text must equal
what this process generated, checksum included: an edited, truncated, garbage or empty file is
rewritten from the fresh source with a one-line RuntimeWarning, never run. The module is
executed from that checked text (not through the import system's bytecode cache), once per
mode. Its `@triton.jit` functions are re-wrapped for the mode asked for, whatever
`TRITON_INTERPRET` says: `JITFunction` for the GPU, `InterpretedFunction` for
Triton's CPU interpreter, so both can live in one process. Launching only flattens the
arguments (arrays to pointer, shapes, strides) and calls the Triton function's `run`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import linecache
import os
import re
import sys
import tempfile
import threading
import traceback
import warnings
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.errors import CompilationError
from triton.runtime.errors import InterpreterError, OutOfResources
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from ... import knobs
from ...errors import Location, TileAssertionError, TileCompilerExecutionError
from ..base import LastLaunch
from . import fitting, occupancy
from . import interpret_workarounds as workarounds
from . import printing
from .launching import (DirectLauncher, baked_exprs, baked_flatten, ensure_allocator, expanded_launch,
                        grid_loop_launch, host_descriptors_allowed, launch_lambda, sm_slots, stream_context)
from .emitter import Target
from .lower import LoweredKernel

GPU_MATH_OPTIONS = {"enable_reflect_ftz": False, "enable_fp_fusion": False}
"""Triton options of every kernel compiled for an NVIDIA GPU (Triton and Gluon backends): link
libdevice with nvvm-reflect __CUDA_FTZ=0, not Triton's default 1, so float32 math keeps
subnormal operands and results as the NumPy and Triton CPU interpreters do. With 1, log, log2,
sin, cos, tan, sinh, tanh, atan2, pow, floor, ceil, rsqrt and exp2 compiled to their .ftz paths
(fma.rn.ftz, cvt.rmi.ftz, ex2.approx.ftz...; sm_90 PTX, Triton 3.6). Only libdevice reads the
switch: other code compiles the same. The .ftz left in libdevice (ex2/rcp.approx.ftz in tan,
sinh, cosh, tanh, pow) only sees normal numbers. `flush_to_zero` ops flush explicitly
(compute.py), never through this switch. `enable_fp_fusion` off: LLVM does not fuse a
multiplication and an addition into one FMA where it sees fit (on by default, it did for every
float dtype), which the CPU backends never did; the fusions the language makes are the IR's
`Fma` ops (passes/contract.py), computed exactly by every backend. jax_triton can pass neither
(tilecraft/jax/gpu.py)."""

_lock = threading.Lock()
TRITON_LANGUAGE = threading.RLock()
"""Held while Triton's language module is in use: while a kernel runs under Triton's CPU
interpreter, which rebinds triton.language's functions for the length of a run
(interpreter._patch_lang) and restores them after, and while Triton's JIT or compiler runs for a
GPU, which looks those functions up. Two threads interpreting at once broke each other's kernels
("Did you forget to add @triton.jit ?"), and a GPU compile beside an interpreted run failed as if
tilecraft had generated bad code, so they take turns. Cached launches (launching.py's launchers)
neither compile nor interpret, and do not take it."""
_modules: dict[str, ModuleType] = {}  # module name -> the module (see load_module)
_scratch_dir: list[Path] = []


class _WgmmaOff:
    """A context that holds TRITON_LANGUAGE and sets Triton's `DISABLE_MMA_V3` meanwhile, for
    the kernels `heuristics.mma_sync_only` picks: Triton reads that switch while it compiles
    (its AccelerateMatmul pass) and keys its disk cache by it; its in-memory cache of a JIT
    function is not keyed by it, so the kernel compiled under the switch is the one every later
    launch finds. Every tilecraft build holds TRITON_LANGUAGE, so none sees the switch but these.
    Re-entrant, as the lock is: each exit restores what its own entry found."""

    def __init__(self) -> None:
        self._found: list[str | None] = []  # per entry not yet exited, the switch's value before it

    def __enter__(self) -> None:
        TRITON_LANGUAGE.acquire()
        self._found.append(os.environ.get("DISABLE_MMA_V3"))
        os.environ["DISABLE_MMA_V3"] = "1"

    def __exit__(self, *exc: object) -> None:
        found = self._found.pop()
        if found is None:
            del os.environ["DISABLE_MMA_V3"]
        else:
            os.environ["DISABLE_MMA_V3"] = found
        TRITON_LANGUAGE.release()


def source_dir() -> Path:
    """Where generated sources live: `<cache dir>/triton-src`, or a private temporary directory
    when the on-disk cache is off (Triton needs the source in a file either way)."""
    root = knobs.cache_dir()
    if root is None:
        with _lock:
            if not _scratch_dir:
                _scratch_dir.append(Path(tempfile.mkdtemp(prefix="tilecraft-triton-src-")))
        return _scratch_dir[0]
    path = root / "triton-src"
    path.mkdir(parents=True, exist_ok=True)
    return path


SOURCE_FORMAT = "tilecraft-triton-src-2"  # in every file name's hash: older files are never read
CHECKSUM_PREFIX = "# tilecraft-checksum: "


def _checksum(stem: str, content: str) -> str:
    """SHA-256 of a source file's full key (its name: kernel and content hash) and content."""
    return hashlib.sha256(stem.encode() + b"\0" + content.encode()).hexdigest()


def source_file(name: str, source: str) -> tuple[str, str]:
    """(file stem, full file text) of generated `source` for kernel `name`."""
    content = source if source.endswith("\n") else source + "\n"
    digest = hashlib.sha256(f"{SOURCE_FORMAT}\0{content}".encode()).hexdigest()[:32]
    stem = f"{name}_{digest}"
    return stem, f"{content}{CHECKSUM_PREFIX}{_checksum(stem, content)}\n"


def source_intact(path: Path) -> bool:
    """Whether the generated source file at `path` matches the checksum on its last line (for
    tools that check the cache without regenerating; loading compares the whole text)."""
    try:
        text = path.read_bytes().decode()
    except (OSError, UnicodeDecodeError):
        return False
    content, _, last = text.removesuffix("\n").rpartition("\n")
    content += "\n"
    digest = hashlib.sha256(f"{SOURCE_FORMAT}\0{content}".encode()).hexdigest()[:32]
    return (last.startswith(CHECKSUM_PREFIX) and text.endswith("\n") and path.stem.endswith(f"_{digest}")
            and last[len(CHECKSUM_PREFIX):] == _checksum(path.stem, content))


def _write(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (temporary file + rename: readers never see a partial
    file, and concurrent writers of one name write the same text)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_source(name: str, source: str) -> Path:
    """The file holding `source` (see `source_file`), written if missing; an existing file whose
    text differs in any byte (edited, truncated, garbage, empty) is damaged: it is rewritten from
    `source` with a one-line RuntimeWarning, so it never runs."""
    stem, text = source_file(name, source)
    path = source_dir() / f"{stem}.py"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raw = None
    except OSError as exc:  # unreadable: replace it like a damaged one
        raw = str(exc).encode()
    expected = text.encode()
    if raw is not None and raw != expected:
        why = "empty" if not raw else "truncated" if expected.startswith(raw) else "checksum mismatch"
        warnings.warn(f"tilecraft: discarding damaged cache entry {path} ({why}); writing it again from the "
                      f"generated source", RuntimeWarning, stacklevel=2)
    if raw != expected:
        with contextlib.suppress(OSError):  # not writable: the checked text still runs (see _load)
            _write(path, text)
    return path


def load_module(path: Path, modname: str, name: str, source: str,
                prepare: Callable[[ModuleType], None] = lambda module: None) -> ModuleType:
    """The module `modname` running the generated `source` of kernel `name`, written at `path`
    by `write_source`: made once per process (`prepare` adjusts it before anyone else sees it).
    It runs the text `write_source` checked, not whatever is on disk by now nor a cached .pyc;
    Triton reads function sources through linecache, so it sees that text too (an entry without
    mtime is never re-read from disk by linecache.checkcache)."""
    with _lock:
        module = _modules.get(modname)
        if module is None:
            _, text = source_file(name, source)
            spec = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(spec)
            linecache.cache[str(path)] = (len(text), None, text.splitlines(keepends=True), str(path))
            exec(compile(text, str(path), "exec"), module.__dict__)  # noqa: S102 - our own generated code
            prepare(module)
            sys.modules[modname] = module
            _modules[modname] = module
    return module


def _load(path: Path, lowered: LoweredKernel, interpret: bool) -> Any:
    """Import the module at `path` (once per mode) and return its kernel, wrapped for the mode."""
    wrap = InterpretedFunction if interpret else JITFunction

    def wrap_functions(module: ModuleType) -> None:
        for name in lowered.helpers:
            setattr(module, name, wrap(getattr(module, name).fn))
        # the grid sizes of a grid-loop kernel vary between launches of one compiled kernel
        kernel = wrap(getattr(module, lowered.name).fn, do_not_specialize=list(lowered.grid_params))
        setattr(module, lowered.name, kernel)
    modname = f"tilecraft_triton_{path.stem}_{'interp' if interpret else 'gpu'}"
    return getattr(load_module(path, modname, lowered.name, lowered.source, wrap_functions), lowered.name)


def list_tables(arrays: Sequence[torch.Tensor], index64: bool) -> tuple[torch.Tensor, ...]:
    """Device tables of a list argument: addresses (int64), shapes and strides (one row per
    array) on the arrays' device; the kernel reads element i's from row i."""
    if arrays[0].is_cuda and torch.cuda.is_current_stream_capturing():
        raise RuntimeError("List argument in CUDAGraph isn't supported yet: each launch copies a table of the "
                           "arrays' addresses to the device, which a captured graph would not do again")
    device = arrays[0].device
    index = torch.int64 if index64 else torch.int32
    ptrs = torch.tensor([a.data_ptr() for a in arrays], dtype=torch.int64)
    shapes = torch.tensor([list(a.shape) for a in arrays], dtype=index)
    strides = torch.tensor([list(a.stride()) for a in arrays], dtype=index)
    return tuple(t.to(device) for t in (ptrs, shapes, strides))  # blocking: ready before the launch


INTERPRET_PROGRAMS = 3  # programs a grid-loop kernel runs on under the interpreter


class TritonKernel:
    """A compiled tile kernel: `launch(grid, args, stream)`; `source` is the generated code.

    `lower_for(target)` lowers the kernel's IR for a target. The kernel starts from `target`;
    when Triton cannot build that schedule for the GPU (out of shared memory, or its compiler
    fails: see fitting.py) it lowers the kernel again for the next, more modest schedule and
    retries, before anything has run. `fallbacks` lists what was given up, and why, in order.
    A kernel that makes tensor descriptors runs some launches in its host-descriptor variant
    (`host_descriptor_kernel`) unless `host_variants` is False (staged kernels: their launches
    take the full path every time, where host descriptors cost more than they save). A
    `dependent` kernel launches as a programmatic dependent launch every time (Triton's
    `launch_pdl`: split-K's FINISH, which waits for PARTIAL's grid itself, passes/split_k.py).
    """

    def __init__(self, lower_for: Callable[[Target], LoweredKernel], target: Target, interpret: bool,
                 host_variants: bool = True, dependent: bool = False) -> None:
        self._lower_for = lower_for
        self.interpret = interpret
        self._host_variants = host_variants  # may launch its host-descriptor variant
        self._dependent = dependent
        self.fallbacks: list[tuple[str, str]] = []  # (what was given up, why)
        self._slots: dict[int, int] = {}  # grid-loop kernels: device -> programs it runs at once
        self._small: TritonKernel | None = None  # grid-loop kernels: the variant for small grids
        self._host: TritonKernel | None = None  # `host_descriptor_kernel`
        self._last_run = LastLaunch()  # grid-loop kernels: the last launch's grid, for `specialize`
        self._planned = target  # the schedule as planned, before any refit
        self._adopt(target, lower_for(target))

    def _adopt(self, target: Target, lowered: LoweredKernel) -> None:
        """Use `lowered` (the kernel lowered for `target`) from now on."""
        self.target = target
        self.lowered = lowered
        self.source = lowered.source
        self.path = write_source(lowered.name, lowered.source)
        self.config = lowered.config
        self._fn = _load(self.path, lowered, self.interpret)
        self._flatten = launch_lambda(lowered.flatten, list_tables=list_tables)
        self._options = dict(lowered.config.options, sanitize_overflow=False, **GPU_MATH_OPTIONS)
        self._building = _WgmmaOff() if lowered.config.mma_sync else TRITON_LANGUAGE  # Triton's builds
        if lowered.has_assert:
            self._options["debug"] = True
        if self._dependent:
            self._options["launch_pdl"] = True
        self._descriptors = lowered.uses_descriptors and not self.interpret
        self._slots.clear()

    def _refit(self, exc: BaseException) -> bool:
        """After `exc` from building the kernel: adopt the next schedule and return True, or return
        False when `exc` is not about the schedule not fitting; raise a located error when no
        schedule is left."""
        if not fitting.is_unfit(exc):
            return False
        lowered = self.lowered
        used = fitting.Used(lowered.depth, lowered.grid_loop, lowered.uses_descriptors,
                            lowered.config.options.get("num_ctas", 1), lowered.flattened)
        found = fitting.next_schedule(self.target, exc, used)
        if found is None:
            tried = [step for step, _ in self.fallbacks]
            raise fitting.unfit_error(lowered.name, exc, tried, lowered.staged, lowered.loc) from exc
        step, target = found
        self.fallbacks.append((step, f"the schedule before it {fitting.describe_failure(exc)}"))
        self._adopt(target, self._lower_for(target))
        return True

    def _recover(self, exc: Exception, triton_errors: tuple[type[BaseException], ...]) -> None:
        """After `exc` from building or launching: return to retry when the schedule was refitted
        (see `_refit`); otherwise raise `exc` as a located tile error if it is one of Triton's
        `triton_errors`, else as it is."""
        if self._refit(exc):
            return
        if isinstance(exc, triton_errors):
            raise self._translate(exc) from exc
        raise exc

    def small_grid_kernel(self) -> "TritonKernel | None":
        """The one-program-per-block variant of a grid-loop kernel (see `grid_loop_launch`;
        made on first use). It starts from the schedule as planned, not from this kernel's
        refits: what the grid loop's buffers cost may fit without them. H200, the staged tf32
        kernel of 128x256x32 tiles, whose flattened grid loop keeps its pipeline buffers through
        the 128 KiB of each tile's epilogue and so runs 2 stages: on 2048^3 (128 blocks, no more
        than the SMs) 0.59x torch with the refit's 2 stages, 0.71x with the 3 planned
        (merge-probe-h200-2026-12-03-h.json)."""
        if self._small is None and self.lowered.grid_loop:
            self._small = TritonKernel(self._lower_for, replace(self._planned, grid_loop=False), self.interpret,
                                       host_variants=self._host_variants, dependent=self._dependent)
        return self._small

    def host_descriptor_kernel(self) -> "TritonKernel | None":
        """The variant that takes its tensor descriptors from the host (`Target.host_descriptors`)
        of a kernel that makes them (made on first use; None for other kernels). It runs every
        launch of a kernel that runs one program per block, and every launch that runs a
        grid-loop kernel's loop, where each array has host descriptors (`host_descriptors_allowed`):
        its programs then no longer each write and fence their own descriptors, and cached
        launches take the C quick path, each map made once per array address (the kernel's own
        launches allocate the descriptors' scratch memory through Triton's launcher). H200, TC3
        (tf32 1000x500x700, 32x32x32 tiles, 512 blocks): 0.60 -> 0.73x torch on the GPU, host
        time per cached launch 26.4 -> 9.2 us (`tc3-probe-h200-2026-12-02-g.json`,
        `launch-parts-h200-2026-12-02-d.log`); cuTile's attention sample, 64x128 tiles: 0.56 ->
        0.63x cuDNN (attention-probe-h200-2026-12-01-c.json); the MatMul sample at
        4000x3000x2000 bf16 (grid loop): 0.812 -> 0.833-0.839x torch
        (matmul-probe-h200-2026-12-01-c.json); all in benchmarks/results."""
        if self._host is None and self._may_take_host_descriptors(None):
            self._host = TritonKernel(self._lower_for, replace(self.target, host_descriptors=True), self.interpret,
                                      dependent=self._dependent)
        return self._host

    def variant_for(self, args: Sequence[Any]) -> "TritonKernel":
        """The kernel every launch with `args` runs: a one-program-per-block kernel's
        host-descriptor variant where `args` may take it, else this one (a grid-loop kernel's
        choice depends on each launch's grid)."""
        if not self.lowered.grid_loop and self._may_take_host_descriptors(args):
            return self.host_descriptor_kernel()
        return self

    def _may_take_host_descriptors(self, args: Sequence[Any] | None) -> bool:
        """Whether this kernel has a host-descriptor variant, that `args` may launch (None: any)."""
        lowered = self.lowered
        return (self._host_variants and lowered.uses_descriptors and not self.target.host_descriptors
                and (args is None or host_descriptors_allowed(args, lowered.descriptor_arrays)))

    def _host_variant_for(self, grid: tuple[int, int, int], args: Sequence[Any], flat: tuple) -> "TritonKernel | None":
        """The host-descriptor variant when a launch of `grid` with `args` (`flat`: flattened)
        should run it (see `host_descriptor_kernel`)."""
        if not self._may_take_host_descriptors(args):
            return None
        runs = not self.lowered.grid_loop or self._looped(grid, flat) is not None
        return self.host_descriptor_kernel() if runs else None

    def _looped(self, grid: tuple[int, int, int], flat: tuple) -> tuple[tuple[int, int, int], tuple] | None:
        """(launch grid, Triton args) of a grid-loop kernel running `grid` through its loop, with
        the Triton arguments `flat`; None when its one-program-per-block variant should run
        `grid` (see `grid_loop_launch`). Both the choice of variant and the launch ask this."""
        return grid_loop_launch(grid, flat, self._programs(flat + grid))

    def _programs(self, flat: tuple) -> int:
        """How many programs a grid-loop kernel launches (at most; fewer when blocks are few)."""
        if self.interpret:
            return INTERPRET_PROGRAMS
        device = torch.cuda.current_device()
        if device not in self._slots:
            with self._building:
                compiled = self._fn.run(*flat, grid=(1, 1, 1), warmup=True, **self._options)
            self._slots[device] = sm_slots(compiled)
        return self._slots[device]

    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any = None, *,
               dependent: bool = False) -> None:
        """Run on `grid`; `args` in `Function.params` order (torch tensors and Python numbers).
        `dependent`: with the programmatic-dependent-launch attribute (a variant compiled with
        Triton's `launch_pdl`)."""
        self._last_run.forget()
        while True:
            try:
                self._launch(grid, args, stream, dependent)
                break
            except Exception as exc:
                self._recover(exc, (CompilationError, InterpreterError, OutOfResources))
        if self.lowered.grid_loop and not dependent:
            self._last_run.record(grid, None, args)

    def _launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any, dependent: bool) -> None:
        flat = self._flatten(*args)
        host = self._host_variant_for(grid, args, flat)
        if host is not None:
            return host.launch(grid, args, stream, dependent=dependent)
        if self.lowered.prints:
            return self._launch_printing(grid, args, flat, stream, dependent)
        self._run(grid, args, flat, stream, dependent)

    def _launch_printing(self, grid: tuple[int, int, int], args: Sequence[Any], flat: tuple, stream: Any,
                         dependent: bool) -> None:
        """A launch of a kernel with Print ops (printing.py): on `stream`, with a fresh record
        buffer; then it waits for the kernel and prints the records, as the interpreter would
        have. Under the Triton interpreter, the records of a launch that failed are printed
        too (on the GPU a failed kernel leaves nothing readable). Nothing may wait while a
        stream is captured into a CUDA graph, so such kernels cannot be captured."""
        gpu = not self.interpret
        with stream_context(stream) if gpu else contextlib.nullcontext():
            if gpu and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(f"Kernel `{self.lowered.name}` prints, which cannot be captured into a CUDA graph "
                                   f"(tilecraft prints on the host after the kernel has run)")
            device = next((a.device for a in flat if isinstance(a, torch.Tensor)),
                          torch.device("cuda", torch.cuda.current_device()) if gpu else "cpu")
            records = printing.Records(self.lowered.prints, self.lowered.name, grid, device)
            try:
                self._run(grid, args, (*flat, *records.arguments), stream, dependent)
            except BaseException:
                if not gpu:
                    records.show()
                raise
            records.show()

    def _run(self, grid: tuple[int, int, int], args: Sequence[Any], flat: tuple, stream: Any,
             dependent: bool) -> None:
        """Run with the Triton arguments `flat` (`args`: the same as the kernel's, for the
        one-program-per-block variant a grid-loop kernel may hand the launch to)."""
        if self.lowered.grid_loop:
            looped = self._looped(grid, flat)
            if looped is None:
                return self.small_grid_kernel().launch(grid, args, stream, dependent=dependent)
            grid, flat = looped
        if self.interpret:
            ctx = workarounds.device_asserts() if self.lowered.has_assert else contextlib.nullcontext()
            with TRITON_LANGUAGE, ctx:
                self._fn.run(*workarounds.float_arguments(flat), grid=grid, warmup=False)
            return
        if self._descriptors:
            ensure_allocator()
        options = dict(self._options, launch_pdl=True) if dependent else self._options
        if self.lowered.asserts:
            return self._launch_checked(grid, flat, stream, options)
        with self._building, stream_context(stream):
            self._fn.run(*flat, grid=grid, warmup=False, **options)

    def _launch_checked(self, grid: tuple[int, int, int], flat: tuple, stream: Any, options: dict[str, Any]) -> None:
        """A GPU launch of a kernel with `ct.assert_`: its stream is synchronized before the launch
        (errors of earlier work surface as they are, not blamed on this kernel) and after it, so
        a failed device-side assert raises TileAssertionError here, at the launch, rather than
        a bare CUDA error at some later call. Not while the stream is captured into a CUDA graph
        (nothing may synchronize then: a failed assert surfaces later as a plain CUDA error).

        A device-side assert traps: CUDA reports `cudaErrorAssert`, a sticky error that leaves
        the process's CUDA context unusable (all its allocations are lost; every later CUDA call
        fails; NVIDIA: the process must be terminated and relaunched). No API restores it in the
        process, so the error says so; blocks that finished before the trap may have stored
        their results, but the memory can no longer be read (see docs/testing.md)."""
        with stream_context(stream):
            current = torch.cuda.current_stream()
            capturing = torch.cuda.is_current_stream_capturing()
            if not capturing:
                try:
                    current.synchronize()
                except RuntimeError as exc:
                    exc.add_note(f"(raised before kernel `{self.lowered.name}` was launched: earlier work "
                                 f"on the GPU failed)")
                    raise
            with self._building:
                self._fn.run(*flat, grid=grid, warmup=False, **options)
            if capturing:
                return
            try:
                current.synchronize()
            except RuntimeError as exc:
                if "device-side assert" not in str(exc):
                    raise
                raise self._device_assert_error() from exc

    def _device_assert_error(self) -> TileAssertionError:
        """The error of a failed device-side assert of this kernel (which one of several the
        device printed on the process's output, with the block and thread)."""
        asserts = self.lowered.asserts
        if len(asserts) == 1:
            message, loc = asserts[0]
            text = f"Device-side assertion failed in kernel `{self.lowered.name}`" + (f": {message}" if message else "")
        else:
            listed = "; ".join(f"{m or 'Assertion failed'!r} at {at or '?'}" for m, at in asserts)
            text = (f"Device-side assertion failed in kernel `{self.lowered.name}`, one of its {len(asserts)} "
                    f"asserts (the device printed which): {listed}")
            loc = self.lowered.loc
        error = TileAssertionError(text, loc)
        error.add_note("The CUDA context of this process is now unusable (a device-side assert is a sticky CUDA "
                       "error: every later CUDA call fails); restart the process. The launch's outputs are undefined.")
        return error

    def specialize(self, args: Sequence[Any]) -> Any:
        """A launcher for every later call whose arguments match `args` in dtype, device, shape,
        strides and 16-byte alignment (the runtime's fast-path key, which decides Triton's own
        specialization too): it calls Triton's compiled launcher directly, skipping the binding,
        specialization and cache lookup `JITFunction.run` repeats on every launch. Call it after
        a normal launch with `args` (so compile and load errors surfaced there). A grid-loop
        kernel's launcher made right after a launch of `args` has a fused launch for that
        launch's grid (`DirectLauncher.fused_launch`)."""
        runtime = triton.knobs.runtime
        hooked = any(getattr(h, "calls", h) for h in (runtime.launch_enter_hook, runtime.launch_exit_hook))
        if self.interpret or hooked or self.lowered.has_assert or self.lowered.prints:
            return self  # launch hooks (profilers), device asserts and prints need Triton's full path
        variant = self.variant_for(args)
        if variant is not self:
            return variant.specialize(args)
        ran = self._last_run.take(args)
        flat = self._flatten(*args)
        baked = baked_flatten(self.lowered, args, flat)
        looped = (*flat, 1, 1, 1) if self.lowered.grid_loop else flat
        with self._building:
            compiled = self._fn.run(*looped, grid=(1, 1, 1), warmup=True, **self._options)
        expanded = expanded_launch(compiled, self.lowered, args, flat)
        fused_args = baked_exprs(self.lowered, args, flat, address="p{}")
        if not self.lowered.grid_loop:
            return DirectLauncher(compiled, baked, self._descriptors, fused_args=fused_args, expanded=expanded,
                                  shared=occupancy.shared_request(self.lowered.reread, args, compiled))
        host = (lambda: self.host_descriptor_kernel().specialize(args)) if self._may_take_host_descriptors(args) else None
        return DirectLauncher(compiled, baked, self._descriptors, self._programs(looped),
                              lambda: self.small_grid_kernel().specialize(args), host_variant=host,
                              fused_args=fused_args, expanded=expanded, grid=None if ran is None else ran[0])

    def compile_for(self, capability: int = 90, args: Sequence[Any] | None = None) -> Any:
        """Compile the GPU variant for an NVIDIA target (e.g. 90 = Hopper) without a GPU or a
        launch: a check of the generated code, or ahead-of-time use. With `args` (as for
        `launch`), integer arguments divisible by 16 are specialized as Triton does at a launch.
        A schedule that needs more shared memory than such a GPU has is refitted as at a launch.
        Returns Triton's compiled kernel (`.asm` holds ttir/ttgir/llir/ptx/cubin, and sass)."""
        while True:
            try:
                binary = self._compile_for(capability, args)
                limit = fitting.shared_memory_limit(capability)
                if binary.metadata.shared > limit:
                    raise OutOfResources(binary.metadata.shared, limit, "shared memory")
                return binary
            except Exception as exc:
                self._recover(exc, (CompilationError, OutOfResources))

    def _compile_for(self, capability: int, args: Sequence[Any] | None) -> Any:
        fn = self._fn if not self.interpret else _load(self.path, self.lowered, interpret=False)
        aligned = set(self.lowered.aligned)
        if args is not None:
            flat = self._flatten(*args)
            grid = set(self.lowered.grid_params)
            aligned |= {i for i, (name, v) in enumerate(zip(self.lowered.signature, flat))
                        if name not in grid and type(v) is int and v % 16 == 0}
        attrs = {(i,): [["tt.divisibility", 16]] for i in sorted(aligned)}
        src = ASTSource(fn, signature=dict(self.lowered.signature), attrs=attrs)
        with self._building:
            return triton.compile(src, target=GPUTarget("cuda", capability, 32), options=self._options)

    # ---- errors --------------------------------------------------------------------------------
    def _generated_line(self, exc: BaseException) -> int | None:
        """The line of the generated source where `exc` arose, if it can be told."""
        if isinstance(exc, CompilationError) and hasattr(exc.node, "lineno"):
            return self.lowered.def_line + exc.node.lineno - 1
        seen: int | None = None
        chain: BaseException | None = exc
        while chain is not None:
            for frame in traceback.extract_tb(chain.__traceback__):
                if frame.filename == str(self.path) and frame.lineno in self.lowered.line_locs:
                    seen = frame.lineno
            chain = chain.__cause__
        if seen is None:
            match = re.search(re.escape(str(self.path)) + r'":?(\d+)', str(exc))
            seen = int(match.group(1)) if match else None
        return seen

    def _translate(self, exc: BaseException) -> Exception:
        line = self._generated_line(exc)
        loc: Location | None = self.lowered.line_locs.get(line) if line else None
        cause = exc.__cause__ if isinstance(exc, InterpreterError) and exc.__cause__ else exc
        where = f"{self.path}:{line}" if line else str(self.path)
        if isinstance(cause, AssertionError):
            message = str(cause)
            if loc is None:  # the assert with this message, or the only one
                found = [a for a in self.lowered.asserts if a[0] == message] or list(self.lowered.asserts[:1])
                loc = found[0][1] if len(found) == 1 else None
            return TileAssertionError(f"Assertion failed in kernel `{self.lowered.name}` ({where})"
                                      + (f": {message}" if message else ""), loc or self.lowered.loc)
        message = (f"Triton rejected the code generated for kernel `{self.lowered.name}` "
                   f"({where}):\n{type(cause).__name__}: {cause}")
        return TileCompilerExecutionError(message, loc or self.lowered.loc)
