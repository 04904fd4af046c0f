"""``run.py --hf-peers``: sci-moe's MoE layer against every experts implementation of transformers.

Issue 41 item 4: the grid of ``run.py`` races transformers' *eager* experts (a Python loop
over the hit experts). transformers' own default, when a model is built with
``from_pretrained`` / ``from_config`` and no ``experts_implementation`` is asked for, is
``grouped_mm`` (``PreTrainedModel.get_correct_experts_implementation``: ``None`` becomes
``"grouped_mm"`` where ``torch._grouped_mm`` dispatches, as on this CPU with torch >= 2.9);
``batched_mm`` gathers one copy of the expert weights per (token, slot) pair and runs
``bmm``. A block built by hand takes the implementation from
``config._experts_implementation`` (read per call by the ``use_experts_implementation``
decorator of ``MixtralExperts``), which :func:`_moe_layer.mixtral_block` sets; the block
and its check against sci-moe are :func:`_moe_layer.peer_step` and
:func:`_moe_layer.agreement`, shared with the grid's grouped_mm contestant
(``run.py --grid-peers``, ``_grid_peers.py``).

Contestants per shape, all holding a copy of the same weights and timed **interleaved** in
one process (every repeat runs each once, the order rotated per repeat; one warm-up each):

``sci-moe``
    ``MoE(d_model=d, num_experts=E, top_k=k, d_hidden=ffn, expert="glu")``, the automatic
    CPU path (``machine.paths`` names it per shape).
``transformers grouped_mm`` / ``transformers batched_mm`` / ``transformers eager``
    ``MixtralSparseMoeBlock`` with that ``_experts_implementation``; before timing, each
    one's output and the gradients of ``x``, the router and both expert weights are checked
    against sci-moe's (float32, ``1e-4 + 1e-4 |ref|``, gradients 10x that): a contestant
    that disagrees stops the run. ``batched_mm`` runs only where its gathered weights
    (``T k (3 ffn d)`` floats, forward) fit :data:`BATCHED_CAP_BYTES`; the grid is chosen so
    that it fits at every shape of the full run.

Shapes (:data:`GRID`): float32, ``ffn = d`` and ``ffn != d`` (``2 d``, ``3 d``, and the
Llama-style ``8 d / 3`` rounded up to a multiple of 64), among them the two shapes the issue
quotes (d 256 / E 32 / top-2 / ffn 512 / 1,024 tokens; d 1024 / E 8 / top-2 / ffn 2048 /
2,048 tokens).

Rows (``moe_layer_hf_peers.json``): per shape, sci-moe's tokens/s with ``vs`` each peer and
``ratio`` = median over repeats of the per-repeat ``t_peer / t_sci`` (> 1: sci-moe faster);
each contestant's tokens/s; and ``tokens_per_s repeat R`` rows (every repeat's figure, the
paired samples of the verdicts). ``verdicts`` (:func:`verdicts`, re-derivable with
``--verdicts-only PATH``): per shape, "sci-moe's step is faster than transformers'
grouped_mm" by a paired t-test over the interleaved repeats of the tokens/s
(:func:`_common.decide_verdict`, alpha 0.05). A timing has nothing to train, so
``converged`` is true; the repeats are not seeds: they pair timings taken seconds apart
under the same load, which is what the test resolves.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from _common import (
    OtherLoad,
    Row,
    decide_verdict,
    machine_info,
    print_table,
    warn_if_busy,
    write_json,
)
from _moe_layer import GRADS as _GRADS
from _moe_layer import SCI, Step, _leaf, agreement, automatic_path, peer_step

BENCHMARK = "moe_layer_hf_peers"
IMPLS = ("grouped_mm", "batched_mm", "eager")
PEERS = {impl: f"transformers {impl}" for impl in IMPLS}
#: ``batched_mm``'s gathered expert weights (forward, float32 bytes) above which it is not run.
BATCHED_CAP_BYTES = 1 << 30
#: The grouped_mm peer every verdict compares against (transformers' default).
BASELINE = PEERS["grouped_mm"]


@dataclass(frozen=True)
class PeerCase:
    """One float32 problem size with its own expert hidden size ``ffn``."""

    T: int
    d: int
    ffn: int
    E: int
    k: int

    @property
    def label(self) -> str:
        return f"T={self.T},d={self.d},ffn={self.ffn},E={self.E},k={self.k}"

    def batched_bytes(self) -> int:
        """float32 bytes of ``batched_mm``'s gathered weights in the forward pass."""
        return 4 * self.T * self.k * 3 * self.ffn * self.d

    def peers(self) -> list[str]:
        fits = self.batched_bytes() <= BATCHED_CAP_BYTES
        return [PEERS[i] for i in IMPLS if i != "batched_mm" or fits]


