"""Sample-weighted federated averaging of parameter dicts (FedAvg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

__all__ = ["fedavg"]


def fedavg(
    states: Sequence[Mapping[str, torch.Tensor]], num_samples: Sequence[int]
) -> dict[str, torch.Tensor]:
    """Weighted mean of states with weights proportional to the clients' sample counts.

    .. math:: \\bar\\theta = \\sum_i \\frac{n_i}{\\sum_j n_j}\\, \\theta_i

    Parameters
    ----------
    states : sequence of dict of str to Tensor
        Same keys and shapes.
    num_samples : sequence of int
        ``n_i > 0``.

    Returns
    -------
    dict of str to Tensor
        Summed in client order (deterministic), in float64 and cast back.

    Examples
    --------
    >>> out = fedavg([{"w": torch.tensor([0.0])}, {"w": torch.tensor([4.0])}], [1, 3])
    >>> out["w"].tolist()
    [3.0]
    """
    if len(states) == 0 or len(states) != len(num_samples):
        raise ValueError(
            f"give one sample count per state (got {len(states)} states, {len(num_samples)} counts)"
        )
    if any(isinstance(n, bool) or int(n) != n or n <= 0 for n in num_samples):
        raise ValueError(f"sample counts must be positive integers, got {list(num_samples)}")
    total = float(sum(num_samples))
    keys = list(states[0])
    out = {}
    for key in keys:
        acc = None
        for st, n in zip(states, num_samples, strict=True):
            if key not in st or st[key].shape != states[0][key].shape:
                raise ValueError(f"state key {key!r} is missing or has another shape")
            term = st[key].double() * (n / total)
            acc = term if acc is None else acc + term
        out[key] = acc.to(states[0][key].dtype)
    return out
