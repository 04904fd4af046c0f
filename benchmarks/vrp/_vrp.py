"""Shared code of the long MoSES scripts (``train_long.py``, ``evaluate.py``): instances
keyed by seed, the resumable reference-cost cache, the learning-curve evaluation, the
models of a long run, and the plot of the curves.

Every evaluation or validation instance is generated alone from its own seed
(:func:`instance_seed`), so a reference cost (PyVRP at a time limit, greedy savings) is
stored once under ``"<variant>/N<customers>/<seed>"`` in a JSON cache
(:class:`ReferenceCache`) that any number of pieces fill in turn. The cache lives in
``benchmarks/vrp/cache/``, not in ``results/`` (the docs render every results JSON as a
table of rows; the cache has none).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

from sci_moe._util import atomic_save_json
from sci_moe.vrp import (
    HELD_OUT,
    SEEN,
    VARIANTS,
    MTVRPInstance,
    generate_instances,
    greedy_savings,
    solve_pyvrp,
)

#: Seeds of the evaluation instances start here; the validation (curve) instances at
#: :data:`VAL_SEED_BASE` (disjoint ranges: ``100_000`` seeds per variant).
EVAL_SEED_BASE = 50_000_000
VAL_SEED_BASE = 60_000_000
#: The models a long run trains, at equal budget (updates x batch x size distribution).
MODELS = ("unified", "moses", "basis")
#: Where the long run's policies and trainer checkpoints go by default (``--run-dir`` of
#: both scripts): beside its JSON, committed with it after every piece, because a
#: git-ignored work folder is lost between sessions, and with it every finished policy
#: the evaluation needs.
RUN_DIR = Path("benchmarks/vrp/results/vrp_train_long_files")
CACHE_FORMAT = "sci_moe.vrp.references/1"


def add_run_dir_argument(parser) -> None:
    """``--run-dir`` of both long scripts (the policies and training checkpoints), default
    :data:`RUN_DIR`."""
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=RUN_DIR,
        help=f"the policies and training checkpoints (default {RUN_DIR}: committed, so that "
        "a run in pieces goes on on a fresh machine)",
    )


def instance_seed(base: int, variant: str, index: int) -> int:
    """The seed of instance ``index`` of ``variant``: ``base + 100_000 v + index``."""
    if not 0 <= index < 100_000:
        raise ValueError(f"instance index must be in [0, 100000), got {index}")
    return base + 100_000 * VARIANTS.index(variant) + index


def instances(
    variants, customers: int, count: int, base: int = EVAL_SEED_BASE
) -> tuple[MTVRPInstance, list[str]]:
    """``count`` instances of each variant, each drawn alone from its seed (float64).

    Returns
    -------
    batch : MTVRPInstance
        Variant-major: the ``count`` instances of ``variants[0]`` first.
    keys : list of str
        The cache key of each instance (:func:`key`).
    """
    parts, keys = [], []
    for v in variants:
        for i in range(count):
            s = instance_seed(base, v, i)
            parts.append(generate_instances(1, customers, v, seed=s, dtype=torch.float64))
            keys.append(key(v, customers, s))
    return MTVRPInstance.cat(parts), keys


def key(variant: str, customers: int, seed: int) -> str:
    """The cache key of one instance."""
    return f"{variant}/N{customers}/{seed}"


def pyvrp_name(limit: float) -> str:
    """The cache field of PyVRP at ``limit`` seconds (``"pyvrp_1s"``, ``"pyvrp_0.5s"``)."""
    return f"pyvrp_{limit:g}s"


class ReferenceCache:
    """Reference costs of instances by key, in a JSON file rewritten atomically.

    ``{"format": ..., "entries": {key: {"savings": cost, "pyvrp_1s": cost, ...}}}``; a
    killed piece loses at most the entries since the last write.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.entries: dict[str, dict[str, float]] = {}
        if self.path.is_file():
            doc = json.loads(self.path.read_text())
            if doc.get("format") != CACHE_FORMAT:
                raise SystemExit(f"{self.path} is not a reference cache ({CACHE_FORMAT})")
            self.entries = doc["entries"]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_json(self.path, {"format": CACHE_FORMAT, "entries": self.entries})

    def missing(self, keys, fields) -> int:
        """How many (key, field) values are still to compute."""
        return sum(f not in self.entries.get(k, {}) for k in keys for f in fields)

    def costs(self, keys, field: str) -> torch.Tensor:
        """The cached ``field`` of every key, float64 (all must be there)."""
        return torch.tensor([self.entries[k][field] for k in keys], dtype=torch.float64)

    def fill(
        self,
        batch: MTVRPInstance,
        keys,
        limits,
        deadline: float = math.inf,
        every_s: float = 60.0,
        log=print,
    ) -> int:
        """Compute the missing savings and PyVRP costs (PyVRP seed 0) until ``deadline``.

        Parameters
        ----------
        batch : MTVRPInstance
            The instances of ``keys``, in order.
        keys : list of str
        limits : sequence of float
            PyVRP time limits in seconds.
        deadline : float
            ``time.perf_counter()`` after which no new instance is started.
        every_s : float
            Write the file at least this often (seconds).

        Returns
        -------
        int
            The values still missing (0: complete).
        """
        fields = ["savings", *(pyvrp_name(t) for t in limits)]
        last, done = time.perf_counter(), 0
        for b, k in enumerate(keys):
            if time.perf_counter() >= deadline:
                break
            entry = self.entries.setdefault(k, {})
            one = batch.index(slice(b, b + 1))
            if "savings" not in entry:
                entry["savings"] = float(greedy_savings(one)[0][0])
            for t in limits:
                if pyvrp_name(t) not in entry:
                    sol = solve_pyvrp(one, 0, t, seed=0)
                    if not sol["feasible"]:
                        raise SystemExit(f"PyVRP returned an infeasible solution on {k}")
                    entry[pyvrp_name(t)] = float(sol["cost"])
                    done += 1
            if time.perf_counter() - last >= every_s:
                self.save()
                last = time.perf_counter()
                log(f"references: {self.missing(keys, fields)} values left ({done} computed)")
        self.save()
        return self.missing(keys, fields)


