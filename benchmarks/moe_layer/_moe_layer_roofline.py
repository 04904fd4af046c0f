"""The ``--roofline`` section of ``run.py``: is the layer bound by its weights' memory traffic?

:func:`roofline_main` measures the copy bandwidth per buffer size, the page-fault rate of
fresh tensors and the dense matmul rate, against the step times of the cases of
:data:`ROOFLINE_CASES`. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import torch
from _common import (
    OtherLoad,
    Row,
    machine_info,
    print_table,
    write_json,
)
from _moe_layer import (
    BENCHMARK,
    DENSE,
    DTYPES,
    SCI,
    Case,
    _best_of,
    _copy_rate,
    _timed,
    build,
    memory_rates,
)

__all__ = [
    "ROOFLINE_CASES",
    "roofline_main",
]


# ----------------------------------------------------------------------- roofline

ROOFLINE_CASES = [
    Case(1024, 256, 32, 4, "float32"),
    Case(1024, 256, 64, 8, "float32"),
    Case(1024, 1024, 8, 2, "float32"),
    Case(256, 1024, 32, 1, "float32"),
    Case(256, 1024, 8, 1, "bfloat16"),
    Case(256, 256, 32, 4, "bfloat16"),
]


def roofline_main(args) -> int:
    """``--roofline``: is the layer bound by its weights' memory traffic? (see below)

    Per case: the measured step of sci-moe and of dense (interleaved, best of repeats),
    the dense matmul rate of the dtype (``T x d`` by ``d x 2 k ffn``, forward), and the
    floors of the expert weights' traffic: each step reads the weights twice (forward,
    input gradient) and writes the weight gradient once, ``3 W`` bytes at the copy
    bandwidth of a buffer of that size, plus the page faults of the fresh gradient
    tensor (``W`` at the ``fresh`` rate). ``excess`` is that floor for the MoE's
    ``E`` experts minus the dense layer's ``k``; if the claim "bound by weight traffic"
    holds, ``excess`` explains the measured gap ``t_sci - t_dense``.
    """
    import sci_moe

    machine = machine_info(
        seed=args.seed, sci_moe=sci_moe.__version__, mode="roofline", malloc=args.malloc
    )
    other = OtherLoad()
    reps = max(args.repeats, 5)
    rates = memory_rates(reps)
    rows = [Row("roofline memory", k, v, "GB/s") for k, v in rates.items()]
    print(", ".join(f"{k} {v:.1f} GB/s" for k, v in rates.items()), flush=True)
    table = []
    for case in ROOFLINE_CASES:
        dtype = DTYPES[case.dtype]
        xa = torch.randn(case.T, case.d, dtype=dtype)
        wa = torch.randn(2 * case.k * case.ffn, case.d, dtype=dtype)
        gemm_rate = 2 * xa.numel() * wa.shape[0] / _best_of(lambda xa=xa, wa=wa: xa @ wa.t(), reps)
        steps = build(case, args.seed)
        t = {SCI: [], DENSE: []}
        for r in range(reps):
            for who in (SCI, DENSE) if r % 2 == 0 else (DENSE, SCI):
                t[who].append(_timed(steps[who]))
        t_sci, t_dense = min(t[SCI]), min(t[DENSE])
        item = torch.finfo(dtype).bits // 8
        w_moe = 3 * case.E * case.d * case.ffn * item
        w_dense = 3 * case.k * case.d * case.ffn * item

        def floor(w):
            return 3 * w / (_copy_rate(rates, w) * 1e9) + w / (rates["fresh"] * 1e9)

        excess = floor(w_moe) - floor(w_dense)
        t_flop = case.T * case.flops_per_token() / gemm_rate
        gap = t_sci - t_dense
        vals = {
            "t_sci_ms": 1e3 * t_sci,
            "t_dense_ms": 1e3 * t_dense,
            "gap_ms": 1e3 * gap,
            "t_flop_ms": 1e3 * t_flop,
            "weight_floor_moe_ms": 1e3 * floor(w_moe),
            "weight_floor_dense_ms": 1e3 * floor(w_dense),
            "weight_excess_ms": 1e3 * excess,
            "excess_over_gap": excess / gap if gap > 0 else float("nan"),
            "expert_weights_mb": w_moe / 2**20,
            "gemm_gflops": gemm_rate / 1e9,
        }
        units = {"mb": "MiB", "ms": "ms", "gflops": "GFLOP/s", "gap": "1"}
        for k, v in vals.items():
            rows.append(Row(f"roofline {case.label}", k, v, units[k.rsplit("_", 1)[-1]]))
        table.append([case.label, *vals.values()])
        print(f"{case.label}: " + ", ".join(f"{k} {v:.3g}" for k, v in vals.items()), flush=True)
    print_table(["case", *vals], table, title=f"weight-traffic floors, best of {reps}")
    machine["contention"] = other.report()
    if args.json is not None:
        write_json(args.json, BENCHMARK + "_roofline", machine, rows)
        print(f"wrote {args.json}")
    return 0
