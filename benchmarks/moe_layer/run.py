"""MoE layer training speed on CPU over a grid of sizes, against a dense MLP and transformers.

Contestants, all built from the same seed (same weights, same input), timed **in one
process, interleaved**: every repeat runs each contestant once, in an order rotated per
repeat, and the figure is the median over repeats of the *per-repeat ratio* ``t_base /
t_sci``. Contention from other processes then hits numerator and denominator of a ratio
alike and cancels as far as it is steady over one repeat (a few seconds); the CPU time
other processes used is recorded (``machine.contention``).

``sci-moe``
    ``MoE(d_model=d, num_experts=E, top_k=k, d_hidden=d, expert="glu")``: SwiGLU experts,
    softmax router with top-k renormalisation (as Mixtral); the GEMM path is the automatic
    choice of :func:`sci_moe.moe.grouped_path`.
``sci-moe other path``
    The same layer with the other CPU path forced
    (:func:`sci_moe.moe.set_grouped_path`: padded ``bmm`` where the rule picks
    ``grouped_mm`` and vice versa; the sorted ``grouped_mm`` path where
    :func:`sci_moe.moe.dispatch.per_expert_path` picks the loop or
    :func:`sci_moe.moe.chunked_path` the chunked sorted path): where each path
    wins. ``d <= 256`` only (float32; bfloat16 too since the bfloat16 rule of
    :func:`sci_moe.moe.grouped_path`).
``dense``
    One SwiGLU MLP of hidden size ``k * d`` (the same active FLOPs per token) plus the
    same router linear + softmax + top-k, whose top-k mass scales the output so the
    router gets a gradient: the practical speed limit of a dropless MoE.
``transformers``
    transformers' eager ``MixtralSparseMoeBlock`` (a Python loop over the hit experts)
    holding a copy of the sci-moe weights; its output and gradients are checked against
    sci-moe (float32: 1e-4 / 1e-3) before it is timed. ``--no-transformers`` leaves it
    out (its Python loop dominates the run time at many experts; the targets are the
    ratio to dense).

A step is ``y = layer(x); (y * g).sum().backward()`` with ``x.requires_grad`` and a
fixed random ``g``, after one warm-up step per contestant.

Grid: ``d`` in {64, 128, 256, 1024}, ``E`` in {8, 32, 64}, ``k`` in {1, 2, 4, 8}, ``T`` in
{256, 1024, 4096}, float32 and bfloat16 (288 cases, ``ffn = d``).

* ``--grid``: on one loaded core the whole grid takes hours (a d=1024, k=8, T=4096
  bfloat16 step alone is minutes: this CPU has no native bfloat16 GEMM), so the run
  keeps the cases whose step costs at most ``--max-gflop`` (float32, default 12) or
  ``--max-gflop-bf16`` (default 2.5) model GFLOP, always includes the target cases
  (d=1024: float32 T=256/1024 at E=8/32, k=1/2; bfloat16 T=256, k=1) and samples
  ``--sample`` (default 48) of the rest with ``random.Random(seed)``: deterministic.
* ``--full``: all 288 cases, the target cases first, then cheapest (model GFLOP per
  step) first; with ``--checkpoint PATH`` every finished case is saved atomically and a
  rerun resumes, ``--budget-s S`` starts no case after ``S`` seconds (the JSON lists the
  cases not run in ``machine.cases_not_run``); ``--stop-after N`` measures at most ``N``
  new cases (e.g. to re-measure cases dropped from a checkpoint).
* ``--quick``: 10 fixed cases at d=128/256 (under 3 minutes).
* ``--roofline``: is the layer bound by its weights' memory traffic? Measured copy
  bandwidth per buffer size, the page-fault rate of fresh tensors and the dense matmul
  rate, against the step times of six cases (:func:`roofline_main`).
* ``--profile``: torch.profiler breakdown of the small shape (d=ffn=256, T=1024, E=32/k=4
  and E=64/k=8, float32 and bfloat16), forward and backward separately, into GEMM,
  gather/scatter, elementwise, routing/plan and other.

``--json PATH`` writes the rows (per case: tokens/s of each contestant, ratios; summary
rows: the medians the targets are stated in); ``--plot PNG`` the ratio-to-dense plot.
Run: ``python benchmarks/moe_layer/run.py [--quick | --grid | --profile] [--json PATH]
[--plot PNG] [--seed 0] [--threads 1] [--repeats 3]``.

* ``--grid-peers``: all 288 cases (the order of ``--full``) against transformers'
  ``grouped_mm`` experts (its default CPU path) besides the eager block, dense and the
  other path, interleaved as above; rows ``vs=<case> transformers grouped_mm`` with a
  ratio at every case, per-region verdicts; written in pieces (``--max-hours H``,
  ``--stop-after N``, ``--resume``) into ``--json``: see ``_grid_peers.py``. Estimated
  CPU time of the whole grid on one thread (:func:`_grid_peers.estimate_cpu_s` on the
  committed ``moe_layer_grid.json``): 6,640 s of timed steps for the contestants of that
  run (the eager block at E=64, d=1024 alone about half of it: up to 70 s a step) plus
  480-610 s for grouped_mm (its step 0.84-1.21x sci-moe's on six cases measured here,
  d 64-1024, both dtypes), times 1.05-1.2 for building the models (the parts' wall
  time against their steps), times about 1.07 for this EPYC against that Xeon (sci-moe's
  float32 steps, ``moe_layer_grid_epyc_fp32.json``): 8,000-9,200 s (about 2.4 h); the slowest
  case about 6 minutes. The command (three pieces of at most an hour each, started one
  after the other; every piece after the first continues the stored run)::

      python benchmarks/moe_layer/run.py --grid-peers --threads 1 --repeats 3 --seed 0 \
          --json benchmarks/moe_layer/results/moe_layer_grid_peers.json --max-hours 1 --resume

  (run it again until it prints ``complete``; ``--resume`` on a missing file starts it).

GPU section (``--gpu``; needs CUDA, replaces the CPU run): see ``_moe_layer_gpu.py``.
Against transformers' ``grouped_mm`` and ``batched_mm`` experts too, ``ffn != d``, with
verdicts (``--hf-peers [--quick] [--no-large]``; ``--verdicts-only PATH``): see
``_hf_peers.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import (
    base_parser,
    piece_arguments,
    setup,
    verdicts_only,
)
from _grid_peers import BENCHMARK as GRID_PEERS
from _grid_peers import grid_peers_main
from _grid_peers import verdicts as grid_peers_verdicts
from _hf_peers import hf_peers_main
from _hf_peers import verdicts as hf_peers_verdicts
from _moe_layer import DENSE as DENSE
from _moe_layer import HF as HF
from _moe_layer import SCI as SCI
from _moe_layer import Case as Case
from _moe_layer import build as build
from _moe_layer import (
    full_grid_by_cost,
    parse_label,
)
from _moe_layer import measure as measure
from _moe_layer_cpu import cpu_main
from _moe_layer_summary import resummarize


def verdict_rule(doc: dict) -> list[dict]:
    """``--verdicts-only``: the rule of the stored run's mode (``--grid-peers``, ``--hf-peers``)."""
    if doc.get("benchmark") == GRID_PEERS:
        return grid_peers_verdicts(doc)
    return hf_peers_verdicts(doc)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdict_rule)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (default 3)")
    parser.add_argument("--grid", action="store_true", help="the (sampled) full grid")
    parser.add_argument("--profile", action="store_true", help="profile the small shape")
    parser.add_argument("--sample", type=int, default=48, help="--grid: sampled cases")
    parser.add_argument("--full", action="store_true", help="all 288 cases, cheapest first")
    parser.add_argument("--checkpoint", default=None, help="resume file: finished cases")
    parser.add_argument(
        "--budget-s", type=float, default=None, help="start no case after this many seconds"
    )
    parser.add_argument("--roofline", action="store_true", help="bandwidth/FLOP-rate floors")
    parser.add_argument("--stop-after", type=int, default=None, help="measure at most N cases")
    parser.add_argument("--max-gflop", type=float, default=12.0, help="--grid float32 cap")
    parser.add_argument("--max-gflop-bf16", type=float, default=2.5, help="--grid bf16 cap")
    parser.add_argument(
        "--plot",
        default=None,
        help="write the ratio-to-dense plot (PNG); with --grid-peers the ratios to grouped_mm",
    )
    parser.add_argument("--gpu", action="store_true", help="the GPU section (needs CUDA)")
    parser.add_argument("--resummarize", default=None, help="recompute a JSON's summary rows")
    parser.add_argument(
        "--merge", action="append", default=None, help="--resummarize: add this run's cases"
    )
    parser.add_argument(
        "--no-transformers", action="store_true", help="leave out transformers' block"
    )
    parser.add_argument(
        "--case", action="append", default=None, help="run this case (T=..,d=..,E=..,k=..,dtype)"
    )
    parser.add_argument("--hf-peers", action="store_true", help="transformers' experts impls")
    parser.add_argument("--no-large", action="store_true", help="--hf-peers: T = 256 only")
    parser.add_argument(
        "--grid-peers", action="store_true", help="all 288 cases against grouped_mm and eager"
    )
    piece_arguments(parser, unit="case (--grid-peers)")
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:  # an --hf-peers JSON
        return done
    if args.resummarize:
        resummarize(args.resummarize, args.plot, args.merge or ())
        return 0
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    if args.gpu:
        from _moe_layer_gpu import gpu_main

        return gpu_main(args)
    setup(args)
    if args.hf_peers:
        return hf_peers_main(args)
    if args.grid_peers:
        cases = [parse_label(c) for c in args.case] if args.case else full_grid_by_cost()
        return grid_peers_main(args, cases)
    return cpu_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
