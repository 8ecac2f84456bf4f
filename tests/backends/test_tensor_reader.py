"""The C++ tensor reader's build (backends/triton/tensor_reader.py `_build`): once per machine, by
a process of its own under a file lock in Triton's cache, a failure recorded. Each test builds
into a cache of its own with a stand-in compiler (a shell script counting its runs, copying the
reader as built here), so only the first build here runs g++. Its reads are tested through the
quick launcher (test_native_quick.py)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecraft.backends.triton import tensor_reader  # noqa: E402

if not (os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")):
    pytest.skip("no C++ compiler for the tensor reader", allow_module_level=True)

SUFFIX = tensor_reader._NAME + "*.so"


@pytest.fixture(scope="module")
def built():
    """The reader as built here (once per machine, by g++)."""
    return tensor_reader._build().__file__


@pytest.fixture
def compiler(built, tmp_path, monkeypatch):
    """make(body): $CXX becomes a shell script that logs each run to `runs` and then runs `body`
    (`$out`: the file to write, `$built`: the reader as built here); a cache of its own. Returns
    (make, runs, cache)."""
    cache, runs = tmp_path / "cache", tmp_path / "runs"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))

    def make(body: str) -> None:
        script = tmp_path / "cxx"
        script.write_text(f'#!/bin/sh\necho run >> "{runs}"\nbuilt="{built}"\n'
                          'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n' + body + "\n")
        script.chmod(0o755)
        monkeypatch.setenv("CXX", str(script))

    return make, runs, cache


def _runs(runs) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    """`code` run by a new Python, with this process's environment and `env`."""
    prelude = "import types\nfrom tilecraft.backends.triton import tensor_reader\n"
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_a_build_outlives_the_process_that_started_it(compiler):
    """A process that exits while the reader is being built (a short run on a new machine) leaves
    the build running: the next process finds the reader and builds nothing (a build in the
    exiting process's thread died with it, and each short run started another)."""
    make, runs, cache = compiler
    go = runs.with_name("go")  # the compiler finishes once the test says, after the process has exited
    make(f'i=0; while [ ! -e "{go}" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done; cp "$built" "$out"')
    started = _python(f"import os, time\ntensor_reader.attach(types.SimpleNamespace(use_reader=print))\n"
                      f"while not os.path.exists({str(runs)!r}): time.sleep(0.02)")  # exits once g++ runs
    assert started.returncode == 0, started.stderr
    assert not list(cache.rglob(SUFFIX)), "the build was over before the process exited"
    go.touch()
    deadline = time.monotonic() + 30
    while not list(cache.rglob(SUFFIX)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(cache.rglob(SUFFIX)), "the build died with the process that started it"
    assert tensor_reader._build().reader is not None
    assert _runs(runs) == 1


def test_a_failed_build_is_recorded_and_not_tried_again(compiler):
    """A failed build (no torch headers, say) is recorded in the cache: a later process does not
    run the compiler again, and TILECRAFT_TENSOR_READER=debug prints the recorded reason and
    where to delete it; once deleted, or a day old, the record no longer stands and the next
    build runs the compiler again."""
    make, runs, cache = compiler
    make('echo "torch/extension.h: No such file or directory" >&2; exit 1')
    with pytest.raises(RuntimeError, match="No such file or directory"):
        tensor_reader._build()
    later = _python("print(tensor_reader.attach(types.SimpleNamespace(use_reader=print), wait=True))",
                    TILECRAFT_TENSOR_READER="debug")
    assert later.stdout.strip() == "False", later.stderr
    assert "torch/extension.h: No such file or directory" in later.stderr
    assert "delete it to build again" in later.stderr
    assert _runs(runs) == 1
    (record,) = cache.rglob("*.failed")
    assert str(record) in later.stderr
    record.unlink()
    with pytest.raises(RuntimeError, match="No such file or directory"):
        tensor_reader._build()
    assert _runs(runs) == 2
    assert not list(cache.rglob("*.tmp"))
    # a record a day old no longer stands (a compiler killed for memory exits 1 like a real error)
    make('echo "fatal error: Killed signal terminated program cc1plus" >&2; exit 1')
    old = time.time() - tensor_reader.FAILED_RETRY_S - 60
    os.utime(record, (old, old))
    with pytest.raises(RuntimeError, match="Killed signal"):
        tensor_reader._build()
    assert _runs(runs) == 3


def test_a_killed_compiler_is_not_recorded(compiler):
    """A compiler killed by a signal (or stopped at the time limit, or not started) gave no
    verdict on the source: nothing is recorded, and the next build runs it again (it was once
    recorded as a failure, and no process built the reader until the record was deleted)."""
    make, runs, cache = compiler
    make("kill -9 $$")
    with pytest.raises(RuntimeError, match="left no module"):
        tensor_reader._build()
    assert not list(cache.rglob("*.failed")) and not list(cache.rglob("*.tmp"))
    make('cp "$built" "$out"')
    assert tensor_reader._build().reader is not None
    assert _runs(runs) == 2


def test_a_compilers_lingering_child_holds_up_nothing(compiler, tmp_path):
    """A child the compiler leaves running (a compile server, which keeps its output open) holds
    neither the build (its output read through a pipe would wait for it) nor the build's lock."""
    make, runs, cache = compiler
    pids = tmp_path / "pids"
    make(f'cp "$built" "$out"; sleep 60 & echo $! >> "{pids}"')
    try:
        for _ in range(2):
            build = threading.Thread(target=tensor_reader._build, daemon=True)
            build.start()
            build.join(20)
            assert not build.is_alive(), "the build waits for its compiler's child"
            next(cache.rglob(SUFFIX)).unlink()  # built again, as on a new machine
        assert _runs(runs) == 2
    finally:
        for pid in pids.read_text().split() if pids.exists() else ():
            os.kill(int(pid), signal.SIGKILL)


class _Launcher:
    """A launcher module standing in: the readers it was given."""

    def __init__(self) -> None:
        self.readers: list = []

    def use_reader(self, reader) -> None:
        self.readers.append(reader)


def _forked(launcher: _Launcher) -> None:
    """In a process forked during the build: exits 0 once `launcher` got the reader."""
    tensor_reader._BUILD.done.wait(20)
    os._exit(0 if launcher.readers and launcher.readers[-1] is not None else 1)


def test_a_process_forked_during_the_build_gets_the_reader(compiler, monkeypatch):
    """A process forked while the reader is being built (a data loader's worker) gets it too
    (the build's thread does not follow a fork: its launchers read through Python for good)."""
    make, runs, _ = compiler
    make('sleep 2; cp "$built" "$out"')
    monkeypatch.setattr(tensor_reader, "_BUILD", tensor_reader._Build())
    launcher = _Launcher()
    assert not tensor_reader.attach(launcher)
    deadline = time.monotonic() + 20
    while not runs.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    worker = multiprocessing.get_context("fork").Process(target=_forked, args=(launcher,))
    worker.start()
    worker.join(30)
    assert worker.exitcode == 0, "the forked process did not get the reader"
    assert tensor_reader.attach(_Launcher(), wait=True) and launcher.readers[-1] is not None
    assert _runs(runs) == 1
