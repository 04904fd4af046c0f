"""The ``--profile`` section of ``run.py``: a torch.profiler breakdown of the small shape.

:func:`profile_main` profiles the forward and backward of d=ffn=256, T=1024 (E=32/k=4 and
E=64/k=8, float32 and bfloat16) and sums the operators' time into GEMM, gather/scatter,
elementwise, routing/plan and other. A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import itertools
import statistics

from _common import (
    OtherLoad,
    Row,
    machine_info,
    print_table,
    write_json,
)
from _moe_layer import (
    BENCHMARK,
    DTYPES,
    SCI,
    Case,
    build,
)

__all__ = [
    "profile_main",
]


# ------------------------------------------------------------------------ profile

_BUCKETS = {
    "gemm": ("aten::mm", "aten::bmm", "aten::addmm", "aten::_grouped_mm", "aten::linear"),
    "gather/scatter": (
        "aten::index",
        "aten::index_select",
        "aten::index_add_",
        "aten::scatter_add_",
        "aten::scatter_add",
        "aten::gather",
        "aten::index_put_",
        "aten::_index_put_impl_",
        "aten::cat",
        "aten::repeat_interleave",
    ),
    "routing/plan": (
        "aten::topk",
        "aten::sort",
        "aten::bincount",
        "aten::cumsum",
        "aten::_softmax",
        "aten::softmax",
        "aten::argsort",
        "aten::isfinite",
        "aten::all",
        "aten::item",
        "aten::_local_scalar_dense",
    ),
    "elementwise": (
        "aten::mul",
        "aten::mul_",
        "aten::silu",
        "aten::silu_backward",
        "aten::add",
        "aten::add_",
        "aten::sum",
        "aten::div",
        "aten::linalg_vecdot",
        "aten::copy_",
        "aten::fill_",
        "aten::zero_",
        "aten::_softmax_backward_data",
    ),
}


def _bucket(name: str) -> str:
    for b, names in _BUCKETS.items():
        if name in names:
            return b
    return "other"


def _profile_once(fn) -> dict[str, float]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as p:
        fn()
    out = dict.fromkeys([*_BUCKETS, "other"], 0.0)
    for ev in p.key_averages():
        out[_bucket(ev.key)] += ev.self_cpu_time_total / 1e3  # ms
    return out


def profile_main(args) -> int:
    """``--profile``: where the time of the small shape goes (forward and backward)."""
    import sci_moe

    machine = machine_info(seed=args.seed, sci_moe=sci_moe.__version__, mode="profile")
    other = OtherLoad()
    rows, table = [], []
    for E, k, dt in itertools.product((32, 64), (4, 8), DTYPES):
        if (E, k) not in ((32, 4), (64, 8)):
            continue
        case = Case(1024, 256, E, k, dt)
        step = build(case, args.seed)[SCI]
        step()  # warm-up
        acc = {"forward": None, "backward": None}
        for _ in range(args.repeats):
            step.module.zero_grad(set_to_none=True)
            step.x.grad = None
            box = {}
            fwd = _profile_once(lambda box=box, step=step: box.setdefault("y", step.call(step.x)))
            bwd = _profile_once(lambda box=box, step=step: (box["y"] * step.g).sum().backward())
            for name, got in (("forward", fwd), ("backward", bwd)):
                if acc[name] is None:
                    acc[name] = {b: [] for b in got}
                for b, v in got.items():
                    acc[name][b].append(v)
        for phase, buckets in acc.items():
            med = {b: statistics.median(v) for b, v in buckets.items()}
            total = sum(med.values())
            tag = f"profile {case.label} {phase}"
            rows.append(Row(tag, "total_ms", total, "ms"))
            for b, v in med.items():
                rows.append(Row(tag, f"share_{b}", v / total, "1"))
            table.append([case.label, phase, total] + [100 * med[b] / total for b in med])
    print_table(
        ["case", "phase", "ms", *(f"% {b}" for b in [*_BUCKETS, "other"])],
        table,
        title=f"self CPU time by kind of op, median of {args.repeats} profiled steps",
    )
    load = other.report()
    machine["contention"] = load
    if args.json is not None:
        write_json(args.json, BENCHMARK + "_profile", machine, rows)
        print(f"wrote {args.json}")
    return 0
