"""``metrics.jsonl``: one JSON object per line, training and evaluation metrics by step."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

__all__ = ["MetricsLog", "read_metrics"]


class MetricsLog:
    """Append-only metrics lines, cut back to a checkpoint's step when a run resumes.

    Each line holds ``step``, ``time_s`` (training wall time so far) and the metrics
    (``train_*`` averaged over the last ``log_every`` steps, ``lr``; or the evaluation's
    ``val_*``). Non-finite numbers are written as ``null``.

    Parameters
    ----------
    path : path-like or None
        The file; ``None`` writes nothing (no output folder, or not rank 0).
    """

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = Path(path) if path is not None else None

    def truncate(self, step: int) -> None:
        """Drop the lines after ``step`` (written after the checkpoint a run resumes from)."""
        if self.path is None or not self.path.exists():
            return
        keep = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            if int(rec.get("step", 0)) <= step:
                keep.append(line)
        tmp = self.path.with_name(f".{self.path.name}.truncate.tmp")
        tmp.write_text("".join(x + "\n" for x in keep), encoding="utf-8")
        os.replace(tmp, self.path)

    def reset(self) -> None:
        """Start a new, empty log."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def write(self, record: dict) -> None:
        """Append one line."""
        if self.path is None:
            return
        clean = {k: _plain(v) for k, v in record.items()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(clean) + "\n")


def _plain(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        return _plain(v.item())
    return v


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """The records of a ``metrics.jsonl`` file (lines cut by a kill are skipped)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
