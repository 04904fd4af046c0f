"""CSV log reporter (OpenMM ``StateDataReporter`` columns)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..._util import BOLTZMANN_KJ_PER_MOL_K
from .report_protocol import Reporter, Snapshot, file_crc32

__all__ = ["LogReporter"]


class LogReporter(Reporter):
    """CSV log (OpenMM ``StateDataReporter`` columns), one row every ``interval`` steps.

    Columns: ``step``, ``time_ps``, ``potential_energy_kj_mol``, ``temperature_k``,
    ``speed_ns_per_day``, ``speed_ns_per_day_all_walkers``. With several walkers, energy and
    temperature are walker means. Temperature is empty for overdamped dynamics (no
    velocities). Speed is simulated time per wall-clock day since the start of the current
    ``run`` call: of one walker, and summed over the walkers (the sampling rate). Appending
    to a log of an older version (five columns) keeps its columns. Every row is flushed.

    With ``reduced=True`` (toy potentials in reduced units) no physical unit is claimed: the
    columns are ``step``, ``time``, ``potential_energy``, ``temperature`` (the kinetic
    temperature :math:`2K/n_\\mathrm{dof}` in energy units, comparable to ``kT``) and
    ``speed_time_per_day``, ``speed_time_per_day_all_walkers`` (:data:`REDUCED_COLUMNS`).

    Parameters
    ----------
    path : str or Path
        The CSV file (appended to when it exists, e.g. on resume).
    interval : int
        Steps between rows.
    reduced : bool, optional
        Reduced-unit column names (default ``False``: OpenMM units).
    """

    include = frozenset({"energy", "temperature"})
    COLUMNS = (
        "step",
        "time_ps",
        "potential_energy_kj_mol",
        "temperature_k",
        "speed_ns_per_day",
        "speed_ns_per_day_all_walkers",
    )
    #: Column names for toy systems in reduced units (same order and meaning as COLUMNS).
    REDUCED_COLUMNS = (
        "step",
        "time",
        "potential_energy",
        "temperature",
        "speed_time_per_day",
        "speed_time_per_day_all_walkers",
    )

    def __init__(self, path, interval: int, *, reduced: bool = False):
        super().__init__(interval)
        self.reduced = bool(reduced)
        self.columns = self.REDUCED_COLUMNS if reduced else self.COLUMNS
        self.path = Path(path)
        self._fh = None
        self.rows = 0
        self._crc_bytes, self._crc = 0, 0  # CRC-32 of the file's first _crc_bytes bytes

    @property
    def key(self) -> str:
        return f"log:{self.path.name}"

    def report(self, simulation, snapshot: Snapshot) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append = self.path.exists() and self.path.stat().st_size > 0
            if append:  # a log of an older version has no summed speed: keep its columns
                with open(self.path, encoding="utf-8") as fh:
                    self.columns = tuple(fh.readline().strip().split(","))
            self._fh = open(self.path, "a" if append else "w", encoding="utf-8")
            if not append:
                self._fh.write(",".join(self.columns) + "\n")
        energy = float(np.mean(snapshot.potential_energy))
        if snapshot.temperature is None:
            temp = ""
        else:  # kelvin, or 2K/n_dof in energy units (k_B T) for reduced units
            t = float(np.mean(snapshot.temperature))
            t *= BOLTZMANN_KJ_PER_MOL_K if self.reduced else 1.0
            temp = f"{t:.4f}"
        speed = simulation.speed_ns_per_day()
        speed_text = "" if speed is None else f"{speed:.4g}"
        if len(self.columns) > 5:
            walkers = getattr(simulation, "n_walkers", 1)
            speed_text += "," if speed is None else f",{speed * walkers:.4g}"
        row = f"{snapshot.step},{snapshot.time_ps:.6f},{energy:.6f},{temp},{speed_text}\n"
        self._fh.write(row)
        self._fh.flush()
        self.rows += 1

    def state_dict(self) -> dict[str, Any]:
        self.flush()
        size = self.path.stat().st_size if self.path.exists() else 0
        if size < self._crc_bytes:  # pragma: no cover - someone truncated it under us
            self._crc_bytes, self._crc = 0, 0
        if size > self._crc_bytes:
            self._crc = file_crc32(self.path, self._crc_bytes, size, self._crc)
            self._crc_bytes = size
        return {"rows": self.rows, "bytes": size, "crc32": self._crc if size else 0}

    def verify(self, state: dict[str, Any] | None) -> None:
        if not state or state["bytes"] == 0:
            return
        nbytes = int(state["bytes"])
        size = self.path.stat().st_size if self.path.exists() else None
        if size is None or size < nbytes:
            have = "is missing" if size is None else f"has {size} bytes"
            raise ValueError(
                f"{self.path} {have}, {nbytes} at the checkpoint: cannot resume (nothing was "
                "changed); restore the file, or start again with --overwrite"
            )
        if "crc32" in state and file_crc32(self.path, 0, nbytes) != int(state["crc32"]):
            raise ValueError(
                f"{self.path} was changed or corrupted before the checkpoint (CRC-32 of its "
                f"first {nbytes} bytes differs): cannot resume (nothing was changed); restore "
                "the file, or start again with --overwrite"
            )

    def restore(self, state: dict[str, Any] | None) -> None:
        self.close()
        if not state or state["bytes"] == 0:
            self.path.unlink(missing_ok=True)
            self.rows = 0
            self._crc_bytes, self._crc = 0, 0
            return
        self.verify(state)
        with open(self.path, "r+b") as fh:
            fh.truncate(int(state["bytes"]))
        self.rows = int(state["rows"])
        if "crc32" in state:
            self._crc_bytes, self._crc = int(state["bytes"]), int(state["crc32"])
        else:
            self._crc_bytes, self._crc = 0, 0

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
