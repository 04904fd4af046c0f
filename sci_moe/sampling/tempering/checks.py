"""Boundary checks of tempering inputs and of the user's ``log_prob`` callback.

Tempering runs are long and their failures quiet: a NaN start state or weight never moves,
and a callback of the wrong shape broadcasts into garbage. These checks run once at the
start (states, weights, the first ``log_prob`` call) and, without a device sync, on every
later call (shape at once; NaN / ``+inf`` counted and reported at the end of the run).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from .kernels import LogProb

__all__ = ["CheckedLogProb", "check_finite_rows", "check_finite_vector"]


def _first(idx: Tensor, n: int = 10) -> list[int]:
    return torch.nonzero(idx).flatten()[:n].tolist()


def check_finite_rows(x: Tensor, name: str, what: str) -> None:
    """Raise a ``ValueError`` naming the rows of ``x`` (shape (B, ...)) that are not finite.

    Parameters
    ----------
    x : Tensor, shape (B, ...)
    name : str
        The argument's name, e.g. ``"x0"``.
    what : str
        What a row is, e.g. ``"chain"`` or ``"system"``.
    """
    bad = ~torch.isfinite(x.detach()).reshape(x.shape[0], -1).all(1)
    if bool(bad.any()):
        raise ValueError(
            f"{name} has NaN/Inf entries in {what}s {_first(bad)} (of {x.shape[0]}); "
            f"pass finite starting states"
        )


def check_finite_vector(v: Tensor, name: str, what: str = "level") -> None:
    """Raise a ``ValueError`` naming the entries of a 1-D tensor that are NaN or infinite."""
    bad = ~torch.isfinite(torch.as_tensor(v))
    if bool(bad.any()):
        raise ValueError(f"{name} has NaN/Inf entries at {what}s {_first(bad)}; pass finite values")


class CheckedLogProb:
    """Wrap a ``log_prob`` callable ``(B, d) -> (B,)`` with shape and finiteness checks.

    Every call checks the output shape (``(B,)``; a ``(B, 1)`` output would broadcast into
    a ``(B, B)`` acceptance). NaN and ``+inf`` outputs are counted on the tensor's device
    (no sync): proposals with a NaN ``log_prob`` are rejected by the Metropolis test, a
    ``+inf`` one would be accepted and never left. :meth:`initial` evaluates the start
    states and raises on any non-finite value, naming the chains; :meth:`report` (end of a
    run) warns about rejected NaN proposals and raises on ``+inf``.
    """

    def __init__(self, log_prob: LogProb, what: str = "chain") -> None:
        self.log_prob, self.what = log_prob, what
        self.n_nan: Tensor | int = 0
        self.n_posinf: Tensor | int = 0

    def __call__(self, x: Tensor) -> Tensor:
        out = self.log_prob(x)
        if not isinstance(out, Tensor):
            raise ValueError(
                f"log_prob must return a Tensor of shape ({x.shape[0]},), got {type(out)}"
            )
        if out.shape != (x.shape[0],):
            raise ValueError(
                f"log_prob returned shape {tuple(out.shape)} for x of shape {tuple(x.shape)}; "
                f"it must return one value per {self.what}, shape ({x.shape[0]},) "
                "(e.g. sum over the last axis)"
            )
        d = out.detach()
        self.n_nan = self.n_nan + torch.isnan(d).sum()
        self.n_posinf = self.n_posinf + torch.isposinf(d).sum()
        return out

    def initial(self, x: Tensor, group: int = 1) -> Tensor:
        """``log_prob(x)`` at the start states; raise if any is NaN or infinite.

        ``group``: rows ``i`` belong to start ``i // group`` (PT: ``L`` replicas a system).
        """
        out = self(x)
        bad = ~torch.isfinite(out.detach())
        if bool(bad.any()):
            rows = torch.nonzero(bad).flatten()
            idx = sorted(set((rows // group).tolist()))[:10]
            vals = [float(out[int(i) * group]) for i in idx]
            raise ValueError(
                f"log_prob is not finite at the starting state of {self.what}s {idx} "
                f"(values {vals}); start every {self.what} where log_prob is finite"
            )
        self.n_nan, self.n_posinf = 0, 0
        return out

    def report(self) -> None:
        """End-of-run check: raise on ``+inf`` outputs, warn on (rejected) NaN proposals."""
        n_inf, n_nan = int(self.n_posinf), int(self.n_nan)
        if n_inf:
            raise ValueError(
                f"log_prob returned +inf {n_inf} times during the run; such a state is "
                "accepted and never left, so the result is meaningless: fix log_prob"
            )
        if n_nan:
            warnings.warn(
                f"log_prob returned NaN at {n_nan} proposed states; they were rejected "
                "(treated like -inf). Check log_prob if that is not intended.",
                RuntimeWarning,
                stacklevel=3,
            )
