"""``FunctionOnFunctionRegressor``: fit FAME on lists of ``(times, values)`` and predict."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .fame import FAME, FAMEConfig
from .paths import build_paths, path_summary, symmetric_grid
from .scaling import FunctionScaler

__all__ = ["FunctionOnFunctionRegressor", "PreparedInputs"]


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
    """Function-on-function regression with :class:`~sci_moe.functional.FAME`.

    Inputs are lists of samples, each a list of ``J`` input functions given as
    ``(times, values)`` pairs observed at their own (irregular) times, ``NaN`` for
    missing values; outputs are one ``(times, values)`` per sample. Predictions are
    returned on any query grid inside the fitted time domain.

    Parameters
    ----------
    config : FAMEConfig, optional
        Model sizes; ``num_functions`` is taken from the data when omitted.
    steps : int
        Adam steps of :meth:`fit`.
    batch_size : int
    lr : float
        Adam learning rate (cosine decay to 10 % over ``steps``).
    seed : int
        Seeds the initialisation and the batch order.
    domain : (float, float), optional
        Time domain (default: the range of the training times).
    progress : bool
        Show a tqdm bar during :meth:`fit`.
    **config_kwargs
        Fields of :class:`FAMEConfig` when ``config`` is omitted.

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
        steps: int = 200,
        batch_size: int = 32,
        lr: float = 5e-3,
        seed: int = 0,
        domain: tuple[float, float] | None = None,
        progress: bool = True,
        **config_kwargs,
    ) -> None:
        if config is not None and config_kwargs:
            raise TypeError("pass either a FAMEConfig or its fields as keywords, not both")
        if steps < 0 or batch_size < 1 or lr <= 0:
            raise ValueError("steps must be >= 0, batch_size >= 1 and lr > 0")
        self.config, self._config_kwargs = config, config_kwargs
        self.steps, self.batch_size, self.lr, self.seed = steps, batch_size, lr, seed
        self.domain, self.progress = domain, progress
        self.model: FAME | None = None
        self.scaler: FunctionScaler | None = None
        self.history: list[float] = []
        self.fit_seconds = 0.0

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
    def fit(self, inputs: Sequence, outputs: Sequence) -> FunctionOnFunctionRegressor:
        """Train on ``inputs[i]`` (``J`` functions) -> ``outputs[i]``.

        The loss is the mean squared error of the normalised outputs at their observed
        times (a mask handles outputs observed at different times).

        Returns
        -------
        self
        """
        from .._util import progress_bar

        torch.manual_seed(self.seed)
        from .samples import check_inputs, check_outputs

        raw_in = check_inputs(inputs, domain=self.domain)
        raw_out = check_outputs(outputs, len(raw_in), self.domain)
        self.scaler = FunctionScaler.fit(raw_in, raw_out, self.domain)
        config = self.config or FAMEConfig(num_functions=len(raw_in[0]), **self._config_kwargs)
        if config.num_functions != self.scaler.num_functions:
            raise ValueError(
                f"config.num_functions={config.num_functions} but the samples have "
                f"{self.scaler.num_functions} input functions"
            )
        self.model = FAME(config)
        scaled = self.scaler.transform_inputs(inputs)
        summ = np.array([[path_summary(t, v, config.spline) for t, v in s] for s in scaled])
        self._summary_mean = summ.reshape(-1, summ.shape[-1]).mean(0)
        self._summary_std = summ.reshape(-1, summ.shape[-1]).std(0) + 1e-6
        data = self._prepare(scaled)
        outs = self.scaler.transform_outputs(outputs, len(scaled))
        query = np.unique(np.concatenate([t for t, _ in outs]))
        target = np.full((len(outs), len(query)), np.nan)
        for i, (t, v) in enumerate(outs):
            target[i, np.searchsorted(query, t)] = v
        dtype = torch.get_default_dtype()
        mask = torch.as_tensor(np.isfinite(target))
        target = torch.as_tensor(np.nan_to_num(target), dtype=dtype)
        query_t = torch.as_tensor(query, dtype=dtype)

        opt = torch.optim.Adam(self.model.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(
            opt, max(self.steps, 1), eta_min=0.1 * self.lr
        )
        gen = torch.Generator().manual_seed(self.seed)
        N, order, pos = len(data), torch.randperm(len(data), generator=gen), 0
        self.model.train()
        t0 = time.perf_counter()
        bar = progress_bar(
            range(self.steps), desc="FAME fit", disable=not self.progress, leave=False
        )
        for _ in bar:
            if pos + self.batch_size > N and pos > 0:
                order, pos = torch.randperm(N, generator=gen), 0
            idx = order[pos : pos + self.batch_size]
            pos += self.batch_size
            b = data.take(idx)
            pred = self.model(b.coeffs, b.grid, b.summary, query_t, b.reverse_coeffs)
            m = mask[idx]
            loss = ((pred - target[idx]) ** 2)[m].mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
            opt.step()
            sched.step()
            self.history.append(loss.item())
            bar.set_postfix(loss=f"{self.history[-1]:.4f}")
        self.fit_seconds = time.perf_counter() - t0
        self.model.eval()
        return self

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
        data = self.prepare(inputs)
        dtype = data.grid.dtype
        q = torch.as_tensor(self.scaler.scale_query(query_times), dtype=dtype)
        out = []
        for s in range(0, len(data), self.batch_size):
            b = data.take(torch.arange(s, min(s + self.batch_size, len(data))))
            out.append(self.model(b.coeffs, b.grid, b.summary, q, b.reverse_coeffs))
        return self.scaler.inverse_outputs(torch.cat(out).numpy())

    @torch.no_grad()
    def mixture_weights(self, inputs: Sequence) -> np.ndarray:
        """The per-function expert weights ``pi``, shape ``(N, J, K)``."""
        self._check_fitted()
        data = self.prepare(inputs)
        J = data.coeffs.shape[1]
        onehot = torch.eye(J, dtype=data.summary.dtype).expand(len(data), J, J)
        r = self.model.field.router(
            torch.cat([data.summary, onehot], -1).reshape(-1, data.summary.shape[-1] + J)
        )
        return r.weights.reshape(len(data), J, -1).numpy()
