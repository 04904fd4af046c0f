"""Training steps/s of two models built on ``sci_moe.moe``: SPiCE and the byte-level MoE LM.

A fixed, synthetic workload (no data set needed) that exercises the MoE core the way
its consumers do, so a change to the core can be quoted as "steps/s before / after":

``spice``
    ``sci_moe.molecules.spice.build_model("spice", ...)`` with the options of
    ``benchmarks/spice/run.py`` (hidden 32, 2 PaiNN layers, 16 RBFs, cutoff 0.5 nm, 8
    experts, top-2, 4 heads, noise 0.1); batches of 4 random chain molecules of 12-20
    heavy atoms with 6 conformers each (seeded). One step: ``model.loss(batch)``,
    backward, AdamW.
``lm``
    ``sci_moe.language.MoETransformerLM`` with the default ``MoELMConfig`` (d_model 64,
    2 layers, 4 heads, seq_len 64, SwiGLU experts of 64, 8 experts, top-2), batches of
    16 random byte windows. One step: ``model.loss``, ``(ce + aux).backward()``, AdamW.

The figure is ``steps / s`` from the median over ``--repeats`` blocks of ``--steps``
steps each (after one warm-up block). Run with ``OMP_NUM_THREADS=1``::

    python benchmarks/moe_layer/consumers_speed.py --threads 1 --json PATH [--quick]

``--ab-old DIR`` compares two versions of the package under the same contention: ``DIR``
holds an older copy of ``sci_moe`` (e.g. ``git archive <commit> sci_moe | tar -x -C
DIR``); ``--rounds`` rounds each run this script once with ``PYTHONPATH=DIR`` ("before")
and once with the checkout ("after"), alternating, and the rows give each model's median
steps/s per version and the median over rounds of the per-round ratio after / before.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import OtherLoad, Row, base_parser, finish, machine_info, print_table, setup

BENCHMARK = "moe_consumers_speed"


def spice_step(seed: int):
    """A SPiCE training step (closure) at the sizes of ``benchmarks/spice/run.py``."""
    from sci_moe.molecules import ATOM_FEATURE_DIM, BOND_FEATURE_DIM, collate_ensembles
    from sci_moe.molecules.spice import build_model
    from sci_moe.testing import random_ensemble_graph

    torch.manual_seed(seed)
    model = build_model(
        "spice",
        n_targets=3,
        atom_dim=ATOM_FEATURE_DIM,
        bond_dim=BOND_FEATURE_DIM,
        hidden=32,
        num_layers=2,
        num_rbf=16,
        cutoff_nm=0.5,
        num_experts=8,
        top_k=2,
        heads=4,
        noise_std=0.1,
    )
    mols = [
        random_ensemble_graph(
            12 + (s % 9), 6, seed * 1000 + s, 3, ATOM_FEATURE_DIM, BOND_FEATURE_DIM
        )
        for s in range(16)
    ]
    batches = [collate_ensembles(mols[i : i + 4]) for i in range(0, 16, 4)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    state = {"i": 0}

    def step():
        batch = batches[state["i"] % len(batches)]
        state["i"] += 1
        loss, _ = model.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def lm_step(seed: int):
    """A training step (closure) of the default byte-level MoE LM."""
    from sci_moe.language import MoELMConfig, MoETransformerLM

    torch.manual_seed(seed)
    cfg = MoELMConfig()
    model = MoETransformerLM(cfg)
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, cfg.vocab_size, (8, 16, cfg.seq_len + 1), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    state = {"i": 0}

    def step():
        w = data[state["i"] % data.shape[0]]
        state["i"] += 1
        ce, aux, _ = model.loss(w[:, :-1], w[:, 1:])
        opt.zero_grad(set_to_none=True)
        (ce + aux).backward()
        opt.step()

    return step


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="steps per block (20; quick 8)")
    p.add_argument("--repeats", type=int, default=5, help="timed blocks (default 5)")
    p.add_argument("--label", default="", help="suffix of the case names (e.g. before/after)")
    p.add_argument("--ab-old", default=None, help="older sci_moe copy: interleaved A/B run")
    p.add_argument("--ab-commit", default="", help="--ab-old: the commit of that copy")
    p.add_argument("--rounds", type=int, default=3, help="--ab-old rounds (default 3)")
    args = p.parse_args(argv)
    setup(args)
    if args.ab_old:
        return ab_main(args)
    steps = args.steps or (8 if args.quick else 20)
    t0 = time.perf_counter()
    other = OtherLoad()
    machine = machine_info(seed=args.seed, steps=steps, repeats=args.repeats)
    rows, table = [], []
    for name, make in (("spice", spice_step), ("lm", lm_step)):
        step = make(args.seed)
        for _ in range(steps):  # warm-up block
            step()
        times = []
        for _ in range(args.repeats):
            s0 = time.perf_counter()
            for _ in range(steps):
                step()
            times.append(time.perf_counter() - s0)
        med = sorted(times)[len(times) // 2]
        rate = steps / med
        spread = (max(times) - min(times)) / med
        case = f"{name}{(' ' + args.label) if args.label else ''}"
        rows.append(Row(case, "steps_per_s", rate, "steps/s"))
        table.append([case, steps, args.repeats, rate, 1e3 / rate, spread])
        print(f"{case}: {rate:.2f} steps/s", flush=True)
    print_table(["model", "steps/block", "blocks", "steps/s", "ms/step", "spread"], table)
    return finish(args, BENCHMARK, machine, rows, other, t0)


def _child(args, old: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if old:
        env["PYTHONPATH"] = old + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [sys.executable, __file__, "--json", out, "--seed", str(args.seed)]
        cmd += ["--repeats", str(args.repeats), "--threads", str(torch.get_num_threads())]
        cmd += ["--steps", str(args.steps or (8 if args.quick else 20))]
        subprocess.run(cmd, env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return {r["case"]: r["value"] for r in json.load(f)["rows"]}


def ab_main(args) -> int:
    """``--ab-old``: alternate before/after processes, ratios per round."""
    t0 = time.perf_counter()
    other = OtherLoad()
    machine = machine_info(
        seed=args.seed, rounds=args.rounds, before=args.ab_commit or args.ab_old, after="checkout"
    )
    runs = {"before": [], "after": []}
    for r in range(args.rounds):
        for who in ("before", "after") if r % 2 == 0 else ("after", "before"):
            runs[who].append(_child(args, args.ab_old if who == "before" else None))
            print(f"round {r + 1} {who}: {runs[who][-1]}", flush=True)
    rows, table = [], []
    for name in runs["before"][0]:
        b = [x[name] for x in runs["before"]]
        a = [x[name] for x in runs["after"]]
        ratio = statistics.median(y / x for x, y in zip(b, a, strict=True))
        case_b, case_a = f"{name} before (interleaved)", f"{name} after (interleaved)"
        rows.append(Row(case_b, "steps_per_s", statistics.median(b), "steps/s"))
        rows.append(Row(case_a, "steps_per_s", statistics.median(a), "steps/s", case_b, ratio))
        table.append([name, statistics.median(b), statistics.median(a), ratio])
    print_table(["model", "before steps/s", "after steps/s", "after / before"], table)
    return finish(args, BENCHMARK, machine, rows, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
