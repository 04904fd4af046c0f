"""Reporters that control a run rather than write data: checkpoints and a progress bar.

Both work with any run loop that follows the reporter protocol
(:mod:`~sci_moe.sampling.md.report_protocol`): :class:`CheckpointReporter` calls the loop's
``save_checkpoint(path)``; :class:`ProgressReporter` reads ``run_start_step`` and,
where the loop has one, ``speed_ns_per_day()``.
"""

from __future__ import annotations

from pathlib import Path

from .report_protocol import Reporter, Snapshot

__all__ = ["CheckpointReporter", "ProgressReporter"]


class CheckpointReporter(Reporter):
    """Write an atomic checkpoint every ``interval`` steps (after the other reporters)."""

    is_checkpoint = True

    def __init__(self, path, interval: int):
        super().__init__(interval)
        self.path = Path(path)

    @property
    def key(self) -> str:
        return f"checkpoint:{self.path.name}"

    def report(self, simulation, snapshot: Snapshot) -> None:
        simulation.save_checkpoint(self.path)


class ProgressReporter(Reporter):
    """A tqdm progress bar over ``total_steps`` with ETA and ns/day (per walker, and summed
    over the walkers when there are several).

    Parameters
    ----------
    total_steps : int
        The step at which the run ends (the bar starts at the current step).
    interval : int, optional
        Steps between updates (default: ``total_steps / 200``, at least 1).
    disable : bool or None
        Passed to tqdm (no output; ``None``: only on a terminal).
    unit : str
        What one step is called on the bar (``"step"``; e.g. ``"iteration"``).
    speed_unit : str
        The label of the simulated-time speed (``"ns/day"``; ``"time/day"`` for toy systems
        in reduced units).
    """

    def __init__(
        self,
        total_steps: int,
        interval: int | None = None,
        *,
        disable=False,
        unit: str = "step",
        speed_unit: str = "ns/day",
        **tqdm_kw,
    ):
        super().__init__(interval or max(1, int(total_steps) // 200))
        self.total_steps = int(total_steps)
        self.unit = unit
        self.speed_unit = speed_unit
        self.disable = disable
        self._tqdm_kw = tqdm_kw
        self._bar = None

    def report(self, simulation, snapshot: Snapshot) -> None:
        if self._bar is None:
            from ..._util import progress_bar

            self._bar = progress_bar(
                total=self.total_steps,
                initial=simulation.run_start_step,
                unit=self.unit,
                disable=self.disable,
                dynamic_ncols=True,
                **self._tqdm_kw,
            )
            self._shown = simulation.run_start_step
        self._bar.update(snapshot.step - self._shown)
        self._shown = snapshot.step
        speed_fn = getattr(simulation, "speed_ns_per_day", None)
        speed = None if speed_fn is None else speed_fn()
        if speed is not None:
            text = f"{speed:.3g} {self.speed_unit}"
            walkers = getattr(simulation, "n_walkers", 1)
            if walkers > 1:  # per walker, and the sampling rate summed over the walkers
                text += f"/walker, {speed * walkers:.4g} summed"
            self._bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
