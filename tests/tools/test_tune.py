"""`tilecraft.tune.exhaustive_search`: it times every configuration, returns the one that is
really fastest, skips configurations that do not compile and says so when none does."""

from __future__ import annotations

import contextlib
import re
from types import SimpleNamespace

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.tune import Measurement, TuningResult, exhaustive_search
from tilecraft.tune import search as search_mod
from tilecraft.tune import timing

N = 200  # not a multiple of any tile size below: the last tile is partial


@ct.kernel
def scaled_sum(x, out, TILE: ct.Constant[int], REPS: ct.Constant[int]):
    """out = sum over REPS rounds of x * 0.5 (so REPS decides how much work the kernel does)."""
    t = ct.load(x, (ct.bid(0),), (TILE,))
    acc = ct.zeros((TILE,), ct.float32)
    for _ in range(REPS):
        acc = acc + t * 0.5
    ct.store(out, (ct.bid(0),), acc)


@pytest.fixture
def quick_tuning(monkeypatch):
    """Small sample budgets, so a test tunes in well under a second."""
    monkeypatch.setattr(search_mod, "MAX_SAMPLES", 40)
    monkeypatch.setattr(search_mod, "MAX_MEASURE_US", 3e4)


def _inputs(dev):
    x = np.random.default_rng(7).standard_normal(N).astype(np.float32)
    return x, dev.put(x)


def _use_backend(monkeypatch, backend):
    """Launches without a backend argument (as the tuner's) go to `backend`."""
    if backend != "triton":
        monkeypatch.setenv("TILECRAFT_BACKEND", backend)


def _stream(dev):
    if dev.name == "triton":
        import torch
        return torch.cuda.current_stream()
    return None


