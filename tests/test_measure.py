"""The memory and time probes that experiments use to report cost."""

from __future__ import annotations

import pytest
import torch

from toolkit.runner import measure_memory, time_fn


def test_saved_tensor_bytes_exact_and_deduplicated():
    x = torch.randn(1000, requires_grad=True)

    def chain(n):
        def fn():
            y = x
            for _ in range(n):
                y = y.exp().log()  # exp saves its output, log saves its input: one storage
            y.sum().backward()
            return "done"

        return fn

    one, ten = measure_memory(chain(1), device="cpu"), measure_memory(chain(10), device="cpu")
    assert one.saved_tensor_bytes == 4000 and ten.saved_tensor_bytes == 40_000
    assert one.result == "done"


def test_peak_bytes_counts_live_tensors_on_cpu():
    def fn():
        a = torch.ones(250_000)  # 1 MB
        b = torch.ones(250_000)  # 1 MB, both alive
        return float((a + b).sum())

    stats = measure_memory(fn, device="cpu")
    assert 3_000_000 <= stats.peak_bytes < 4_000_000  # a, b and a + b
    assert stats.saved_tensor_bytes == 0
    assert stats.to_dict()["device"] == "cpu"


def test_no_grad_saves_nothing():
    x = torch.randn(100, requires_grad=True)

    def fn():
        with torch.no_grad():
            return x.exp().sum()

    assert measure_memory(fn, device="cpu").saved_tensor_bytes == 0


def test_time_fn_counts_calls_and_validates():
    calls = []
    stats = time_fn(lambda: calls.append(1) or len(calls), repeat=3, warmup=2, device="cpu")
    assert len(calls) == 5 and stats.repeat == 3 and stats.result == 5
    assert 0 <= stats.min <= stats.median and stats.std >= 0
    with pytest.raises(ValueError, match="time_fn: repeat must be an int >= 1, got 0"):
        time_fn(lambda: None, repeat=0)
    with pytest.raises(ValueError, match="time_fn: warmup must be an int >= 0, got -1"):
        time_fn(lambda: None, warmup=-1)


def test_saved_bytes_count_reused_addresses_again():
    # each iteration saves a fresh 4 kB tensor that is freed after its backward; whether or not
    # the allocator hands the same address to the next one, each must be counted
    x = torch.randn(1000, requires_grad=True)

    def fn():
        for _ in range(5):
            (x * 2).exp().sum().backward()

    assert measure_memory(fn, device="cpu").saved_tensor_bytes == 5 * 4000


def test_saved_peak_is_flat_when_graphs_are_freed_between_steps():
    x = torch.randn(1000, requires_grad=True)

    def steps(n):
        def fn():
            for _ in range(n):
                (x * 2).exp().sum().backward()  # each graph is freed by its backward

        return fn

    def unrolled(n):
        def fn():
            y = x
            for _ in range(n):
                y = (y * 0.5).exp()  # one graph that keeps every step
            y.sum().backward()

        return fn

    freed = [measure_memory(steps(n), device="cpu") for n in (1, 4)]
    kept = [measure_memory(unrolled(n), device="cpu") for n in (1, 4)]
    assert [m.saved_tensor_peak_bytes for m in freed] == [4000, 4000]
    assert [m.saved_tensor_bytes for m in freed] == [4000, 16_000]
    assert [m.saved_tensor_peak_bytes for m in kept] == [4000, 16_000]
