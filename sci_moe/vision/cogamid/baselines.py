"""The single-prototype replay baseline of CoGaMiD's comparison (STAR-like).

The ``"finetune"`` baseline (plain cross-entropy on the background-shifted labels) is a
method of :class:`~sci_moe.vision.cogamid.IncrementalConfig`; it keeps no memory.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .model import _check

__all__ = ["PrototypeMemory"]


class PrototypeMemory:
    """One prototype (the mean feature) per class; replay repeats the prototype (STAR-like).

    For the held-out likelihood comparison, :meth:`log_prob` scores features under the
    isotropic Gaussian :math:`N(\\mu_c, s_c^2 I)` with :math:`s_c^2` the class's mean
    per-dimension variance (the best a prototype plus one radius can say).
    """

    def __init__(self) -> None:
        self.prototypes: dict[int, Tensor] = {}
        self.variances: dict[int, Tensor] = {}

    @property
    def classes(self) -> list[int]:
        """Classes with a stored prototype, sorted."""
        return sorted(self.prototypes)

    def fit(self, features: Tensor, labels: Tensor, classes, generator=None) -> PrototypeMemory:
        """Store the mean (and mean variance) of each class's features."""
        _check(features, labels)
        for c in classes:
            x = features[labels == c].detach()
            if x.shape[0] < 1:
                raise ValueError(f"class {c} has no features to fit; drop it from classes")
            self.prototypes[int(c)] = x.mean(0)
            self.variances[int(c)] = x.var(0, unbiased=False).mean().clamp_min(1e-6)
        return self

    def sample(self, n_per_class: int, generator=None) -> tuple[Tensor, Tensor]:
        """The prototypes, each repeated ``n_per_class`` times, with their labels."""
        feats = [self.prototypes[c].expand(n_per_class, -1) for c in self.classes]
        labs = [torch.full((n_per_class,), c, dtype=torch.long) for c in self.classes]
        return torch.cat(feats), torch.cat(labs)

    def log_prob(self, features: Tensor, c: int) -> Tensor:
        """``log N(f; mu_c, s_c^2 I)``, shape (N,)."""
        mu, s2 = self.prototypes[int(c)], self.variances[int(c)]
        d = features.shape[1]
        return -0.5 * ((features - mu).pow(2).sum(-1) / s2 + d * torch.log(2 * torch.pi * s2))

    def state_dict(self) -> dict[str, Tensor]:
        """Plain tensors."""
        out = {f"{c}.proto": p for c, p in self.prototypes.items()}
        out.update({f"{c}.var": v for c, v in self.variances.items()})
        return out

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore what :meth:`state_dict` wrote."""
        self.prototypes = {int(k.split(".")[0]): v for k, v in state.items() if k.endswith("proto")}
        self.variances = {int(k.split(".")[0]): v for k, v in state.items() if k.endswith("var")}