def gap(cost: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-instance gap ``100 (cost / ref - 1)`` in %, float64."""
    return 100.0 * (cost.double() / ref - 1.0)


def curve_eval(batch: MTVRPInstance, keys, cache: ReferenceCache, field: str):
    """The learning-curve evaluation on a fixed set: ``extra_eval`` of the MoSES trainers.

    Greedy multi-start (no augmentation, on the policy's device), the best rollout per
    instance; returns
    ``curve_gap`` (mean gap to ``field``, %), ``curve_gap_savings`` and the means over the
    seen (:data:`~sci_moe.vrp.SEEN`) and held-out variants (``curve_gap_seen``,
    ``curve_gap_held_out``).
    """
    ref, sav = cache.costs(keys, field), cache.costs(keys, "savings")
    variant = [k.split("/")[0] for k in keys]
    seen = torch.tensor([v in SEEN for v in variant])
    held = torch.tensor([v in HELD_OUT for v in variant])
    dtype = None

    def evaluate(policy) -> dict:
        nonlocal dtype
        param = next(policy.parameters())
        dtype = param.dtype
        # decoded on the policy's device (a GPU run), compared with the references on the CPU
        _, _, cost = policy(batch.to(dtype=dtype, device=param.device), greedy=True)
        best = cost.min(1).values.cpu()
        g = gap(best, ref)
        out = {
            "curve_gap": float(g.mean()),
            "curve_gap_savings": float(gap(best, sav).mean()),
        }
        if seen.any():
            out["curve_gap_seen"] = float(g[seen].mean())
        if held.any():
            out["curve_gap_held_out"] = float(g[held].mean())
        return out

    return evaluate


def plot_curves(doc: dict, path: str | Path) -> Path:
    """Learning curves of a long run's JSON: curve gap to PyVRP vs cumulative updates.

    One line per (model, seed); the stage boundaries of MoSES are where its steps restart
    (its curve continues at the stage's offset); the mean gap of greedy savings on the
    same set is the dashed line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), constrained_layout=True)
    colours = dict(zip(MODELS, ("tab:blue", "tab:red", "tab:green"), strict=True))
    for seed, run in sorted(doc.get("runs", {}).items()):
        for model, rec in run.items():
            pts = rec.get("curve", [])
            if not pts:
                continue
            ax.plot(
                [p["update"] for p in pts],
                [p["curve_gap"] for p in pts],
                color=colours.get(model, "k"),
                alpha=0.8,
                label=f"{model} seed {seed}",
            )
    if doc.get("savings_gap") is not None:
        ax.axhline(doc["savings_gap"], ls="--", color="k", label="greedy savings")
    ax.set_xlabel("updates (equal budget; MoSES stages in turn)")
    ax.set_ylabel(f"validation gap to {doc.get('curve_reference', 'PyVRP')} (%)")
    ax.legend(fontsize=7, ncol=2)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
