"""The C++ tensor reader's build (backends/triton/tensor_reader.py `_build`): once per machine,
under a file lock in Triton's cache. Its reads are tested through the quick launcher
(test_native_quick.py)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecraft.backends.triton import tensor_reader  # noqa: E402

if not (os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")):
    pytest.skip("no C++ compiler for the tensor reader", allow_module_level=True)


def test_a_process_forked_during_the_build_does_not_keep_its_lock(tmp_path, monkeypatch):
    """A process forked while the reader is being built (a data loader's worker, say) and living
    on must not keep the build lock: a process that started building at the same time would
    wait for that worker to exit (with a flock, which forked children share, it did)."""
    built = tensor_reader._build().__file__  # the reader as built here (once per machine), the stand-in compiler's output
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    run, workers = subprocess.run, []

    def compiler(cmd, **kwargs):
        """g++ standing in: forks a worker that lives on, then writes the reader."""
        if "-o" not in cmd:
            return run(cmd, **kwargs)
        workers.append(multiprocessing.get_context("fork").Process(target=threading.Event().wait, args=(120,)))
        workers[-1].start()
        shutil.copy(built, cmd[cmd.index("-o") + 1])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(tensor_reader.subprocess, "run", compiler)
    try:
        tensor_reader._build()
        assert workers and workers[0].is_alive()
        next(tmp_path.rglob(f"{tensor_reader._NAME}*.so")).unlink()  # built again, as a process waiting for the lock would
        again = threading.Thread(target=tensor_reader._build, daemon=True)
        again.start()
        again.join(20)
        assert not again.is_alive(), "the build lock is held by a process forked during the build"
    finally:
        for worker in workers:
            worker.kill()
            worker.join()
