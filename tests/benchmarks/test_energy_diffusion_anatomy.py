"""``benchmarks/energy_diffusion/anatomy.py`` and ``xla_gemm_driver.py``: the products read
off profiler events, the torch program of those products, argument checks (no JAX)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def eds():
    with load_benchmark("energy_diffusion/anatomy.py", "bench_energy_diffusion_anatomy") as mod:
        yield mod


def test_scoremd_args_are_required(eds):
    with pytest.raises(SystemExit, match="both --scoremd-src and --scoremd-python"):
        eds.main([])


@pytest.fixture(scope="module")
def gemm_driver():
    with load_benchmark("energy_diffusion/xla_gemm_driver.py", "bench_xla_gemm_driver") as mod:
        yield mod


def _event(key, count, shapes, self_us=10.0):
    return SimpleNamespace(key=key, count=count, input_shapes=shapes, self_cpu_time_total=self_us)


def test_gemm_list_reads_profiler_shapes(eds):
    events = [
        _event("aten::mm", 6, [[128, 92], [92, 92]], 30.0),
        _event("aten::addmm", 3, [[92], [128, 2], [2, 92], [], []], 6.0),
        _event("aten::add", 9, [[128, 92], [128, 92]], 99.0),  # not a product
        _event("aten::mm", 0, [[1, 1], [1, 1]]),
    ]
    gemms, self_us = eds._gemm_list(events)
    assert gemms == [
        {"op": "addmm", "m": 128, "k": 2, "n": 92, "count": 3},
        {"op": "mm", "m": 128, "k": 92, "n": 92, "count": 6},
    ]
    assert self_us == 36.0
    assert [g["count"] for g in eds._per_step(gemms, 3)] == [1, 2]
    with pytest.raises(ValueError, match="whole number per step"):
        eds._per_step(gemms, 4)
    with pytest.raises(ValueError, match="unexpected input shapes"):
        eds._gemm_list([_event("aten::mm", 1, [[4, 3], [2, 5]])])


def test_torch_program_runs_every_product(eds):
    gemms = [
        {"op": "mm", "m": 4, "k": 3, "n": 5, "count": 2},
        {"op": "addmm", "m": 4, "k": 2, "n": 3, "count": 1},
    ]
    program, xs = eds._torch_program(gemms, 0)
    out = program(xs)
    assert [tuple(o.shape) for o in out] == [(4, 5), (4, 5), (4, 3)]
    a, b, c = xs[2]
    torch.testing.assert_close(out[2], a @ b + c)
    assert not torch.equal(xs[0][0], xs[1][0])  # distinct inputs per copy


def test_xla_gemm_driver_checks_its_products(gemm_driver):
    for bad in (
        "[]",
        "{}",
        '[{"op": "bmm", "m": 1, "k": 1, "n": 1, "count": 1}]',
        '[{"op": "mm", "m": 0, "k": 1, "n": 1, "count": 1}]',
        "not json",
    ):
        with pytest.raises(SystemExit):
            gemm_driver.main(["--gemms", bad])
    ok = json.dumps([{"op": "mm", "m": 2, "k": 2, "n": 2, "count": 1}])
    with pytest.raises(SystemExit, match="--repeats"):
        gemm_driver.main(["--gemms", ok, "--repeats", "0"])


def _fig(scoremd_ms, ours_ms, in_step_us, xla_us, eager_us, compiled_us):
    return {
        "scoremd_ms": scoremd_ms,
        "ours_ms": ours_ms,
        "in_step_us": in_step_us,
        "xla_us": xla_us,
        "eager_us": eager_us,
        "compiled_us": compiled_us,
        "n_products": 19,
    }


def test_anatomy_rows_are_medians_over_rounds(eds):
    rounds = {
        "plain": [
            _fig(0.6, 1.2, 500.0, 400.0, 500.0, 700.0),
            _fig(0.8, 1.0, 600.0, 500.0, 450.0, 600.0),
            _fig(0.7, 1.4, 550.0, 450.0, 900.0, 650.0),
        ]
    }
    by = {(r.case, r.metric): r for r in eds._anatomy_rows(rounds)}
    ours = by[("anatomy/plain/ours", "ms_per_step")]
    assert ours.value == 1.2 and ours.vs == "anatomy/plain/scoremd"
    assert ours.ratio == 0.5  # per-round 0.5, 0.8, 0.5
    assert by[("anatomy/plain/ours", "rest_us")].value == 700.0  # 700, 400, 850
    assert by[("anatomy/plain/torch_eager", "products_alone_us")].ratio == 0.8  # .8 1.11 .5
    assert by[("anatomy/plain/scoremd", "step_over_xla_products")].value == 1.556
    assert by[("anatomy/plain/ours", "products_per_step")].value == 19.0
    assert all((r.vs is None) == (r.ratio is None) for r in by.values())