#: The full run's small shapes: batched_mm fits at every one of them (T <= 256).
GRID = [
    PeerCase(256, 128, 128, 8, 2),
    PeerCase(256, 128, 256, 8, 2),
    PeerCase(256, 128, 384, 32, 4),
    PeerCase(256, 256, 256, 32, 4),
    PeerCase(256, 256, 512, 8, 2),
    PeerCase(256, 256, 704, 32, 1),
    PeerCase(128, 512, 1024, 8, 1),
]
#: Larger shapes (grouped_mm and eager only): the issue's two and a Llama-style ffn.
GRID_LARGE = [
    PeerCase(1024, 256, 512, 32, 2),
    PeerCase(1024, 512, 1408, 8, 2),
    PeerCase(2048, 1024, 2048, 8, 2),
]
#: ``--quick``: two small shapes, one with ffn != d.
QUICK = [PeerCase(128, 64, 64, 8, 2), PeerCase(128, 64, 128, 8, 2)]


def build(case: PeerCase, seed: int) -> tuple[dict, dict]:
    """Steps of sci-moe and of every peer of ``case``, each checked against sci-moe first.

    Returns ``(steps, gaps)``: ``gaps[peer]`` is the largest absolute difference of the
    output and of each checked gradient (``max_abs_diff <what>`` keys).
    """
    from sci_moe.moe import MoE

    torch.manual_seed(seed)
    moe = MoE(d_model=case.d, num_experts=case.E, top_k=case.k, d_hidden=case.ffn, expert="glu")
    x = torch.randn(case.T, case.d)
    g = torch.randn(case.T, case.d)
    steps = {SCI: Step(moe, _leaf(x), g)}
    y_ref = steps[SCI]()
    ours = {n: t.clone() for n, t in steps[SCI].grads().items()}
    missing = [n for n in _GRADS if n not in ours]
    if missing:
        raise SystemExit(f"sci-moe has no gradient named {missing}: update _GRADS")
    gaps = {}
    for impl in IMPLS:
        peer = PEERS[impl]
        if peer not in case.peers():
            continue
        step = peer_step(moe, case, impl, x, g)
        steps[peer], gaps[peer] = step, agreement(f"{case.label} {peer}", step, y_ref, ours)
    return steps, gaps


def measure(case: PeerCase, seed: int, repeats: int) -> tuple[dict, dict, str]:
    """Interleaved seconds per step of every contestant, the agreement gaps, sci-moe's path."""
    steps, gaps = build(case, seed)
    path = automatic_path(steps[SCI].module, steps[SCI].x, case.k)
    names = list(steps)
    for who in names:  # warm-up
        steps[who]()
    times = {who: [] for who in names}
    for r in range(repeats):
        for who in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            steps[who]()
            times[who].append(time.perf_counter() - t0)
    return times, gaps, path


def case_rows(case: PeerCase, times: dict, gaps: dict) -> list[Row]:
    """The JSON rows of one shape (see the module docstring)."""
    tag = f"{case.label} {SCI}"
    tps = case.T / statistics.median(times[SCI])
    rows = []
    for peer in times:
        if peer == SCI:
            continue
        ratio = statistics.median(b / a for a, b in zip(times[SCI], times[peer], strict=True))
        rows.append(Row(tag, "tokens_per_s", tps, "tokens/s", f"{case.label} {peer}", ratio))
    for who, ts in times.items():
        name = f"{case.label} {who}"
        if who != SCI:
            rows.append(Row(name, "tokens_per_s", case.T / statistics.median(ts), "tokens/s"))
        for r, t in enumerate(ts):
            rows.append(Row(name, f"tokens_per_s repeat {r}", case.T / t, "tokens/s"))
    for peer, got in gaps.items():
        for what, v in got.items():
            rows.append(Row(f"{case.label} {peer}", f"max_abs_diff {what}", v, "1"))
    return rows


