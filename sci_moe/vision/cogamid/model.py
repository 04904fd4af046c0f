"""Per-class feature memories for replay: Gaussian mixtures (CoGaMiD) and prototypes (STAR-like).

CoGaMiD (Zhu et al., NeurIPS 2025) keeps, for every old class :math:`c`, a Gaussian mixture
of penultimate pixel features

.. math::

    p(f \\mid c) = \\sum_{k=1}^{K} \\pi_{ck}\\, N(f; \\mu_{ck}, \\Sigma_{ck})

fitted by EM (:func:`sci_moe.stats.fit_gaussian_mixture`); the density and
sampler are :class:`sci_moe.stats.GaussianMixture`. The single-prototype baseline
keeps only the class mean (STAR replays the prototype itself).
"""

from __future__ import annotations

import torch
from torch import Tensor

from sci_moe.stats import GaussianMixture, fit_gaussian_mixture

from ..unet import SmallUNet

__all__ = ["GaussianMixtureMemory", "grc_loss", "step_features"]


def _check(features: Tensor, labels: Tensor) -> None:
    if features.dim() != 2 or labels.shape != features.shape[:1]:
        raise ValueError(
            f"features must be (N, D) and labels (N,), got {tuple(features.shape)} and "
            f"{tuple(labels.shape)}"
        )


