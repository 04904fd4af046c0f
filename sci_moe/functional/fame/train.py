"""``FunctionOnFunctionRegressor``: fit FAME on lists of ``(times, values)`` and predict.

Training runs on the package's engine (:class:`sci_moe.train.Trainer`), with the options
of :class:`FAMETrainConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from sci_moe._util import module_device, to_device
from sci_moe.train import (
    MetricHistory,
    ShuffledBatches,
    TrainConfig,
    Trainer,
    TrainResult,
    seed_everything,
)

from ..paths import build_paths, path_summary, symmetric_grid
from ..scaling import FunctionScaler
from .model import FAME, FAMEConfig

__all__ = ["FAMETrainConfig", "FunctionOnFunctionRegressor", "PreparedInputs"]

#: ``format`` key of :meth:`FunctionOnFunctionRegressor.save` files.
MODEL_FORMAT = "sci-moe-fame/2"


@dataclass
class FAMETrainConfig(TrainConfig):
    """Training options of :class:`FunctionOnFunctionRegressor`: the engine's, with FAME's
    defaults.

    Parameters
    ----------
    steps : int
        Optimiser steps (Adam, full batches of ``batch_size`` reshuffled every epoch).
    batch_size : int
        Samples per step (all of them when there are fewer).
    lr : float
        Peak learning rate; cosine decay to ``min_lr_ratio * lr``, no warm-up.
    grad_clip : float or None
        Global gradient-norm clip.
    eval_every : int
        With validation data: evaluate every this many steps (0: only at the end).
    monitor : str
        ``val_loss`` (normalised MSE of the validation outputs) or ``val_rel_l2``.
    """

    steps: int = 200
    batch_size: int = 32
    lr: float = 5e-3
    optimizer: str = "adam"
    warmup: float = 0.0
    min_lr_ratio: float = 0.1
    grad_clip: float | None = 5.0
    eval_every: int = 0


@dataclass
class PreparedInputs:
    """Control paths of a set of samples on one knot grid (input of :class:`FAME`).

    Attributes
    ----------
    coeffs, reverse_coeffs : Tensor, shape (N, J, L - 1, 8)
    grid : Tensor, shape (L,)
    summary : Tensor, shape (N, J, 4)
        Path summaries, normalised with the training statistics.
    """

    coeffs: torch.Tensor
    reverse_coeffs: torch.Tensor
    grid: torch.Tensor
    summary: torch.Tensor

    def __len__(self) -> int:
        return self.coeffs.shape[0]

    def take(self, idx: torch.Tensor) -> PreparedInputs:
        """The samples ``idx``."""
        return PreparedInputs(
            self.coeffs[idx], self.reverse_coeffs[idx], self.grid, self.summary[idx]
        )


class FunctionOnFunctionRegressor:
    """Function-on-function regression with :class:`~sci_moe.functional.fame.FAME`.

    Inputs are lists of samples, each a list of ``J`` input functions given as
    ``(times, values)`` pairs observed at their own (irregular) times, ``NaN`` for
    missing values; outputs are one ``(times, values)`` per sample. Predictions are
    returned on any query grid inside the fitted time domain.

    Parameters
    ----------
    config : FAMEConfig, optional
        Model sizes; ``num_functions`` is taken from the data when omitted.
    steps : int, optional
        Adam steps of :meth:`fit` (default 200).
    batch_size : int, optional
        Default 32.
    lr : float, optional
        Adam learning rate (default 5e-3; cosine decay to 10 % over ``steps``).
    seed : int, optional
        Seeds the initialisation and the batch order (default 0).
    domain : (float, float), optional
        Time domain (default: the range of the training times).
    progress : bool, optional
        Show a tqdm bar during :meth:`fit` (default true).
    train : FAMETrainConfig, optional
        Every training option at once (the engine's: schedule, clipping, evaluation,
        checkpoints, budget, threads, device), instead of ``steps`` ... ``progress``.
    center : bool, optional
        Subtract the training outputs' mean curve (per time, linearly interpolated)
        before the network sees them and add it back to predictions (default true), so
        the network learns deviations from the mean function, as a functional linear
        model's intercept ``a(t)`` does; ``False``: only the global mean and standard
        deviation are removed.
    **config_kwargs
        Fields of :class:`FAMEConfig` when ``config`` is omitted.

    Attributes
    ----------
    history : list of float
        The training loss of every step.
    result : sci_moe.train.TrainResult or None
        What the engine did in the last :meth:`fit`.
    fit_seconds : float
        Optimisation wall time of the run (evaluations excluded).

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 1, 12)
    >>> X = [[(t, np.sin(a * t))] for a in range(1, 5)]
    >>> Y = [(t, np.cos(a * t)) for a in range(1, 5)]
    >>> reg = FunctionOnFunctionRegressor(steps=2, num_experts=2, hidden=4,
    ...     expert_hidden=4, attention_dim=4, decoder_hidden=4, num_quadrature=5,
    ...     progress=False).fit(X, Y)
    >>> reg.predict(X, np.linspace(0, 1, 7)).shape
    (4, 7)
    """

    def __init__(
        self,
        config: FAMEConfig | None = None,
        *,
        steps: int | None = None,
        batch_size: int | None = None,
        lr: float | None = None,
        seed: int | None = None,
        domain: tuple[float, float] | None = None,
        progress: bool | None = None,
        train: FAMETrainConfig | None = None,
        center: bool = True,
        **config_kwargs,
    ) -> None:
        if config is not None and config_kwargs:
            raise TypeError("pass either a FAMEConfig or its fields as keywords, not both")
        given = {
            k: v
            for k, v in dict(
                steps=steps, batch_size=batch_size, lr=lr, seed=seed, progress=progress
            ).items()
            if v is not None
        }
        if train is not None and given:
            raise TypeError(
                f"pass either train=FAMETrainConfig(...) or {', '.join(given)} as keywords, "
                "not both"
            )
        if train is not None and not isinstance(train, TrainConfig):
            raise TypeError(f"train must be a FAMETrainConfig, got {type(train).__name__}")
        self.train_config = train if train is not None else FAMETrainConfig(**given)
        self.config, self._config_kwargs = config, config_kwargs
        self.domain = domain
        self.center = bool(center)
        self.model: FAME | None = None
        self.scaler: FunctionScaler | None = None
        self.history: list[float] = []
        self.result: TrainResult | None = None
        self.fit_seconds = 0.0

    @property
    def batch_size(self) -> int:
        """Samples per training step and per prediction batch."""
        return self.train_config.batch_size

    # ------------------------------------------------------------------ data
    def prepare(self, inputs: Sequence) -> PreparedInputs:
        """Check, scale and turn raw inputs into control paths (after :meth:`fit`)."""
        self._check_fitted()
        return self._prepare(self.scaler.transform_inputs(inputs))

    def _prepare(self, scaled) -> PreparedInputs:
        c = self.model.config
        base = np.linspace(0.0, 1.0, c.num_quadrature)
        grid = symmetric_grid([t for s in scaled for t, _ in s], base)
        dtype = torch.get_default_dtype()
        summary = np.array([[path_summary(t, v, c.spline) for t, v in s] for s in scaled])
        summary = (summary - self._summary_mean) / self._summary_std
        return PreparedInputs(
            build_paths(scaled, grid, c.spline, dtype=dtype),
            build_paths(scaled, grid, c.spline, reverse=True, dtype=dtype),
            torch.as_tensor(grid, dtype=dtype),
            torch.as_tensor(summary, dtype=dtype),
        )

    def _check_fitted(self) -> None:
        if self.model is None:
            raise ValueError("call fit(inputs, outputs) first")

    # ----------------------------------------------------------------- train
    def _targets(self, outputs, n: int):
        """Normalised outputs on the union of their times, minus the mean curve:
        ``(query, target, mask)``."""
        outs = self.scaler.transform_outputs(outputs, n)
        query = np.unique(np.concatenate([t for t, _ in outs]))
        target = np.full((len(outs), len(query)), np.nan)
        for i, (t, v) in enumerate(outs):
            target[i, np.searchsorted(query, t)] = v
        if not hasattr(self, "_curve"):  # fit: the mean curve of the training outputs
            self._curve = (query, self._mean_curve(target) if self.center else 0.0 * query)
        target = target - self._curve_at(query)
        dtype = torch.get_default_dtype()
        mask = torch.as_tensor(np.isfinite(target))
        return (
            torch.as_tensor(query, dtype=dtype),
            torch.as_tensor(np.nan_to_num(target), dtype=dtype),
            mask,
        )

    @staticmethod
    def _mean_curve(target: np.ndarray) -> np.ndarray:
        """Mean over samples per time (observed values only), linearly filled where no
        sample is observed."""
        seen = np.isfinite(target)
        count = seen.sum(0)
        mean = np.where(seen, target, 0.0).sum(0) / np.maximum(count, 1)
        t = np.arange(target.shape[1])
        return np.interp(t, t[count > 0], mean[count > 0])

    def _curve_at(self, query: np.ndarray) -> np.ndarray:
        """The training mean output curve (normalised units) at scaled times ``query``."""
        times, values = self._curve
        return np.interp(np.asarray(query, dtype=np.float64), times, values)

    def _forward(self, b: PreparedInputs, query: torch.Tensor) -> torch.Tensor:
        return self.model(b.coeffs, b.grid, b.summary, query, b.reverse_coeffs)

    def fit(
        self,
        inputs: Sequence,
        outputs: Sequence,
        *,
        validation: tuple[Sequence, Sequence] | None = None,
        out_dir: str | Path | None = None,
        resume: bool = False,
        stop_after: int | None = None,
    ) -> FunctionOnFunctionRegressor:
        """Train on ``inputs[i]`` (``J`` functions) -> ``outputs[i]``.

        The loss is the mean squared error of the normalised outputs at their observed
        times (a mask handles outputs observed at different times). The loop is the
        engine's (:class:`sci_moe.train.Trainer`) with :attr:`train_config`; the model
        trains on its ``device`` (the paths are built on the CPU, each batch, the query
        times and the validation set are moved there; the metrics are computed on the
        CPU). :meth:`predict` and :meth:`mixture_weights` run where the model is.

        Parameters
        ----------
        inputs, outputs
            Training samples (see the class docstring).
        validation : (inputs, outputs), optional
            Evaluated every ``eval_every`` steps and at the end (``val_loss``: the
            normalised MSE, ``val_rel_l2``: the mean relative L2 error in output
            units); the weights with the best ``monitor`` are kept.
        out_dir : path, optional
            Where the engine writes its checkpoint and ``metrics.jsonl``.
        resume : bool
            Continue the run in ``out_dir`` exactly.
        stop_after : int, optional
            Return after this many steps of this call (a deliberate interruption).

        Returns
        -------
        self
        """
        from ..samples import check_inputs, check_outputs

        tcfg = self.train_config
        raw_in = check_inputs(inputs, domain=self.domain)
        raw_out = check_outputs(outputs, len(raw_in), self.domain)
        self.scaler = FunctionScaler.fit(raw_in, raw_out, self.domain)
        config = self.config or FAMEConfig(num_functions=len(raw_in[0]), **self._config_kwargs)
        if config.num_functions != self.scaler.num_functions:
            raise ValueError(
                f"config.num_functions={config.num_functions} but the samples have "
                f"{self.scaler.num_functions} input functions"
            )
        seed_everything(tcfg.seed)
        self.model = FAME(config)
        scaled = self.scaler.transform_inputs(inputs)
        summ = np.array([[path_summary(t, v, config.spline) for t, v in s] for s in scaled])
        self._summary_mean = summ.reshape(-1, summ.shape[-1]).mean(0)
        self._summary_std = summ.reshape(-1, summ.shape[-1]).std(0) + 1e-6
        data = self._prepare(scaled)
        self.__dict__.pop("_curve", None)
        query, target, mask = self._targets(outputs, len(scaled))
        N = len(data)

        def collate(idx: list[int]):
            i = torch.as_tensor(idx, dtype=torch.long)
            return data.take(i), target[i], mask[i]

        on: dict = {}  # the tensors the loss and the evaluation read, on the model's device

        def loss_fn(model, batch):
            b, y, m = batch
            return ((self._forward(b, on["query"]) - y) ** 2)[m].mean()

        evaluate = None
        if validation is not None:
            v_data = self.prepare(validation[0])
            v_query, v_target, v_mask = self._targets(validation[1], len(v_data))
            v_curve = self._curve_at(v_query.numpy())
            v_true = self.scaler.inverse_outputs(v_target.numpy() + v_curve)

            def evaluate(model) -> dict:
                vd, vq, vt = on["v_data"], on["v_query"], on["v_target"]
                bs, n_val = tcfg.batch_size, len(vd)
                chunks = [torch.arange(s, min(s + bs, n_val)) for s in range(0, n_val, bs)]
                pred = torch.cat([self._forward(vd.take(c.to(vt.device)), vq) for c in chunks])
                sq = (pred - vt) ** 2
                pred = pred.cpu()
                err = self.scaler.inverse_outputs(pred.numpy() + v_curve) - v_true
                m = v_mask.numpy()
                num = np.sqrt(np.where(m, err**2, 0.0).sum(1))
                den = np.sqrt(np.where(m, v_true**2, 0.0).sum(1))
                return {
                    "val_loss": float(sq[on["v_mask"]].mean()),
                    "val_rel_l2": float(np.mean(num / np.maximum(den, 1e-12))),
                }

        source = ShuffledBatches(N, min(tcfg.batch_size, N), collate, tcfg.seed, drop_last=True)
        history = MetricHistory("loss")
        trainer = Trainer(
            self.model,
            loss_fn,
            source,
            tcfg,
            evaluate=evaluate,
            out_dir=out_dir,
            hooks=[history],
            stateful={"history": history},
            meta={"fame": asdict(config), "n_train": N, "domain": list(self.scaler.domain)},
            name="FAME fit",
        )
        dev = trainer.device  # the engine has put the model there
        on["query"] = query.to(dev)
        if validation is not None:
            on.update(
                v_data=to_device(v_data, dev),
                v_query=v_query.to(dev),
                v_target=v_target.to(dev),
                v_mask=v_mask.to(dev),
            )
        self.result = trainer.fit(resume=resume, stop_after=stop_after)
        self.history = history.losses
        self.fit_seconds = self.result.train_time_s
        self.model.eval()
        return self

    # ----------------------------------------------------------------- files
    def save(self, path: str | Path) -> None:
        """Write the fitted model (weights, sizes, scaler) atomically to ``path``.

        Read it back with :meth:`load` (``torch.load(weights_only=True)`` safe).
        """
        from ..._util import atomic_torch_save

        self._check_fitted()
        sc = self.scaler
        atomic_torch_save(
            path,
            {
                "format": MODEL_FORMAT,
                "fame_config": asdict(self.model.config),
                "model": {k: v.cpu() for k, v in self.model.state_dict().items()},
                "scaler": {
                    "domain": list(sc.domain),
                    "input_mean": sc.input_mean.tolist(),
                    "input_std": sc.input_std.tolist(),
                    "output_mean": sc.output_mean,
                    "output_std": sc.output_std,
                },
                "summary_mean": self._summary_mean.tolist(),
                "summary_std": self._summary_std.tolist(),
                "curve": [self._curve[0].tolist(), np.asarray(self._curve[1]).tolist()],
                "center": self.center,
                "batch_size": self.batch_size,
            },
        )

    @classmethod
    def load(cls, path: str | Path) -> FunctionOnFunctionRegressor:
        """A fitted regressor from a file of :meth:`save` (ready to :meth:`predict`)."""
        state = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or state.get("format") != MODEL_FORMAT:
            raise ValueError(
                f"{path} is not a FAME model written by FunctionOnFunctionRegressor.save"
            )
        config = FAMEConfig(**state["fame_config"])
        reg = cls(config, batch_size=int(state["batch_size"]), progress=False)
        sc = state["scaler"]
        reg.scaler = FunctionScaler(
            tuple(sc["domain"]),
            np.asarray(sc["input_mean"]),
            np.asarray(sc["input_std"]),
            float(sc["output_mean"]),
            float(sc["output_std"]),
        )
        reg.domain = reg.scaler.domain
        reg._summary_mean = np.asarray(state["summary_mean"])
        reg._summary_std = np.asarray(state["summary_std"])
        reg.center = bool(state["center"])
        reg._curve = tuple(np.asarray(c, dtype=np.float64) for c in state["curve"])
        reg.model = FAME(config)
        reg.model.load_state_dict(state["model"])
        reg.model.eval()
        return reg

    # --------------------------------------------------------------- predict
    @torch.no_grad()
    def predict(self, inputs: Sequence, query_times) -> np.ndarray:
        """Predicted output functions at ``query_times``.

        Parameters
        ----------
        inputs : list (N) of list (J) of (times, values)
        query_times : array_like, shape (M,)
            Inside the fitted domain; any order.

        Returns
        -------
        ndarray, shape (N, M)
            In the units of the training outputs.
        """
        self._check_fitted()
        dev = module_device(self.model)
        data = to_device(self.prepare(inputs), dev)
        dtype = data.grid.dtype
        q = torch.as_tensor(self.scaler.scale_query(query_times), dtype=dtype)
        qd = q.to(dev)
        out = []
        for s in range(0, len(data), self.batch_size):
            b = data.take(torch.arange(s, min(s + self.batch_size, len(data)), device=dev))
            out.append(self.model(b.coeffs, b.grid, b.summary, qd, b.reverse_coeffs))
        pred = torch.cat(out).cpu().numpy()
        return self.scaler.inverse_outputs(pred + self._curve_at(q.numpy()))

    @torch.no_grad()
    def mixture_weights(self, inputs: Sequence) -> np.ndarray:
        """The per-function expert weights ``pi``, shape ``(N, J, K)``."""
        self._check_fitted()
        data = self.prepare(inputs)
        J = data.coeffs.shape[1]
        onehot = torch.eye(J, dtype=data.summary.dtype).expand(len(data), J, J)
        paths = torch.cat([data.summary, onehot], -1).reshape(-1, data.summary.shape[-1] + J)
        r = self.model.field.router(paths.to(module_device(self.model)))
        return r.weights.reshape(len(data), J, -1).cpu().numpy()
