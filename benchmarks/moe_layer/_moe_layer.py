"""Shared pieces of the MoE layer benchmarks: cases, contestants, the core's path, bandwidth.

The problem sizes (:class:`Case`, the grid :func:`full_grid` with its :data:`TARGETS`),
the contestants' steps (:func:`build`: sci-moe, the dense SwiGLU baseline
:class:`sci_moe.moe.DenseSwiGLU`, transformers' ``MixtralSparseMoeBlock``; :func:`peer_step`:
that block with a chosen experts implementation, checked against sci-moe), the interleaved
timing of a grid case (:func:`measure`), the CPU path the core takes
(:func:`automatic_path`) and the machine's copy bandwidth (:func:`memory_rates`).
Used by ``run.py``, ``_moe_layer_gpu.py``, ``attainable.py``,
``fused_ab.py`` and ``paths.py``: benchmark scripts import no other
script, only the ``_`` helpers (the import contracts in ``pyproject.toml``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import torch
from torch import nn

import sci_moe.moe as _moe
from sci_moe.moe import DenseSwiGLU, MoE, to_transformers

# Older cores (a "before" run) lack the path switch: then only the automatic path runs.
HAS_PATHS = hasattr(_moe, "set_grouped_path")
set_grouped_path = getattr(_moe, "set_grouped_path", lambda path: None)

BENCHMARK = "moe_layer"
HF, SCI, ALT, DENSE = "transformers", "sci-moe", "sci-moe other path", "dense"
ATOL = RTOL = 1e-4  # float32 agreement required before timing a baseline
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: transformers' default experts implementation on this CPU, as a grid contestant.
GROUPED = "transformers grouped_mm"


@dataclass(frozen=True)
class Case:
    """One CPU problem size (``ffn = d``)."""

    T: int
    d: int
    E: int
    k: int
    dtype: str

    @property
    def ffn(self) -> int:
        return self.d

    @property
    def label(self) -> str:
        return f"T={self.T},d={self.d},E={self.E},k={self.k},{self.dtype}"

    def flops_per_token(self) -> int:
        """Model FLOPs of forward + backward for one token (router + three expert GEMMs)."""
        return 3 * (2 * self.d * self.E + 6 * self.k * self.d * self.ffn)

    def rows(self) -> int:
        """Mean rows per expert, ``T k / E``."""
        return self.T * self.k // self.E

    def gflop(self) -> float:
        return self.T * self.flops_per_token() / 1e9

    @property
    def contestants(self) -> list[str]:
        alt = [ALT] if HAS_PATHS and self.d <= 256 else []
        return [SCI, *alt, DENSE, HF]


GRID_D, GRID_E, GRID_K, GRID_T = (64, 128, 256, 1024), (8, 32, 64), (1, 2, 4, 8), (256, 1024, 4096)

#: The cases the targets are stated at (d=1024), run first by ``--full`` / ``--grid-peers``.
TARGETS = [Case(T, 1024, E, k, "float32") for T in (256, 1024) for E in (8, 32) for k in (1, 2)] + [
    Case(256, 1024, E, 1, "bfloat16") for E in (8, 32)
]


def full_grid() -> list[Case]:
    """All 288 cases of the grid (``ffn = d``), float32 and bfloat16."""
    return [
        Case(T, d, E, k, dt)
        for d, E, k, T, dt in itertools.product(GRID_D, GRID_E, GRID_K, GRID_T, DTYPES)
    ]


def full_grid_by_cost() -> list[Case]:
    """All 288 cases of ``--full``: the target cases first, then by model GFLOP per step."""
    rest = sorted((c for c in full_grid() if c not in TARGETS), key=lambda c: (c.gflop(), c.label))
    return TARGETS + rest


def mixtral_block(moe: MoE, case, implementation: str = "eager") -> nn.Module:
    """transformers' ``MixtralSparseMoeBlock`` holding a copy of ``moe``'s weights.

    ``implementation`` is transformers' ``_experts_implementation`` (``"eager"`` or
    ``"grouped_mm"``); weights are written with :func:`sci_moe.moe.to_transformers`,
    the block takes ``moe``'s device and dtype.
    """
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    config = MixtralConfig(
        hidden_size=case.d,
        intermediate_size=case.ffn,
        num_local_experts=case.E,
        num_experts_per_tok=case.k,
        hidden_act="silu",
        router_jitter_noise=0.0,
    )
    config._experts_implementation = implementation
    ref = moe.experts.gate_up
    block = MixtralSparseMoeBlock(config).to(ref.device, ref.dtype)
    return to_transformers(moe, block)


class Step:
    """``y = call(x); (y * g).sum().backward()`` with fresh gradients each time."""

    def __init__(self, module: nn.Module, x: torch.Tensor, g: torch.Tensor, call=None) -> None:
        self.module, self.x, self.g = module, x, g
        self.call = module if call is None else call

    def __call__(self) -> torch.Tensor:
        self.module.zero_grad(set_to_none=True)
        self.x.grad = None
        y = self.call(self.x)
        (y * self.g).sum().backward()
        return y.detach()

    def grads(self) -> dict[str, torch.Tensor]:
        return {n: p.grad for n, p in self.module.named_parameters()} | {"x": self.x.grad}


def _check(name: str, got: torch.Tensor, want: torch.Tensor, scale: float = 1.0) -> float:
    """Raise unless ``got`` matches ``want`` to ``scale * (ATOL + RTOL |want|)``."""
    diff = (got.float() - want.float()).abs()
    bound = scale * (ATOL + RTOL * want.float().abs())
    if not bool((diff <= bound).all()):
        raise SystemExit(
            f"{name}: max |diff| {diff.max().item():.3g} exceeds the tolerance "
            f"(atol={scale * ATOL:g}, rtol={scale * RTOL:g}); not timing a wrong result"
        )
    return diff.max().item()


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(True)


def _gap(name: str, got: torch.Tensor, want: torch.Tensor, scale: float = 1.0) -> float:
    return _check(name, got, want, scale)


def build(case: Case, seed: int, transformers: bool = True) -> dict:
    """Contestant steps of ``case``; transformers checked against sci-moe (float32).

    ``transformers=False`` builds no transformers contestant.
    """
    dtype = DTYPES[case.dtype]
    torch.manual_seed(seed)
    moe = MoE(d_model=case.d, num_experts=case.E, top_k=case.k, d_hidden=case.ffn, expert="glu")
    moe = moe.to(dtype)
    dense = DenseSwiGLU(case.d, case.ffn, case.E, case.k).to(dtype)
    x = torch.randn(case.T, case.d, dtype=dtype)
    g = torch.randn(case.T, case.d, dtype=dtype)
    steps = {SCI: Step(moe, _leaf(x), g), DENSE: Step(dense, _leaf(x), g)}
    if transformers:
        block = mixtral_block(moe, case)
        shape = (1, case.T, case.d)
        steps[HF] = Step(block, _leaf(x), g, lambda v: block(v.view(shape)).view(case.T, case.d))
    if ALT in case.contestants:
        steps[ALT] = Step(moe, _leaf(x), g)
    if transformers and case.dtype == "float32" and case.T <= 1024:
        y_sci = steps[SCI]()
        ours = {n: t.clone() for n, t in steps[SCI].grads().items()}
        try:
            _gap(f"{case.label} transformers output", steps[HF](), y_sci)
            theirs = steps[HF].grads()
            for a, b in (("x", "x"), ("experts.gate_up", "experts.gate_up_proj")):
                _gap(f"{case.label} gradient of {a}", ours[a], theirs[b], scale=10.0)
        except SystemExit as e:  # report, keep timing: a float32 rounding gap at large d
            print(f"warning: {e}", flush=True)
    return steps


#: sci-moe gradient name -> transformers' (the router and both expert weights, and x).
GRADS = {
    "x": "x",
    "router.weight": "gate.weight",
    "experts.gate_up": "experts.gate_up_proj",
    "experts.down": "experts.down_proj",
}


def peer_step(moe: MoE, case, implementation: str, x: torch.Tensor, g: torch.Tensor) -> Step:
    """transformers' block with experts ``implementation`` (:func:`mixtral_block`) as a step.

    It holds a copy of ``moe``'s weights and runs on a copy of the ``(T, d)`` input ``x``
    (viewed as one sequence of ``T`` tokens), with the output gradient ``g``.
    """
    block = mixtral_block(moe, case, implementation=implementation)
    shape = (1, case.T, case.d)
    return Step(block, _leaf(x), g, lambda v: block(v.view(shape)).view(case.T, case.d))


def agreement(name: str, step: Step, y_ref: torch.Tensor, ours: dict) -> dict[str, float]:
    """Run a transformers ``step`` once and check it against sci-moe's output and gradients.

    ``y_ref`` and ``ours`` (gradients by sci-moe's names, :data:`GRADS`) come from sci-moe's
    step on the same input. Returns the largest absolute difference of the output and of
    each gradient; raises ``SystemExit`` beyond ``ATOL + RTOL |ref|`` (gradients 10x).
    """
    got = {"output": _check(f"{name} output", step(), y_ref)}
    theirs = step.grads()
    for a, b in GRADS.items():
        got[a] = _check(f"{name} gradient of {a}", theirs[b], ours[a], 10.0)
    return got


def automatic_path(moe: MoE, x: torch.Tensor, k: int) -> str:
    """The CPU path the installed core takes for ``moe`` on the ``(T, d)`` input ``x``.

    ``"per_expert"`` (the loop of :func:`sci_moe.moe.dispatch.per_expert_path`),
    ``"chunked"`` (:func:`sci_moe.moe.chunked_path`), or the GEMM path of
    :func:`sci_moe.moe.grouped_path` on the ``T k`` sorted rows (``"grouped_mm"`` or
    ``"bmm"``); ``"grouped_mm"`` in older cores without the path switch.
    """
    if not HAS_PATHS:
        return "grouped_mm"
    auto = _moe.grouped_path(x[:1].expand(x.shape[0] * k, -1), moe.experts.gate_up)
    try:  # the per-expert loop's rule (absent in older cores)
        from sci_moe.moe.dispatch import per_expert_path as loop_rule
    except ImportError:
        loop_rule = None
    with torch.no_grad():
        plan = moe.router(x).plan
    if loop_rule is not None and loop_rule(x, plan, moe.experts):
        return "per_expert"
    if getattr(_moe, "chunked_path", lambda *a: False)(x, plan, moe.experts):
        return "chunked"  # the cache-blocked sorted path (absent in older cores)
    return auto


def measure(
    case: Case, seed: int, repeats: int, transformers: bool = True, grouped_mm: bool = False
) -> dict:
    """Interleaved timings (seconds per step) of every contestant of ``case``.

    Every repeat runs each contestant once, in an order rotated per repeat, after one
    warm-up step each. ``"_paths"`` holds sci-moe's automatic path and the other path.
    ``grouped_mm=True`` adds transformers' ``grouped_mm`` experts (:data:`GROUPED`; float32
    at ``T <= 1024`` checked against sci-moe first, the check being its warm-up) and
    ``"_notes"``: ``grouped_mm_not_run`` (why it could not run the case: the error of its
    first step) or ``grouped_mm_check`` (a disagreement beyond the tolerance, reported and
    timed all the same, as for the eager block).
    """
    steps = build(case, seed, transformers)
    notes, warmed = {}, set()
    if grouped_mm:
        sci = steps[SCI]
        try:
            step = peer_step(sci.module, case, "grouped_mm", sci.x, sci.g)
            if case.dtype == "float32" and case.T <= 1024:
                y_ref = sci()
                ours = {n: t.clone() for n, t in sci.grads().items()}
                try:
                    agreement(f"{case.label} {GROUPED}", step, y_ref, ours)
                except SystemExit as e:
                    notes["grouped_mm_check"] = str(e)
            else:
                step()
            steps[GROUPED] = step
            warmed.add(GROUPED)
        except (RuntimeError, MemoryError, NotImplementedError, ValueError) as e:
            notes["grouped_mm_not_run"] = f"{type(e).__name__}: {e}"
    auto = automatic_path(steps[SCI].module, steps[SCI].x, case.k)
    # The other path: the other GEMM formulation, or for the per-expert loop and the
    # chunked path the (unchunked) sorted path with its grouped_mm.
    other = "bmm" if auto == "grouped_mm" else "grouped_mm"

    def run(who):
        set_grouped_path(other if who == ALT else None)
        try:
            t0 = time.perf_counter()
            steps[who]()
            return time.perf_counter() - t0
        finally:
            set_grouped_path(None)

    names = list(steps)
    for who in names:  # warm-up
        if who not in warmed:
            run(who)
    times = {who: [] for who in names}
    for r in range(repeats):
        for who in names[r % len(names) :] + names[: r % len(names)]:
            times[who].append(run(who))
    times["_paths"] = [auto, other]
    if grouped_mm:
        times["_notes"] = notes
    return times


def parse_label(label: str) -> Case:
    """The :class:`Case` of a row label ``T=..,d=..,E=..,k=..,dtype``."""
    t, d, e, k, dt = label.split(",")
    return Case(int(t[2:]), int(d[2:]), int(e[2:]), int(k[2:]), dt)


_BW_SIZES_MB = (4, 16, 64, 256, 1024)


def _best_of(fn, repeats: int) -> float:
    fn()
    return min(_timed(fn) for _ in range(repeats))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def memory_rates(repeats: int) -> dict[str, float]:
    """Measured GB/s: ``copy_`` (read + write bytes) per buffer size, and fresh allocations.

    ``fresh`` is ``torch.zeros`` of 256 MB (mapped and page-faulted by the kernel each time,
    as a weight gradient after ``zero_grad(set_to_none=True)``).
    """
    out = {}
    for mb in _BW_SIZES_MB:
        a = torch.ones(mb * 2**18)  # float32: mb MiB
        b = torch.empty_like(a)
        out[f"copy_{mb}MB"] = 2 * a.nbytes / _best_of(lambda a=a, b=b: b.copy_(a), repeats) / 1e9
    n = 256 * 2**18
    out["fresh"] = 4 * n / _best_of(lambda: torch.zeros(n), repeats) / 1e9
    return out


def _copy_rate(rates: dict, nbytes: float) -> float:
    """Copy bandwidth of the smallest measured buffer holding ``nbytes``."""
    for mb in _BW_SIZES_MB:
        if nbytes <= mb * 2**20:
            return rates[f"copy_{mb}MB"]
    return rates[f"copy_{_BW_SIZES_MB[-1]}MB"]