class GaussianMixtureMemory:
    """One Gaussian mixture of features per class.

    Parameters
    ----------
    n_components : int
        ``K`` (the paper uses 3; ``K = 1`` is a single Gaussian per class).
    covariance_type : {"full", "diag"}
    max_iter : int
        EM iterations (the third-party port uses 30).
    reg_covar : float
        Variance floor added by EM.
    max_points : int
        At most this many features per class are used for a fit (random subset).
    """

    def __init__(
        self,
        n_components: int = 3,
        covariance_type: str = "full",
        max_iter: int = 30,
        reg_covar: float = 1e-4,
        max_points: int = 20000,
    ) -> None:
        if n_components < 1 or max_points < 1:
            raise ValueError("n_components and max_points must be >= 1")
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.max_iter = max_iter
        self.reg_covar = reg_covar
        self.max_points = max_points
        self.mixtures: dict[int, GaussianMixture] = {}

    @property
    def classes(self) -> list[int]:
        """Classes with a stored mixture, sorted."""
        return sorted(self.mixtures)

    def fit(
        self,
        features: Tensor,
        labels: Tensor,
        classes,
        generator: torch.Generator | None = None,
    ) -> GaussianMixtureMemory:
        """Fit (or refit) the mixture of each class in ``classes``.

        Parameters
        ----------
        features : Tensor, shape (N, D)
        labels : Tensor, shape (N,), int
        classes : iterable of int
        generator : torch.Generator, optional
        """
        _check(features, labels)
        for c in classes:
            x = features[labels == c].detach()
            if x.shape[0] > self.max_points:
                idx = torch.randperm(x.shape[0], generator=generator)[: self.max_points]
                x = x[idx]
            k = min(self.n_components, x.shape[0])
            if k < 1:
                raise ValueError(f"class {c} has no features to fit; drop it from classes")
            fit = fit_gaussian_mixture(
                x,
                k,
                self.covariance_type,
                max_iter=self.max_iter,
                reg_covar=self.reg_covar,
                generator=generator,
            )
            self.mixtures[int(c)] = GaussianMixture(
                fit.means, fit.full_covariances(), fit.weights, dtype=x.dtype
            )
        return self

    def adjust(
        self,
        features: Tensor,
        labels: Tensor,
        n_replay: int = 2000,
        generator: torch.Generator | None = None,
    ) -> list[int]:
        """Dynamic Adjustment: refit stored mixtures with new features of their classes.

        For every stored class :math:`c` present in ``labels``, the mixture is refitted by
        EM on ``n_replay`` samples of the stored mixture together with the new features
        (pixels of new data confidently predicted as :math:`c`), so the memory follows the
        drifting feature space. The paper's exact update rule is not published; this is
        one reading of it.

        Parameters
        ----------
        features : Tensor, shape (N, D)
        labels : Tensor, shape (N,)
            Pseudo-labels (stored classes) of the features.
        n_replay : int
        generator : torch.Generator, optional

        Returns
        -------
        list of int
            The classes that were adjusted.
        """
        _check(features, labels)
        done = []
        for c in self.classes:
            new = features[labels == c].detach()
            if new.shape[0] == 0:
                continue
            old = self.mixtures[c].sample(n_replay, generator=generator).to(new.dtype)
            x = torch.cat([old, new])
            fit = fit_gaussian_mixture(
                x,
                min(self.n_components, x.shape[0]),
                self.covariance_type,
                max_iter=self.max_iter,
                reg_covar=self.reg_covar,
                generator=generator,
            )
            self.mixtures[c] = GaussianMixture(
                fit.means, fit.full_covariances(), fit.weights, dtype=x.dtype
            )
            done.append(c)
        return done

    def component_means(self) -> Tensor:
        """Means of every stored component of every class, shape (sum_c K_c, D)."""
        return torch.cat([self.mixtures[c].means for c in self.classes])

    def sample(
        self, n_per_class: int, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """Pseudo-features of every stored class: ``(n_classes * n, D)`` features and labels."""
        feats, labs = [], []
        for c in self.classes:
            feats.append(self.mixtures[c].sample(n_per_class, generator=generator))
            labs.append(torch.full((n_per_class,), c, dtype=torch.long))
        return torch.cat(feats), torch.cat(labs)

    def log_prob(self, features: Tensor, c: int) -> Tensor:
        """``log p(f | c)`` of features ``(N, D)``, shape (N,)."""
        return self.mixtures[int(c)].log_prob(features)

    def state_dict(self) -> dict[str, Tensor]:
        """Plain tensors (loadable with ``torch.load(weights_only=True)``)."""
        out = {}
        for c, m in self.mixtures.items():
            out[f"{c}.weights"] = m.weights
            out[f"{c}.means"] = m.means
            out[f"{c}.covs"] = m.covs
        return out

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore the mixtures written by :meth:`state_dict`."""
        self.mixtures = {}
        for c in sorted({int(k.split(".")[0]) for k in state}):
            mixture = GaussianMixture(
                state[f"{c}.means"],
                state[f"{c}.covs"],
                state[f"{c}.weights"],
                dtype=state[f"{c}.means"].dtype,
            )
            # The constructor renormalises the weights; dividing weights that were already
            # normalised by their float sum can move them by an ulp, so a resumed run would
            # drift from an uninterrupted one. Keep the stored (validated) weights exactly.
            mixture.weights = state[f"{c}.weights"].to(mixture.means.dtype).clone()
            self.mixtures[c] = mixture


def step_features(model: SmallUNet, images, labels, classes, max_per_class, generator):
    """Penultimate features of the labelled pixels of ``classes``.

    Parameters
    ----------
    model : SmallUNet
    images : Tensor, shape (B, 3, H, W)
        Anywhere: moved to the model's device 16 at a time.
    labels : Tensor, shape (B, H, W)
        On the CPU.
    classes : sequence of int
    max_per_class : int
        Random subset size per class.
    generator : torch.Generator or None

    Returns
    -------
    features : Tensor, shape (N, D)
        On the CPU, wherever the model is (the memories fit there).
    labels : Tensor, shape (N,)
    """
    dev = next(model.parameters()).device  # images go there batch by batch, features back
    with torch.no_grad():
        feats = torch.cat(
            [model.features(images[i : i + 16].to(dev)).cpu() for i in range(0, len(images), 16)]
        )
    f = feats.permute(0, 2, 3, 1).reshape(-1, feats.shape[1])
    y = labels.reshape(-1)
    fs, ys = [], []
    for c in classes:
        idx = (y == c).nonzero().squeeze(1)
        if idx.numel() > max_per_class:
            idx = idx[torch.randperm(idx.numel(), generator=generator)[:max_per_class]]
        fs.append(f[idx])
        ys.append(y[idx])
    return torch.cat(fs), torch.cat(ys)


def grc_loss(features, labels, new_classes, old_means, temperature: float = 1.0):
    """Contrastive constraint between new-class features and stored old components.

    For a new-class pixel feature :math:`f` of class :math:`c` with batch centre
    :math:`\\bar f_c` and stored old component means :math:`\\mu_j`,

    .. math::

        \\ell(f) = -\\log \\frac{e^{-\\lVert f-\\bar f_c\\rVert^2/T}}
                 {e^{-\\lVert f-\\bar f_c\\rVert^2/T} + \\sum_j e^{-\\lVert f-\\mu_j\\rVert^2/T}},

    averaged over new-class pixels (0 if there are none).

    Parameters
    ----------
    features : Tensor, shape (N, D)
    labels : Tensor, shape (N,)
    new_classes : sequence of int
    old_means : Tensor, shape (M, D)
    temperature : float

    Returns
    -------
    Tensor, scalar
    """
    losses = []
    for c in new_classes:
        f = features[labels == c]
        if f.shape[0] == 0:
            continue
        pos = -(f - f.mean(0).detach()).pow(2).sum(-1, keepdim=True) / temperature
        # squared distances from the differences (exact, also far from the origin)
        neg = -(f[:, None] - old_means.to(f.device, f.dtype)).pow(2).sum(-1) / temperature
        logits = torch.cat([pos, neg], 1)
        losses.append(-(pos.squeeze(1) - torch.logsumexp(logits, 1)))
    if not losses:
        return features.sum() * 0.0
    return torch.cat(losses).mean()