def verdicts(doc: dict) -> list[dict]:
    """Per shape: is sci-moe's step faster than transformers' grouped_mm (paired t-test)?"""
    out = []
    repeats = doc["machine"]["repeats"]
    for label in doc["machine"]["shapes"]:

        def per_repeat(who, label=label):
            want = {f"tokens_per_s repeat {r}": r for r in range(repeats)}
            vals = {
                want[r["metric"]]: r["value"]
                for r in doc["rows"]
                if r["case"] == f"{label} {who}" and r["metric"] in want
            }
            return [vals[r] for r in range(repeats)]

        out.append(
            decide_verdict(
                f"sci-moe's MoE layer step (forward + backward, float32, one thread) is faster "
                f"than transformers' grouped_mm experts at {label}",
                metric="tokens_per_s",
                ours=per_repeat(SCI),
                baseline=BASELINE,
                baseline_values=per_repeat(BASELINE),
                higher_is_better=True,
                converged=True,
                note="paired over the interleaved repeats (not seeds); a timing, nothing trained",
            )
        )
    return out


def hf_peers_main(args) -> int:
    """``--hf-peers``: run the shapes, write rows and verdicts (``--json``)."""
    import transformers

    import sci_moe

    cases = QUICK if args.quick else GRID + ([] if args.no_large else GRID_LARGE)
    mode = "hf-peers quick" if args.quick else "hf-peers"
    machine = machine_info(
        seed=args.seed,
        sci_moe=sci_moe.__version__,
        transformers=transformers.__version__,
        mode=mode,
        repeats=args.repeats,
        shapes=[c.label for c in cases],
        dtype="float32",
        batched_cap_bytes=BATCHED_CAP_BYTES,
        paths={},
        timing="one process; contestants interleaved, order rotated per repeat; "
        "ratio = median of per-repeat t_peer / t_sci",
    )
    print(
        f"moe_layer {mode} ({len(cases)} shapes): torch {machine['torch']}, "
        f"{torch.get_num_threads()} threads, transformers {transformers.__version__}, "
        f"{args.repeats} repeats, git {machine['git']}",
        flush=True,
    )
    warn_if_busy()
    other = OtherLoad()
    rows, table = [], []
    t0 = time.perf_counter()
    for i, case in enumerate(cases):
        times, gaps, path = measure(case, args.seed, args.repeats)
        machine["paths"][case.label] = path
        new = case_rows(case, times, gaps)
        rows += new
        ratio = {r.vs.rsplit(" ", 1)[-1]: r.ratio for r in new if r.vs}
        cells = [ratio.get(i) for i in IMPLS]
        table.append([case.label, path, 1e3 * statistics.median(times[SCI]), *cells])
        print(
            f"[{i + 1}/{len(cases)} {time.perf_counter() - t0:.0f} s] {case.label} ({path}): "
            + ", ".join(f"x {k} {v:.3f}" for k, v in ratio.items()),
            flush=True,
        )
    print_table(
        ["shape", "sci path", "sci ms/step", *(f"x {i}" for i in IMPLS)],
        table,
        title=f"forward+backward; ratio = median over {args.repeats} interleaved repeats "
        "of t_peer / t_sci (> 1: sci-moe faster)",
    )
    machine["contention"] = load = other.report()
    print(f"total {load['wall_s']:.0f} s; other processes used {load['other_cpu_fraction']}")
    doc = {"machine": machine, "rows": [r.__dict__ for r in rows]}
    found = verdicts(doc) if args.repeats >= 2 else []
    for v in found:
        print(f"{v['verdict']:>12}  p={v['p_value']:.2g}  {v['claim']}")
    if args.json is not None:
        write_json(args.json, BENCHMARK, machine, rows, found or None)
        print(f"wrote {args.json}")
    return 0
