"""CSV log reporter (OpenMM ``StateDataReporter`` columns)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .report_protocol import Reporter, Snapshot

__all__ = ["LogReporter"]


class LogReporter(Reporter):
    """CSV log (OpenMM ``StateDataReporter`` columns), one row every ``interval`` steps.

    Columns: ``step``, ``time_ps``, ``potential_energy_kj_mol``, ``temperature_k``,
    ``speed_ns_per_day``. With several walkers, energy and temperature are walker means.
    Temperature is empty for overdamped dynamics (no velocities); for toy potentials in
    reduced units it is :math:`2K/(n_\\mathrm{dof} k_B)` with the energy unit read as
    kJ/mol. Speed is simulated time (per walker) per wall-clock day since the start of the
    current ``run`` call.
    Every row is flushed.
    """

    include = frozenset({"energy", "temperature"})
    COLUMNS = ("step", "time_ps", "potential_energy_kj_mol", "temperature_k", "speed_ns_per_day")

    def __init__(self, path, interval: int):
        super().__init__(interval)
        self.path = Path(path)
        self._fh = None
        self.rows = 0

    @property
    def key(self) -> str:
        return f"log:{self.path.name}"

    def report(self, simulation, snapshot: Snapshot) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append = self.path.exists() and self.path.stat().st_size > 0
            self._fh = open(self.path, "a" if append else "w", encoding="utf-8")
            if not append:
                self._fh.write(",".join(self.COLUMNS) + "\n")
        energy = float(np.mean(snapshot.potential_energy))
        temp = "" if snapshot.temperature is None else f"{float(np.mean(snapshot.temperature)):.4f}"
        speed = simulation.speed_ns_per_day()
        speed_text = "" if speed is None else f"{speed:.4g}"
        row = f"{snapshot.step},{snapshot.time_ps:.6f},{energy:.6f},{temp},{speed_text}\n"
        self._fh.write(row)
        self._fh.flush()
        self.rows += 1

    def state_dict(self) -> dict[str, Any]:
        self.flush()
        size = self.path.stat().st_size if self.path.exists() else 0
        return {"rows": self.rows, "bytes": size}

    def restore(self, state: dict[str, Any] | None) -> None:
        self.close()
        if not state or state["bytes"] == 0:
            self.path.unlink(missing_ok=True)
            self.rows = 0
            return
        if not self.path.exists() or self.path.stat().st_size < state["bytes"]:
            raise ValueError(f"{self.path} is shorter than at the checkpoint: cannot resume")
        with open(self.path, "r+b") as fh:
            fh.truncate(int(state["bytes"]))
        self.rows = int(state["rows"])

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
