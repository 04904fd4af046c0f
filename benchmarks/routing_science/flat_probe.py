"""One-seed probe: does more training make part (a)'s runs flat (``FLAT_RULE`` of run.py)?

Part (a) of ``run.py`` trains every run with the language trainer's warm-up (30 steps)
and cosine decay to 10 % of the peak LR (``min_lr_ratio`` 0.1, the engine's default), so
the end of every run already lies on a finished decayed schedule. This probe trains
seed 0 of part (a)'s models (same model, batches, Switch loss, beta) with more steps and
a higher peak LR, and reports per run the final validation loss and the relative gain of
the last fifth of the steps (``FLAT_RULE`` asks for < 1 %). Rows: case
``<E>c2/<method>/lr<lr>/<steps>``, metrics ``val_loss``, ``val_ppl``, ``tail_gain``
(per cent), ``converged`` (0/1), ``wall_s``; the curves are in ``machine/curves``. The JSON
is written after every training. Run:
``python benchmarks/routing_science/flat_probe.py --threads 1 [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

from _common import Row, base_parser, machine_info, setup, write_json
from _routing_science import BETA, FLAT_RULE, MODEL, SWITCH_COEF, flat, mcfg, tcfg

from sci_moe.language import load_corpus, train

# run.py (part a's model, schedule and flatness rule), under a name of its own

BENCHMARK = "routing_science_flat_probe"
# (experts, method, steps, peak lr); k = 2, seed 0
RUNS = (
    (8, "top-k", 1800, 3e-3),
    (8, "top-k", 3600, 3e-3),
    (8, "top-k", 7200, 3e-3),
    (8, "top-k", 14400, 3e-3),
    (8, "top-k", 3600, 1e-2),
    (32, "default", 3600, 3e-3),
)
QUICK_RUNS = ((8, "top-k", 60, 3e-3), (8, "default", 60, 3e-3))


def tail_gain(steps: list[int], loss: list[float], tail: float = 0.2) -> float:
    """Per cent by which the best loss after ``(1 - tail)`` of the steps is below the best
    loss up to there (``FLAT_RULE``: flat when < 1)."""
    cut = steps[-1] * (1.0 - tail)
    head = min(v for s, v in zip(steps, loss, strict=True) if s <= cut)
    rest = min(v for s, v in zip(steps, loss, strict=True) if s > cut)
    return 100.0 * (head - rest) / head


def main() -> None:
    args = base_parser(__doc__.splitlines()[0]).parse_args()
    if args.threads is None:
        args.threads = 1
    setup(args)
    corpus = load_corpus()
    rows: list[Row] = []
    curves: dict = {}
    for E, method, steps, lr in QUICK_RUNS if args.quick else RUNS:
        moe = {"load_balance_coef": SWITCH_COEF}
        if method == "default":
            moe.update(default_moe=True, default_beta=BETA[(E, 2)])
        p = dict(steps=steps, eval_interval=25 if args.quick else 50, eval_batches=8)
        t0 = time.perf_counter()
        h = train(mcfg(E, 2, **moe), tcfg(p, args.seed, lr=lr), corpus=corpus)
        wall = time.perf_counter() - t0
        case = f"{E}c2/{method}/lr{lr:g}/{steps}"
        gain = tail_gain(h["step"], h["val_loss"])
        rows += [
            Row(case, "val_loss", h["val_loss"][-1], "nats"),
            Row(case, "val_ppl", h["val_ppl"][-1], "ppl"),
            Row(case, "tail_gain", gain, "%"),
            Row(case, "converged", float(flat(h["step"], h["val_loss"])), "bool"),
            Row(case, "wall_s", wall, "s"),
        ]
        curves[case] = {"step": h["step"], "val_loss": h["val_loss"]}
        print(
            f"{case}: val loss {h['val_loss'][-1]:.4f} ppl {h['val_ppl'][-1]:.3f} "
            f"last-fifth gain {gain:.2f} % ({wall:.0f} s)",
            flush=True,
        )
        if args.json is not None:
            machine = machine_info(
                seed=args.seed,
                quick=args.quick,
                model=MODEL,
                flat_rule=FLAT_RULE,
                schedule="warm-up 30 steps, cosine to 0.1 x peak LR",
                curves=curves,
                command=" ".join(["python", *sys.argv]),
            )
            write_json(args.json, BENCHMARK, machine, rows)


if __name__ == "__main__":
    main()
