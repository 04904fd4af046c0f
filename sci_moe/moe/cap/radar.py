"""The CAP radar diagram of MoE-CAP: Cost, Accuracy and Performance of several systems."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DEFAULT_AXES", "RadarAxis", "cap_radar"]

_RINGS = 5


@dataclass(frozen=True)
class RadarAxis:
    """One spoke of the radar.

    Parameters
    ----------
    key : str
        Key of the value in each system's dict.
    label : str
        Text at the end of the spoke (give the unit).
    higher_is_better : bool
        Orientation: the better end of the axis is always the outer ring.
    limits : tuple of float, optional
        ``(worst, best)`` values at the centre and at the outer ring; default: five
        rings of a round step covering the data, with a margin beyond the worst value.
    """

    key: str
    label: str
    higher_is_better: bool = True
    limits: tuple[float, float] | None = None


#: Cost in dollars (lower is better), accuracy (higher is better) and performance as
#: seconds per output token (lower is better), as in the MoE-CAP paper's figure.
DEFAULT_AXES = (
    RadarAxis("cost", "Cost ($)", higher_is_better=False),
    RadarAxis("accuracy", "Accuracy", higher_is_better=True),
    RadarAxis("performance", "Performance (s/token)", higher_is_better=False),
)


def _nice_step(minimum: float) -> float:
    """Smallest of 1, 2, 2.5, 5 x 10^n that is >= ``minimum`` (> 0)."""
    exp = math.floor(math.log10(minimum))
    for base in (1.0, 2.0, 2.5, 5.0, 10.0):
        step = base * 10.0**exp
        if step >= minimum * (1 - 1e-12):
            return step
    return 10.0 ** (exp + 1)  # pragma: no cover


def _limits(axis: RadarAxis, values: np.ndarray) -> tuple[float, float, float]:
    """``(worst, best, step)``: the centre, the outer ring and the spacing of the rings.

    Default limits are 5 rings of a round step, with 10 % of the data's span as a margin
    beyond the worst value, so no system sits exactly at the centre.
    """
    if axis.limits is not None:
        worst, best = (float(v) for v in axis.limits)
        if worst == best or not (math.isfinite(worst) and math.isfinite(best)):
            raise ValueError(f"axis {axis.key!r}: limits must be two different numbers")
        return worst, best, abs(best - worst) / _RINGS
    lo, hi = float(values.min()), float(values.max())
    span = hi - lo if hi > lo else max(abs(hi), 1.0) * 0.2
    step = _nice_step(1.1 * span / _RINGS)
    while True:
        if axis.higher_is_better:
            worst = math.floor((lo - 0.1 * span) / step) * step
            best = worst + _RINGS * step
            if best >= hi:
                return worst, best, step
        else:
            worst = math.ceil((hi + 0.1 * span) / step) * step
            best = worst - _RINGS * step
            if best <= lo:
                return worst, best, step
        step = _nice_step(step * 1.01)


def _fmt(value: float, step: float) -> str:
    digits = max(0, math.ceil(-math.log10(step) - 1e-9))
    if digits and not math.isclose(round(step, digits), step, rel_tol=1e-9):
        digits += 1
    return f"{value:,.{digits}f}"


def cap_radar(
    systems: Sequence[Mapping],
    path: str | Path | None = None,
    *,
    axes: Sequence[RadarAxis] = DEFAULT_AXES,
    title: str | None = None,
    dpi: int = 150,
):
    """Draw the CAP radar diagram (MoE-CAP, Fig. 1 style) and optionally save it.

    Each axis maps its value linearly to a radius in ``[0, 1]`` with the better end
    outside:

    .. math:: r = \\frac{v - v_{worst}}{v_{best} - v_{worst}}

    so a system that is good on all dimensions covers a large triangle. Tick labels
    show the axis' own values.

    Parameters
    ----------
    systems : sequence of dict
        One dict per system: ``"name"`` and one number per axis key (default
        ``"cost"``, ``"accuracy"``, ``"performance"``).
    path : str or Path, optional
        Save the figure there (PNG by extension).
    axes : sequence of RadarAxis
        At least three axes.
    title : str, optional
    dpi : int

    Returns
    -------
    matplotlib.figure.Figure
    """
    if len(axes) < 3:
        raise ValueError(f"a radar needs at least 3 axes, got {len(axes)}")
    if not systems:
        raise ValueError("systems is empty; give dicts with a 'name' and the axes' keys")
    table = np.empty((len(systems), len(axes)))
    names = []
    for i, system in enumerate(systems):
        if not isinstance(system, Mapping):
            raise TypeError(f"system {i} must be a dict, got {type(system).__name__}")
        names.append(str(system.get("name", f"system {i}")))
        for j, axis in enumerate(axes):
            if axis.key not in system:
                raise ValueError(
                    f"system {names[-1]!r} has no {axis.key!r}; every system needs "
                    f"{[a.key for a in axes]}"
                )
            value = system[axis.key]
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"system {names[-1]!r}: {axis.key} must be a finite number")
            table[i, j] = value

    import matplotlib.pyplot as plt

    limits = [_limits(a, table[:, j]) for j, a in enumerate(axes)]
    worst = np.array([w for w, _, _ in limits])
    best = np.array([b for _, b, _ in limits])
    radii = ((table - worst) / (best - worst)).clip(0.0, 1.0)
    angles = np.pi / 2 + 2 * np.pi * np.arange(len(axes)) / len(axes)

    fig = plt.figure(figsize=(6.4, 6.4))
    ax = fig.add_subplot(projection="polar")
    for i, name in enumerate(names):
        theta = np.append(angles, angles[0])
        r = np.append(radii[i], radii[i, 0])
        (line,) = ax.plot(theta, r, lw=2, label=name)
        ax.fill(theta, r, alpha=0.2, color=line.get_color())
    ax.set_ylim(0, 1)
    rings = np.arange(1, _RINGS + 1) / _RINGS
    ax.set_yticks(rings)
    ax.set_yticklabels([])
    ax.set_xticks(angles)
    ax.set_xticklabels([a.label for a in axes], fontsize=11)
    ax.tick_params(axis="x", pad=14)
    for theta, (worst, best, step) in zip(angles, limits, strict=True):
        for r in rings:
            value = worst + r * (best - worst)
            ax.text(theta, r, _fmt(value, step), fontsize=8, ha="center", va="center")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=min(3, len(names)))
    if title:
        ax.set_title(title, pad=32)
    fig.tight_layout()
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return fig