def test_picks_the_configuration_that_is_really_fastest(dev, backend, monkeypatch, quick_tuning):
    _use_backend(monkeypatch, backend)
    x_host, x = _inputs(dev)
    reps = 50_000 if backend == "triton" else 300   # a GPU needs far more to notice
    slow = SimpleNamespace(TILE=64, REPS=reps)   # the same tiles, far more arithmetic
    fast = SimpleNamespace(TILE=64, REPS=1)
    search_space = [slow, fast, SimpleNamespace(TILE=32, REPS=reps // 8)]
    result = exhaustive_search(
        search_space, _stream(dev),
        grid_fn=lambda c: (ct.cdiv(N, c.TILE),),
        kernel=scaled_sum,
        args_fn=lambda c: (x, dev.poison((N,), np.float32), c.TILE, c.REPS),
        quiet=True)
    assert isinstance(result, TuningResult) and isinstance(result.best, Measurement)
    assert result.best.config is fast
    assert result.failures == ()
    means = {id(m.config): m.mean_us for m in result.successes}
    assert len(means) == 3 and means[id(slow)] > 3 * means[id(fast)]
    assert all(m.num_samples >= search_mod.MIN_SAMPLES and m.mean_us > 0 for m in result.successes)

    out = dev.poison((N,), np.float32)   # the tuned configuration computes the right thing
    dev.launch((ct.cdiv(N, fast.TILE),), scaled_sum, (x, out, fast.TILE, fast.REPS))
    np.testing.assert_allclose(dev.get(out), x_host.astype(np.float64) * 0.5, rtol=1e-6)


@ct.kernel
def fill_tile(out, TILE: ct.Constant[int]):
    ct.store(out, (ct.bid(0),), ct.full((TILE,), 3.0, ct.float32))


def test_skips_configurations_that_do_not_compile(dev, backend, monkeypatch, quick_tuning, capsys):
    _use_backend(monkeypatch, backend)
    outputs = []

    def args(tile):
        outputs.append(dev.poison((N,), np.float32))
        return outputs[-1], tile

    result = exhaustive_search([48, 16, 64], _stream(dev), lambda t: (ct.cdiv(N, t),), fill_tile, args)
    assert sorted(m.config for m in result.successes) == [16, 64]
    [(config, exc_type, message)] = result.failures
    assert config == 48 and issubclass(exc_type, ct.TileError)
    assert re.search("power of (2|two)", message) and "test_tune.py" in message   # the located compile error
    np.testing.assert_array_equal(dev.get(outputs[-1]), np.full(N, 3.0, np.float32))
    printed = capsys.readouterr().out
    assert "2 succeeded, 1 failed" in printed and "48: " in printed
    assert f"* {result.best.config}" in printed


def _fill_kernel_for(value):
    """A kernel made per configuration; value 0 makes one that refers to an undefined name."""
    if value == 0:
        @ct.kernel
        def broken(out):
            ct.store(out, (0,), ct.full((16,), no_such_name, ct.int32))  # noqa: F821
        return broken

    @ct.kernel
    def fill(out):
        ct.store(out, (0,), ct.full((16,), value, ct.int32))
    return fill


def test_kernel_made_per_configuration(dev, backend, monkeypatch, quick_tuning):
    _use_backend(monkeypatch, backend)
    outs = {v: dev.poison((16,), np.int32) for v in (0, 1, 2)}
    result = exhaustive_search([0, 1, 2], _stream(dev), lambda v: (1,), _fill_kernel_for,
                               lambda v: (outs[v],), quiet=True)
    assert sorted(m.config for m in result.successes) == [1, 2]
    [(config, exc_type, message)] = result.failures
    assert (config, exc_type) == (0, ct.TileTypeError) and "`no_such_name` is not defined" in message
    for v in (1, 2):
        np.testing.assert_array_equal(dev.get(outs[v]), np.full(16, v, np.int32))


@pytest.mark.only_backends("interpreter")
def test_no_configuration_compiles(dev, quick_tuning):
    with pytest.raises(ValueError, match=r"No valid config found in search space: all 2 configs failed"
                                         r"(.|\n)*Config: 48(.|\n)*power of (2|two)"):
        exhaustive_search([48, 96], None, lambda t: (1,), fill_tile,
                          lambda t: (dev.poison((N,), np.float32), t), quiet=True)


def test_empty_search_space_and_timeouts_are_refused():
    with pytest.raises(ValueError, match="Search space is empty"):
        exhaustive_search([], None, lambda t: (1,), fill_tile, lambda t: ())
    with pytest.raises(ct.TileUnsupportedFeatureError, match="single_run_timeout_sec"):
        exhaustive_search([16], None, lambda t: (1,), fill_tile, lambda t: (), single_run_timeout_sec=5.0)


@ct.kernel
def add_one(x, TILE: ct.Constant[int]):
    ct.store(x, (ct.bid(0),), ct.load(x, (ct.bid(0),), (TILE,)) + 1)


@pytest.mark.only_backends("interpreter")
def test_each_launch_gets_fresh_arguments_and_hints_apply(quick_tuning, monkeypatch):
    x = np.zeros(64, np.float32)
    made, kernels = [], []
    real_launch = search_mod.launch

    def spy(stream, grid, kernel, args):
        kernels.append(kernel)
        real_launch(stream, grid, kernel, args)
    monkeypatch.setattr(search_mod, "launch", spy)

    def args(tile):
        made.append(x.copy())
        return made[-1], tile

    result = exhaustive_search([16, 32], None, lambda t: (64 // t,), add_one, args,
                               hints_fn=lambda t: {"occupancy": 2, "num_ctas": t // 16}, quiet=True)
    assert np.all(x == 0)                       # the caller's array was never handed to a launch
    assert all(np.all(a == 1) for a in made)    # every launch had its own copy, written once
    assert len(made) == len(kernels) == sum(m.num_samples for m in result.successes) \
        + 2 * search_mod.WARMUP_RUNS
    by_ctas = {k.options["num_ctas"]: k for k in kernels}
    assert set(by_ctas) == {1, 2} and all(k.options["occupancy"] == 2 for k in kernels)
    assert len({id(k) for k in kernels}) == 2   # one kernel (and compile cache) per distinct hints
    assert all(k is not add_one for k in kernels)


class _ScriptedClock:
    """Times from a script per configuration (the kernels still run, on the interpreter)."""

    def __init__(self, script):
        self.script, self.used = script, {}

    def time_us(self, runs):
        for run in runs:
            run()
        return [self.next() for _ in runs]

    def next(self):
        times = self.script[self.current]
        i = self.used.get(self.current, 0)
        self.used[self.current] = i + 1
        return times[min(i, len(times) - 1)]

    def finish(self):
        pass


@pytest.mark.only_backends("interpreter")
def test_refines_the_close_contenders_and_drops_the_clearly_slower(monkeypatch):
    script = {
        16: [10.0],                                   # steady: converges at once
        32: [9.0, 14.0, 8.0, 13.0, 9.5] + [10.6] * 500,   # noisy at first, then steadily slower
        64: [50.0, 51.0, 50.0, 51.0, 50.0, 90.0],     # clearly slower: never refined
    }
    clock = _ScriptedClock(script)

    def clock_for(kernel, args, stream, clocks):
        clock.current = args[1]
        return clock
    monkeypatch.setattr(search_mod, "clock_for", clock_for)
    result = exhaustive_search([64, 32, 16], None, lambda t: (1,), add_one,
                               lambda t: (np.zeros(64, np.float32), t), quiet=True)
    got = {m.config: m for m in result.successes}
    assert result.best.config == 16 and got[16].mean_us == 10.0 and got[16].error_margin_us == 0.0
    assert got[64].num_samples == search_mod.MIN_SAMPLES        # 50.5 +- 0.5 cannot beat 10
    assert got[32].num_samples > search_mod.MIN_SAMPLES          # it could, until refined
    assert got[32].mean_us > 10.0


def test_summary_hides_the_middle_of_long_tables():
    ms = [Measurement(config=i, mean_us=float(i), num_samples=5, error_margin_us=0.1) for i in range(1, 21)]
    text = TuningResult(best=ms[0], successes=ms, failures=((0, ValueError, "x" * 80 + "\nmore"),)).summary()
    lines = text.splitlines()
    assert lines[0] == "20 succeeded, 1 failed" and lines[1].startswith("* 1 ")
    assert "    ... 8 more not shown" in lines and any(line.startswith("  20") for line in lines)
    assert lines[-1] == "    0: ValueError: " + "x" * 57 + "..."


@pytest.mark.only_backends("triton")
def test_cuda_clock_flushes_l2_and_times_on_the_stream(dev):
    import torch
    stream = torch.cuda.Stream()
    clock = timing.CudaClock(stream, torch.cuda.current_device())
    assert clock.flush.numel() >= 2 * torch.cuda.get_device_properties(0).L2_cache_size
    a = torch.ones(1 << 22, device="cuda")
    times = clock.time_us([lambda: a.mul_(2.0)] * 3)
    assert len(times) == 3 and all(t > 0 for t in times)
    assert torch.all(a == 8.0)


class _GpuStream:
    """A stand-in torch stream of CUDA device `device`: the devices whose streams it waited for."""

    def __init__(self, device: int) -> None:
        self.device, self.waited = device, []

    def wait_stream(self, other: "_GpuStream") -> None:
        self.waited.append(other.device)

    def synchronize(self) -> None:
        pass


class _Event:
    def __init__(self, enable_timing: bool) -> None:
        pass

    def record(self, stream: _GpuStream) -> None:
        pass

    def elapsed_time(self, end: "_Event") -> float:
        return 0.001


def test_cuda_clock_times_on_the_arrays_device(monkeypatch):
    """With cuda:0 current and the arrays on cuda:1 (where their launches run: runtime/devices.py):
    a raw handle, or no stream, is taken as cuda:1's, and the runs wait for cuda:1's current
    stream, where the arguments were made. Once both were cuda:0's: the events timed cuda:0's
    stream, not the kernels, and the kernels could run before their arguments were written.
    torch's CUDA calls replaced by CPU stand-ins that say which device they were asked about."""
    torch = pytest.importorskip("torch")

    def stream_of(device=None):
        return _GpuStream(0 if device is None else device)  # cuda:0 is current
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *shape, device=None, **kw: empty(*shape, **kw))
    monkeypatch.setattr(torch.cuda, "current_stream", stream_of)
    monkeypatch.setattr(torch.cuda, "ExternalStream", lambda handle, device=None: stream_of(device))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(L2_cache_size=1024))
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    for stream in (0, None):
        clock = timing.CudaClock(stream, 1)
        assert clock.time_us([lambda: None]) == [1.0]
        assert clock.stream.device == 1 and clock.stream.waited == [1]


@pytest.mark.only_backends("interpreter")
def test_progress_bar_on_stderr(dev, quick_tuning, capsys):
    """A bar redrawn per configuration (best so far, failures), on its own line; none by default
    where stderr is not a terminal."""
    def args(tile):
        return dev.poison((N,), np.float32), tile
    exhaustive_search([16, 48, 64], None, lambda t: (ct.cdiv(N, t),), fill_tile, args, quiet=True, progress=True)
    err = capsys.readouterr().err
    frames = err.rstrip("\n").split("\r")[1:]
    assert [f.split("]")[1].split()[0] for f in frames] == ["1/3", "2/3", "3/3"]
    assert frames[0].startswith("tuning fill_tile [" + "#" * 6 + "-" * 14 + "] 1/3 configs  best ")
    assert "(1 failed)" in frames[2] and err.endswith("\n")
    exhaustive_search([16], None, lambda t: (ct.cdiv(N, t),), fill_tile, args, quiet=True)
    assert capsys.readouterr().err == ""


@pytest.mark.only_backends("interpreter")
def test_results_kept_on_disk_for_the_same_search(dev, quick_tuning, monkeypatch, tmp_path, capsys):
    """cache=True: a later search with equal configurations (new objects), kernels, grids and
    arguments returns the stored result untimed, configurations and failures mapped onto its own;
    a changed argument shape, or configurations shown with their address, are timed again."""
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))

    def search(configs, n=N, **kw):
        return exhaustive_search(configs, None, lambda c: (ct.cdiv(n, c.TILE),), fill_tile,
                                 lambda c: (dev.poison((n,), np.float32), c.TILE), cache=True, **kw)

    first = search([SimpleNamespace(TILE=16), SimpleNamespace(TILE=48), SimpleNamespace(TILE=64)], quiet=True)
    assert len(list((tmp_path / "tune").rglob("*.json"))) == 1
    timed = []
    real = search_mod._search
    monkeypatch.setattr(search_mod, "_search", lambda *a: timed.append(a) or real(*a))
    again = [SimpleNamespace(TILE=16), SimpleNamespace(TILE=48), SimpleNamespace(TILE=64)]
    second = search(again)
    assert timed == [] and "(from the tuning cache, untimed: " in capsys.readouterr().out
    assert [m.mean_us for m in second.successes] == [m.mean_us for m in first.successes]
    assert second.best.config is again[(16, 48, 64).index(first.best.config.TILE)]
    [(config, exc_type, message)] = second.failures
    assert config is again[1] and exc_type is first.failures[0][1] and message == first.failures[0][2]
    search(again, n=N + 1, quiet=True)  # another shape: another search
    assert len(timed) == 1

    class Opaque:  # shown as <... object at 0x...>: no key another process would compute
        TILE = 16
    search([Opaque()], quiet=True)
    assert len(timed) == 2 and len(list((tmp_path / "tune").rglob("*.json"))) == 2  # (N and N + 1)


@pytest.mark.only_backends("interpreter")
def test_the_cache_key_covers_every_configurations_kernel(dev):
    """Kernels made per configuration are each part of the key, not only the first: two searches
    whose second kernel differs (its closure's value) are two searches."""
    from tilecraft.tune.cache import search_key
    out = dev.poison((16,), np.int32)

    def key(values):
        kernels = [_fill_kernel_for(v) for v in values]
        return search_key(kernels, ["a", "b"], [(1,), (1,)], [{}, {}], lambda c: (out,), None)
    assert key((1, 2)) == key((1, 2)) and key((1, 2)) != key((1, 3))
