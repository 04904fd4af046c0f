"""``sci-moe train fame``: FAME function-on-function regression on a built-in task.

Four tasks (``--task``):

* ``regime`` (default): the regime-switching nonlinear driven ODE of
  :func:`sci_moe.functional.fame.make_ode_data` (``y' = -y^3 + sin 2x`` or ``-2y + x^2/2``
  by the sign of the input's mean level; exact truth), one input function per sample
  observed at a random 25-100 % of a 50-point grid;
* ``linear``: ``y' = -1.5 y + x(t)`` from the same module (exact truth);
* ``oscillator``: the forced, stiffness-modulated damped oscillator of
  :func:`sci_moe.functional.fame.make_oscillator_data`, whose responses are exact to solver
  tolerance (a known truth); two irregularly observed input functions per sample;
  fresh train, validation and test sets drawn from ``--data-seed``.
* ``elnino``: next year's monthly Nino 1+2 sea-surface temperatures from this year's
  (:func:`sci_moe.data.elnino.elnino_next_year`; statsmodels ships the data); input
  years up to 1989 train, 1990-1994 validate, 1995 on test.

The regressor (:class:`sci_moe.functional.fame.FunctionOnFunctionRegressor`) trains on the
engine with validation every ``--eval-every`` steps and early stopping after
``--patience`` evaluations without improvement; the best validation weights are tested.
The defaults are the setting of ``benchmarks/fame/run.py`` (issue 45). Writes
``OUT/model.pt`` (:meth:`FunctionOnFunctionRegressor.save`; read it with
``FunctionOnFunctionRegressor.load``; CPU tensors), ``OUT/results.json`` (test
relative L2 error, and that of predicting the training mean curve) and the engine's
files. With ``--device cuda`` FAME trains, validates and predicts on the GPU (the task's
paths are built on the CPU and moved there; the errors are computed on the CPU).

Examples
--------
.. code-block:: console

    $ sci-moe train fame --out runs/fame
    $ sci-moe train fame --out runs/fame --steps 2000 --max-hours 1
    $ sci-moe train fame --out runs/fame --steps 2000 --max-hours 1 --resume
    $ sci-moe train fame --out runs/elnino --task elnino --num-experts 1 --steps 300
    $ sci-moe train fame --out runs/fame-gpu --device cuda
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._util import check_int_attr
from ...functional.fame.train import FAMETrainConfig
from ._common import TrainMethod

__all__ = ["METHOD", "TASKS", "FAMERunConfig", "load_task", "run"]

#: The built-in tasks of ``--task``.
TASKS = ("regime", "linear", "oscillator", "elnino")
# FAMEConfig fields the command sets (num_functions comes from the task)
_MODEL_FIELDS = (
    "num_experts",
    "hidden",
    "expert_hidden",
    "attention_dim",
    "decoder_hidden",
    "num_quadrature",
    "substeps",
    "spline",
    "bidirectional",
    "cross_attention",
)


@dataclass
class FAMERunConfig(FAMETrainConfig):
    """Options of ``sci-moe train fame``: training (the engine's), data and model.

    Parameters
    ----------
    task : {"regime", "linear", "oscillator", "elnino"}
        The built-in task: a driven ODE (regime-switching nonlinear, or linear), the
        forced oscillator (all with an exact truth) or El Nino next-year temperatures.
    n_train : int
        Training samples of the generated tasks.
    n_val : int
        Validation samples of the generated tasks.
    n_test : int
        Test samples of the generated tasks.
    observed : tuple of float
        Generated tasks: the fraction of the observation grid seen per input function is
        drawn uniformly from this range (two numbers in (0, 1]).
    data_seed : int
        Seed of the generated samples and their observation times.
    num_experts : int
        Expert vector fields per direction (1: a plain neural CDE).
    hidden : int
        Encoder CDE state size per direction.
    expert_hidden : int
        Width of each expert MLP.
    attention_dim : int
        Width of the attention layers and of the decoder's control path.
    decoder_hidden : int
        Decoder CDE state size.
    num_quadrature : int
        Nodes of the attention quadrature (the CDE solves on these knots).
    substeps : int
        rk4 steps per quadrature interval.
    spline : {"natural", "not-a-knot", "hermite"}
        Interpolant of the observations.
    bidirectional : bool
        Run the backward CDE too (the paper's model).
    cross_attention : bool
        Mix functions by cross-attention (else their mean).
    """

    steps: int = 500
    lr: float = 1e-2
    eval_every: int = 25
    patience: int = 6
    monitor: str = "val_rel_l2"
    task: str = "regime"
    n_train: int = 100
    n_val: int = 30
    n_test: int = 50
    observed: tuple[float, float] = (0.25, 1.0)
    data_seed: int = 0
    num_experts: int = 4
    hidden: int = 8
    expert_hidden: int = 16
    attention_dim: int = 8
    decoder_hidden: int = 8
    num_quadrature: int = 9
    substeps: int = 1
    spline: str = "natural"
    bidirectional: bool = True
    cross_attention: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        for name, lo in (("n_train", 2), ("n_val", 1), ("n_test", 1)):
            check_int_attr(self, name, lo)
        check_int_attr(self, "data_seed")
        self.observed = tuple(self.observed)
        lo_hi = self.observed
        if len(lo_hi) != 2 or not all(
            isinstance(f, int | float) and not isinstance(f, bool) and 0 < f <= 1 for f in lo_hi
        ):
            raise ValueError(f"observed must be two fractions in (0, 1], got {self.observed!r}")
        if lo_hi[0] > lo_hi[1]:
            raise ValueError(f"observed must be a range (low, high), got {self.observed!r}")
        self.model_config(1)  # FAMEConfig's checks name the field

    def model_config(self, num_functions: int):
        """The :class:`~sci_moe.functional.fame.FAMEConfig` of these options."""
        from ...functional.fame import FAMEConfig

        return FAMEConfig(
            num_functions=num_functions, **{k: getattr(self, k) for k in _MODEL_FIELDS}
        )


def load_task(cfg: FAMERunConfig) -> dict:
    """The task's splits: ``train``/``val``/``test`` as ``(inputs, outputs)``, the test
    ``truth`` (N, M) on ``times`` (M,), and the time ``domain``."""
    if cfg.task == "elnino":
        from ...data.elnino import ELNINO_DOMAIN, ELNINO_MONTHS, elnino_next_year

        X, Y, years, targets = elnino_next_year()
        parts = {
            "train": np.flatnonzero(years <= 1989),
            "val": np.flatnonzero((years >= 1990) & (years <= 1994)),
            "test": np.flatnonzero(years >= 1995),
        }
        out = {k: ([X[i] for i in idx], [Y[i] for i in idx]) for k, idx in parts.items()}
        return {
            **out,
            "truth": targets[parts["test"]],
            "times": ELNINO_MONTHS,
            "domain": ELNINO_DOMAIN,
        }
    from ...functional.fame import make_ode_data, make_oscillator_data
    from ...train import derive_seed

    sets = {}
    for k, (name, n) in enumerate(
        (("train", cfg.n_train), ("val", cfg.n_val), ("test", cfg.n_test))
    ):
        seed = derive_seed(cfg.data_seed, k)
        if cfg.task == "oscillator":
            sets[name] = make_oscillator_data(n, seed=seed, observed=cfg.observed)
        else:
            sets[name] = make_ode_data(cfg.task, n, seed=seed, observed=cfg.observed)
    test = sets["test"]
    return {
        **{k: (d.inputs, d.output_pairs()) for k, d in sets.items()},
        "truth": test.outputs,
        "times": test.output_times,
        "domain": (0.0, float(test.output_times[-1])),
    }


def run(cfg: FAMERunConfig, out: Path, resume: bool) -> dict:
    """Build the task, train FAME on the engine, test the best validation weights."""
    from ...functional.fame import FunctionOnFunctionRegressor, relative_l2
    from ...train import current_context

    task = load_task(cfg)
    X, Y = task["train"]
    reg = FunctionOnFunctionRegressor(cfg.model_config(len(X[0])), train=cfg, domain=task["domain"])
    reg.fit(X, Y, validation=task["val"], out_dir=out, resume=resume)
    res = reg.result
    results: dict = {
        "train": res.to_dict(),
        "task": cfg.task,
        "data": {k: len(task[k][0]) for k in ("train", "val", "test")},
        "parameters": sum(p.numel() for p in reg.model.parameters()),
    }
    if not res.finished or not current_context().is_main:
        return results
    reg.save(out / "model.pt")
    truth = task["truth"]
    pred = reg.predict(task["test"][0], task["times"])
    mean_curve = np.mean([np.interp(task["times"], t, v) for t, v in Y], axis=0)
    results["test_rel_l2"] = relative_l2(pred, truth)
    results["test_rel_l2_mean_predictor"] = relative_l2(np.tile(mean_curve, (len(truth), 1)), truth)
    best = next((e for e in res.evals if e["step"] == res.best_step), None)
    results["val_rel_l2_best"] = None if best is None else best.get("val_rel_l2")
    return results


METHOD = TrainMethod(
    name="fame",
    help="FAME: function-on-function regression with MoE neural CDEs",
    config=lambda: FAMERunConfig,
    run=run,
    outputs=("model.pt",),
    description=(
        "Train FAME (mixture-of-experts neural CDEs, Gao, Chen & Zhang 2025) on a built-in "
        "function-on-function task: a regime-switching nonlinear driven ODE (default), a "
        "linear one or the forced oscillator, all with an exact truth, or El Nino next-year "
        "temperatures; the weights with the best validation relative L2 "
        "error are tested against the truth and against predicting the training mean."
    ),
)
