"""A per-step record of training metrics, kept across resumes."""

from __future__ import annotations

from .result import StepInfo

__all__ = ["MetricHistory"]


class MetricHistory:
    """Hook that records chosen training metrics at every step; checkpoint it as stateful.

    Pass it both as a hook and as a stateful object, so a resumed run's record is whole::

        history = MetricHistory("loss")
        Trainer(..., hooks=[history], stateful={"history": history})

    Parameters
    ----------
    *names : str
        Keys of :attr:`StepInfo.metrics <sci_moe.train.StepInfo.metrics>` (default
        ``"loss"``).

    Attributes
    ----------
    values : dict of str to list of float
        One value per completed step.
    """

    def __init__(self, *names: str) -> None:
        self.names = names or ("loss",)
        self.values: dict[str, list[float]] = {n: [] for n in self.names}

    @property
    def losses(self) -> list[float]:
        """The ``"loss"`` record."""
        return self.values["loss"]

    def __call__(self, info: StepInfo) -> None:
        for n in self.names:
            self.values[n].append(float(info.metrics[n]))

    def state_dict(self) -> dict:
        return {n: list(v) for n, v in self.values.items()}

    def load_state_dict(self, state: dict) -> None:
        self.values = {n: list(state[n]) for n in self.names}
