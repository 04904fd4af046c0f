"""Baselines for function-on-function regression, with the regressor's fit/predict API.

* :class:`FunctionalLinearModel`: ``y(t) = a(t) + sum_j int beta_j(s, t) x_j(s) ds`` with
  inputs, outputs and ``beta`` in a cubic B-spline basis (least-squares basis
  coefficients, ridge penalty chosen by leave-one-out, scikit-learn ``RidgeCV``).
* :class:`GridMLP`: an MLP on the inputs linearly interpolated to an equispaced grid.
* :class:`ObservationGRU`: a GRU over the time-ordered observations of all inputs
  (features ``(t, x, Delta t, one-hot j)``), its last state read out on the output grid.

Outputs are predicted on the training output grid and linearly interpolated to the
query times. The two neural baselines train on the package's engine
(:class:`sci_moe.train.Trainer`: full batches, constant learning rate; on their
``device``, the CPU by default). Given validation
data, their ``fit`` evaluates ``val_rel_l2`` (the mean relative L2 error of the validation
outputs) every ``eval_every`` steps and keeps the best weights; with ``stop_when_flat``
``steps`` is a cap and the fit stops once that curve is flat (the engine's rule,
:class:`~sci_moe.train.TrainConfig`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch
from scipy.interpolate import BSpline
from torch import nn

from sci_moe._util import module_device
from sci_moe.train import ShuffledBatches, TrainConfig, Trainer

from ..samples import check_inputs, check_outputs
from ..scaling import FunctionScaler

__all__ = ["FunctionalLinearModel", "GridMLP", "ObservationGRU", "bspline_basis"]


def bspline_basis(t: np.ndarray, num_basis: int, degree: int = 3) -> np.ndarray:
    """Clamped B-spline design matrix on ``[0, 1]`` with equispaced knots.

    Parameters
    ----------
    t : ndarray, shape (n,)
        Points in ``[0, 1]``.
    num_basis : int
        ``>= degree + 1``.
    degree : int

    Returns
    -------
    ndarray, shape (n, num_basis)
    """
    if num_basis < degree + 1:
        raise ValueError(f"num_basis must be >= degree + 1 = {degree + 1}, got {num_basis}")
    inner = np.linspace(0.0, 1.0, num_basis - degree + 1)
    knots = np.concatenate([[0.0] * degree, inner, [1.0] * degree])
    return BSpline.design_matrix(np.clip(t, 0.0, 1.0), knots, degree).toarray()


class _Baseline:
    def __init__(
        self,
        seed: int = 0,
        domain=None,
        eval_every: int = 25,
        stop_when_flat: float | None = None,
        flat_min_steps: int = 0,
        device: str | None = None,
    ) -> None:
        self.seed, self.domain = seed, domain
        self.eval_every, self.stop_when_flat = eval_every, stop_when_flat
        self.flat_min_steps = flat_min_steps
        self.device = device
        self.scaler: FunctionScaler | None = None
        self.fit_seconds = 0.0
        self.result = None  # the engine's TrainResult of the neural baselines

    def _setup(self, inputs, outputs):
        raw_in = check_inputs(inputs, domain=self.domain)
        raw_out = check_outputs(outputs, len(raw_in), self.domain)
        self.scaler = FunctionScaler.fit(raw_in, raw_out, self.domain)
        scaled = self.scaler.transform_inputs(inputs)
        outs = self.scaler.transform_outputs(outputs, len(scaled))
        self.out_grid = np.unique(np.concatenate([t for t, _ in outs]))
        target = np.array([np.interp(self.out_grid, t, v) for t, v in outs])
        return scaled, target

    def fit(self, inputs: Sequence, outputs: Sequence, *, validation=None):
        """Train on ``inputs[i]`` (list of ``J`` ``(times, values)``) -> ``outputs[i]``.

        Parameters
        ----------
        inputs, outputs
            Training samples.
        validation : (inputs, outputs), optional
            Evaluated every ``eval_every`` steps and at the end (``val_rel_l2``); the
            best weights are kept, and ``stop_when_flat`` stops a flat curve.

        Returns
        -------
        self
        """
        torch.manual_seed(self.seed)
        t0 = time.perf_counter()
        scaled, target = self._setup(inputs, outputs)
        self._validation = None
        if validation is not None:  # scaled once: the inputs and (times, values) outputs
            v_in = self.scaler.transform_inputs(validation[0])
            self._validation = (v_in, self.scaler.transform_outputs(validation[1], len(v_in)))
        self._fit(scaled, target)
        self.fit_seconds = time.perf_counter() - t0
        return self

    def _val_rel_l2(self) -> dict:
        """The mean relative L2 error of the validation outputs at their own times."""
        scaled, outs = self._validation
        errs = []
        for row, (t, v) in zip(self._predict(scaled), outs, strict=True):
            seen = np.isfinite(v)
            p = self.scaler.inverse_outputs(np.interp(t[seen], self.out_grid, row))
            y = self.scaler.inverse_outputs(np.asarray(v)[seen])
            errs.append(np.linalg.norm(p - y) / max(float(np.linalg.norm(y)), 1e-12))
        return {"val_rel_l2": float(np.mean(errs))}

    def _train(self, module: nn.Module, loss_fn, n: int, collate, **options) -> None:
        """At most ``self.steps`` full-batch steps of ``module`` on the engine (constant
        LR), with the validation curve and the flat stop when :meth:`fit` got validation."""
        check = getattr(self, "_validation", None) is not None
        cfg = TrainConfig(
            **{
                "steps": self.steps,
                "batch_size": n,
                "lr": self.lr,
                "seed": self.seed,
                "schedule": "constant",
                "warmup": 0.0,
                "grad_clip": None,
                "eval_every": self.eval_every if check else 0,
                "monitor": "val_rel_l2",
                "stop_when_flat": self.stop_when_flat if check else None,
                "flat_min_steps": self.flat_min_steps,
                "progress": False,
                "device": self.device,
                **options,
            }
        )
        data = ShuffledBatches(n, n, collate, self.seed, shuffle=False)
        evaluate = (lambda _: self._val_rel_l2()) if check else None
        trainer = Trainer(module, loss_fn, data, cfg, evaluate=evaluate, name=type(self).__name__)
        self.result = trainer.fit()

    def predict(self, inputs: Sequence, query_times) -> np.ndarray:
        """Predictions at ``query_times``, shape ``(N, M)``, in output units."""
        if self.scaler is None:
            raise ValueError("call fit(inputs, outputs) first")
        q = self.scaler.scale_query(query_times)
        y = self._predict(self.scaler.transform_inputs(inputs))
        y = np.array([np.interp(q, self.out_grid, row) for row in y])
        return self.scaler.inverse_outputs(y)


class FunctionalLinearModel(_Baseline):
    """Functional linear model in a B-spline basis (see the module docstring).

    Parameters
    ----------
    num_basis : int
        B-spline functions for inputs and outputs.
    alphas : sequence of float, optional
        Ridge penalties tried by leave-one-out (default ``logspace(-4, 3, 15)``).
    seed : int
    domain : (float, float), optional
    """

    def __init__(self, num_basis: int = 12, alphas=None, seed=0, domain=None) -> None:
        super().__init__(seed, domain)
        self.num_basis = num_basis
        self.alphas = tuple(np.logspace(-4, 3, 15)) if alphas is None else tuple(alphas)

    def _coeffs(self, scaled) -> np.ndarray:
        nb = self.num_basis
        rows = []
        for s in scaled:
            c = []
            for t, v in s:
                A = bspline_basis(t, nb)
                c.append(np.linalg.solve(A.T @ A + 1e-6 * np.eye(nb), A.T @ v))
            rows.append(np.concatenate(c))
        return np.array(rows)

    def _fit(self, scaled, target):
        from sklearn.linear_model import RidgeCV

        self.ridge = RidgeCV(alphas=self.alphas).fit(self._coeffs(scaled), target)

    def _predict(self, scaled):
        return self.ridge.predict(self._coeffs(scaled))


class GridMLP(_Baseline):
    """MLP on inputs interpolated to a grid (see the module docstring).

    Parameters
    ----------
    grid_size : int
        Interpolation points per input function.
    hidden : int
    steps : int
        Full-batch AdamW steps (>= 1); with ``stop_when_flat``, the cap.
    lr, weight_decay : float
        Learning rate and AdamW's decoupled decay of the weight matrices.
    seed : int
    domain : (float, float), optional
    eval_every, stop_when_flat, flat_min_steps
        The validation curve and its flat stop (module docstring;
        :class:`~sci_moe.train.TrainConfig`): used when :meth:`fit` gets validation data.
    device : str, optional
        Where the network trains and predicts (``"cpu"``, ``"cuda"``, ``"cuda:N"``;
        :class:`~sci_moe.train.TrainConfig`'s ``device``, default the CPU): the features
        are built on the CPU and moved there, predictions come back as numpy arrays.
    """

    def __init__(
        self,
        grid_size: int = 32,
        hidden: int = 64,
        steps: int = 1000,
        lr=1e-3,
        weight_decay=1e-4,
        seed=0,
        domain=None,
        eval_every: int = 25,
        stop_when_flat: float | None = None,
        flat_min_steps: int = 0,
        device: str | None = None,
    ) -> None:
        super().__init__(seed, domain, eval_every, stop_when_flat, flat_min_steps, device)
        self.grid_size, self.hidden, self.steps = grid_size, hidden, steps
        self.lr, self.weight_decay = lr, weight_decay

    def _features(self, scaled) -> torch.Tensor:
        g = np.linspace(0.0, 1.0, self.grid_size)
        x = np.array([np.concatenate([np.interp(g, t, v) for t, v in s]) for s in scaled])
        return torch.as_tensor(x, dtype=torch.get_default_dtype())

    def _fit(self, scaled, target):
        x = self._features(scaled)
        y = torch.as_tensor(target, dtype=x.dtype)
        self.net = nn.Sequential(
            nn.Linear(x.shape[1], self.hidden),
            nn.GELU(),
            nn.Linear(self.hidden, self.hidden),
            nn.GELU(),
            nn.Linear(self.hidden, y.shape[1]),
        )
        self._train(
            self.net,
            lambda net, b: (net(b[0]) - b[1]).pow(2).mean(),
            len(x),
            lambda idx: (x[idx], y[idx]),
            optimizer="adamw",
            weight_decay=self.weight_decay,
        )

    @torch.no_grad()
    def _predict(self, scaled):
        x = self._features(scaled).to(module_device(self.net))
        return self.net(x).cpu().numpy()


class ObservationGRU(_Baseline):
    """GRU over the time-ordered observations (see the module docstring).

    Parameters
    ----------
    hidden : int
    steps : int
        Full-batch Adam steps (>= 1); with ``stop_when_flat``, the cap.
    lr : float
    seed : int
    domain : (float, float), optional
    eval_every, stop_when_flat, flat_min_steps
        The validation curve and its flat stop (module docstring;
        :class:`~sci_moe.train.TrainConfig`): used when :meth:`fit` gets validation data.
    device : str, optional
        Where the network trains and predicts (``"cpu"``, ``"cuda"``, ``"cuda:N"``;
        :class:`~sci_moe.train.TrainConfig`'s ``device``, default the CPU): the features
        are built on the CPU and moved there, predictions come back as numpy arrays.
    """

    def __init__(
        self,
        hidden: int = 32,
        steps: int = 150,
        lr=1e-2,
        seed=0,
        domain=None,
        eval_every: int = 25,
        stop_when_flat: float | None = None,
        flat_min_steps: int = 0,
        device: str | None = None,
    ):
        super().__init__(seed, domain, eval_every, stop_when_flat, flat_min_steps, device)
        self.hidden, self.steps, self.lr = hidden, steps, lr

    def _sequences(self, scaled):
        dev = module_device(self.gru)
        return self._pack([x.to(dev) for x in self._features(scaled)])

    @staticmethod
    def _pack(seqs):
        """The padded, packed batch of ``seqs`` (on their device; the lengths stay on the
        CPU, as packing needs them)."""
        lengths = torch.tensor([len(x) for x in seqs])
        padded = nn.utils.rnn.pad_sequence(seqs, batch_first=True)
        return nn.utils.rnn.pack_padded_sequence(
            padded, lengths, batch_first=True, enforce_sorted=False
        )

    def _features(self, scaled) -> list[torch.Tensor]:
        J = len(scaled[0])
        seqs = []
        for s in scaled:
            ev = [(t, v, j) for j, (ts, vs) in enumerate(s) for t, v in zip(ts, vs, strict=True)]
            ev.sort(key=lambda e: (e[0], e[2]))
            t = np.array([e[0] for e in ev])
            f = np.zeros((len(ev), 3 + J))
            f[:, 0], f[:, 1] = t, [e[1] for e in ev]
            f[:, 2] = np.diff(t, prepend=0.0)
            f[np.arange(len(ev)), 3 + np.array([e[2] for e in ev])] = 1.0
            seqs.append(torch.as_tensor(f, dtype=torch.get_default_dtype()))
        return seqs

    def _forward(self, packed):
        _, h = self.gru(packed)
        return self.head(h[-1])

    def _fit(self, scaled, target):
        seqs = self._features(scaled)
        y = torch.as_tensor(target, dtype=torch.get_default_dtype())
        self.gru = nn.GRU(seqs[0].shape[1], self.hidden, batch_first=True)
        self.head = nn.Linear(self.hidden, y.shape[1])
        self._train(  # batches of sequences, packed on the device in the loss
            nn.ModuleList([self.gru, self.head]),
            lambda _, b: (self._forward(self._pack(b[0])) - b[1]).pow(2).mean(),
            len(seqs),
            lambda idx: ([seqs[i] for i in idx], y[idx]),
            optimizer="adam",
        )

    @torch.no_grad()
    def _predict(self, scaled):
        return self._forward(self._sequences(scaled)).cpu().numpy()
