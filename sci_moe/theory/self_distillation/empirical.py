r"""Multi-stage self-distillation of linear probes on user-supplied features.

The empirical counterpart of :func:`.simulate` (Takanami, Takahashi and Sakata, NeurIPS 2025,
arXiv:2501.16226, Sec. 5 / ``Experiments/linear_probe.py``): features ``X`` of shape ``(M, N)``
from any frozen model, binary labels in {0, 1} (possibly noisy), features standardised with
statistics of the training split, then

.. math::

    (v_t, B_t) = \arg\min_{v, B}\ \sum_{\mu\in\text{train}}
    \ell(\tilde y^{(t)}_\mu, v\cdot x_\mu + B) + \frac{\lambda_t}{2}\lVert v\rVert^2,
    \qquad \tilde y^{(0)} = y,\quad
    \tilde y^{(t)} = \sigma(\beta_{t-1} u^{(t-1)})\ \text{(soft)}\ \text{or}\
    \mathbb 1[u^{(t-1)} > 0]\ \text{(hard)},

with :math:`u^{(t-1)}` the previous stage's outputs on the training inputs, BCE
:math:`\ell = \log(1+e^{-u}) + (1-y)u` (so :math:`\lambda = 1/C` of scikit-learn's
``LogisticRegression``) or MSE :math:`\ell = \frac14(u - (2y-1))^2` (soft MSE labels
:math:`(\beta u + 1)/2`). Training reuses :func:`.train_stage` (L-BFGS for BCE, closed form for
MSE). Unlike the paper's protocol, which tuned on test accuracy, the hyper-parameters
:math:`\{\lambda_t, \beta_t\}` are chosen on a seeded, stratified **validation** split carved out
of the training data (whose labels carry the same noise); test data, if given, are only scored.

The pieces live in one-concept modules: input checks (``_inputs``), probes and their
stage-wise training (:mod:`.probe`), label noise and splits (:mod:`.splits`); this module
tunes and runs the experiment and re-exports the pieces under their old paths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._inputs import as_features as _as_features
from ._inputs import as_labels as _as_labels
from .model import LOSSES
from .multistage import pseudo_labels
from .probe import LinearProbe, Standardizer, _train_one, train_probe_stages
from .splits import grouped_split, inject_label_noise
from .splits import stratified_split as _stratified_split

__all__ = [
    "EmpiricalSDConfig",
    "EmpiricalSDResult",
    "LinearProbe",
    "Standardizer",
    "breast_cancer_demo",
    "fit_self_distillation",
    "grouped_split",
    "inject_label_noise",
    "probe_sd_experiment",
    "train_probe_stages",
]

LABEL_MODES = ("soft", "hard")
TUNINGS = ("greedy", "joint")
MAX_JOINT_FITS = 20_000


@dataclass(frozen=True)
class EmpiricalSDConfig:
    """Options of :func:`fit_self_distillation`.

    Attributes
    ----------
    n_stages : int
        Number of self-distillation stages after stage 0 (0 = a plain tuned probe).
    loss : {"bce", "mse"}
    labels : {"hard", "soft"}
        Pseudo-labels :math:`\\mathbb 1[u > 0]` or :math:`\\sigma(\\beta u)`
        (MSE: :math:`(\\beta u+1)/2`).
    learn_bias : bool
        Learn the bias, or fix it at 0.
    log10_lambdas : tuple of float
        Grid of :math:`\\log_{10}\\lambda_t` searched for every stage.
    betas : tuple of float
        Grid of :math:`\\beta_t > 0` searched for soft labels (ignored for hard labels);
        ``numpy.inf`` may be included so that hard labels compete with soft ones.
    val_fraction : float
        Fraction of the training data held out (stratified) to tune on, in (0, 1).
    seed : int
        Seed of the train/validation split.
    tuning : {"greedy", "joint"}
        ``"greedy"``: stage 0's :math:`\\lambda_0` alone, then each stage's
        :math:`(\\beta_{t-1}, \\lambda_t)` with the earlier stages fixed
        (:math:`O(T |\\lambda||\\beta|)` fits). ``"joint"``: every combination, scored by the
        last stage's validation error, as in the paper's optimal SD
        (:math:`O((|\\lambda||\\beta|)^T|\\lambda|)` fits, at most ``MAX_JOINT_FITS``).
    """

    n_stages: int = 1
    loss: str = "bce"
    labels: str = "hard"
    learn_bias: bool = True
    log10_lambdas: tuple[float, ...] = (-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)
    betas: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    val_fraction: float = 0.25
    seed: int = 0
    tuning: str = "greedy"

    def __post_init__(self):
        if int(self.n_stages) != self.n_stages or self.n_stages < 0:
            raise ValueError(f"n_stages must be an integer >= 0, got {self.n_stages!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.labels not in LABEL_MODES:
            raise ValueError(f"labels must be one of {LABEL_MODES}, got {self.labels!r}")
        lams = tuple(float(v) for v in self.log10_lambdas)
        if not lams or not all(math.isfinite(v) for v in lams):
            raise ValueError("log10_lambdas must be a non-empty grid of finite log10 ridge values")
        betas = tuple(float(b) for b in self.betas)
        if self.labels == "soft" and (not betas or not all(b > 0 for b in betas)):
            raise ValueError(
                "betas must be a non-empty grid of values > 0 (inf: hard) for soft labels"
            )
        if self.tuning not in TUNINGS:
            raise ValueError(f"tuning must be one of {TUNINGS}, got {self.tuning!r}")
        if self.tuning == "joint":
            nb = 1 if self.labels == "hard" else len(betas)
            fits = sum(len(lams) ** (t + 1) * nb**t for t in range(self.n_stages + 1))
            if fits > MAX_JOINT_FITS:
                raise ValueError(
                    f"joint tuning would train {fits} probes (> {MAX_JOINT_FITS}); use "
                    "tuning='greedy', fewer stages or smaller grids"
                )
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must lie in (0, 1), got {self.val_fraction!r}")
        object.__setattr__(self, "log10_lambdas", lams)
        object.__setattr__(self, "betas", betas)


@dataclass(frozen=True)
class EmpiricalSDResult:
    """Tuned multi-stage self-distillation.

    Attributes
    ----------
    lambdas : tuple of float, length T + 1
        Chosen ridge strengths.
    betas : tuple of float, length T
        Chosen inverse temperatures (``inf`` for hard labels).
    train_errors, val_errors : ndarray, shape (T + 1,)
        Per-stage errors against the given (possibly noisy) train / validation labels.
    test_errors : ndarray, shape (T + 1,) or None
        Per-stage errors on the test set, if one was given (never used for tuning).
    probes : list of LinearProbe
        The stages, on standardised features.
    standardizer : Standardizer
        Fitted on the training part of the split.
    train_index, val_index : ndarray
        The split of the input rows.
    """

    lambdas: tuple[float, ...]
    betas: tuple[float, ...]
    train_errors: np.ndarray
    val_errors: np.ndarray
    test_errors: np.ndarray | None
    probes: list[LinearProbe] = field(repr=False)
    standardizer: Standardizer = field(repr=False)
    train_index: np.ndarray = field(repr=False)
    val_index: np.ndarray = field(repr=False)

    @property
    def best_stage(self) -> int:
        """Stage with the lowest validation error (earliest on ties): early stopping."""
        return int(np.argmin(self.val_errors))

    def decision_function(self, X, stage: int = -1) -> np.ndarray:
        """Outputs of ``stage`` on raw features ``X`` of shape (M, N)."""
        return self.probes[stage].decision_function(self.standardizer.transform(X))


def _val_key(probe: LinearProbe, X: np.ndarray, y: np.ndarray, loss: str) -> tuple[float, float]:
    """Validation error, ties broken by the validation loss."""
    u = probe.decision_function(X)
    if loss == "bce":
        tie = float(np.mean(np.logaddexp(0.0, -u) + (1 - y) * u))
    else:
        tie = float(np.mean((u - (2 * y - 1)) ** 2))
    return probe.error(X, y), tie


def fit_self_distillation(
    X,
    y,
    config: EmpiricalSDConfig | None = None,
    X_test=None,
    y_test=None,
    groups=None,
) -> EmpiricalSDResult:
    r"""Tune and train ``0..n_stages`` self-distillation stages of a linear probe.

    The rows of ``(X, y)`` are split (stratified, ``config.seed``) into train and validation
    parts; features are standardised with train statistics. With ``tuning="greedy"`` stage 0's
    :math:`\lambda_0` minimises the validation error (ties: validation loss), then with stages
    ``0..t-1`` fixed, stage ``t``'s :math:`(\lambda_t, \beta_{t-1})` does the same over the
    grid; ``tuning="joint"`` minimises the last stage's validation error over all stages' grids.
    ``X_test, y_test`` are only scored, after tuning. With ``groups`` the validation split
    keeps every group on one side (:func:`grouped_split`), e.g. all sentences of one document.

    Parameters
    ----------
    X : ndarray or torch.Tensor, shape (M, N)
        Features.
    y : array_like, shape (M,)
        Labels in {0, 1}, possibly noisy (see :func:`inject_label_noise`).
    config : EmpiricalSDConfig, optional
    X_test : ndarray or torch.Tensor, shape (M_test, N), optional
    y_test : array_like, shape (M_test,), optional
    groups : array_like, shape (M,), optional
        Group id of every row, for a grouped validation split.

    Returns
    -------
    EmpiricalSDResult
    """
    config = EmpiricalSDConfig() if config is None else config
    if not isinstance(config, EmpiricalSDConfig):
        raise TypeError(f"config must be an EmpiricalSDConfig, got {type(config).__name__}")
    X = _as_features(X)
    y = _as_labels(y, X.shape[0])
    if (X_test is None) != (y_test is None):
        raise ValueError("give both X_test and y_test, or neither")
    if X_test is not None:
        X_test = _as_features(X_test, "X_test")
        y_test = _as_labels(y_test, X_test.shape[0], "y_test")
        if X_test.shape[1] != X.shape[1]:
            raise ValueError(f"X_test has {X_test.shape[1]} features, X has {X.shape[1]}")
    if groups is None:
        tr, va = _stratified_split(y, config.val_fraction, config.seed)
    else:
        tr, va = grouped_split(y, groups, config.val_fraction, config.seed)
    scaler = Standardizer.fit(X[tr])
    Xtr, Xva, ytr, yva = scaler.transform(X[tr]), scaler.transform(X[va]), y[tr], y[va]
    lam_grid = [10.0**v for v in config.log10_lambdas]
    beta_grid = [math.inf] if config.labels == "hard" else list(config.betas)

    def train(lams, betas):
        return train_probe_stages(Xtr, ytr, lams, betas, config.loss, config.learn_bias)

    def search(lams, betas, labels, depth):
        """Best (key, lambdas, betas) over the grid for stages len(lams)..depth."""
        best = None
        for lam in lam_grid:
            probe = _train_one(Xtr, labels, config.loss, lam, config.learn_bias)
            if len(lams) == depth:
                cands = [(_val_key(probe, Xva, yva, config.loss), (*lams, lam), betas)]
            else:
                u = probe.decision_function(Xtr)
                cands = [
                    search((*lams, lam), (*betas, beta), pseudo_labels(config.loss, u, beta), depth)
                    for beta in beta_grid
                ]
            for c in cands:
                if best is None or c[0] < best[0]:
                    best = c
        return best

    if config.tuning == "joint":
        _, lams, betas = search((), (), ytr, config.n_stages)
    else:  # greedy: stage t tunes (beta_{t-1}, lambda_t) with stages < t fixed
        _, lams, betas = search((), (), ytr, 0)
        for _ in range(config.n_stages):
            u = train(lams, betas)[-1].decision_function(Xtr)
            cands = [
                search(lams, (*betas, beta), pseudo_labels(config.loss, u, beta), len(lams))
                for beta in beta_grid
            ]
            _, lams, betas = min(cands, key=lambda r: r[0])

    probes = train(lams, betas)
    test_errors = None
    if X_test is not None:
        Xte = scaler.transform(X_test)
        test_errors = np.array([p.error(Xte, y_test) for p in probes])
    return EmpiricalSDResult(
        lambdas=tuple(lams),
        betas=tuple(betas),
        train_errors=np.array([p.error(Xtr, ytr) for p in probes]),
        val_errors=np.array([p.error(Xva, yva) for p in probes]),
        test_errors=test_errors,
        probes=probes,
        standardizer=scaler,
        train_index=tr,
        val_index=va,
    )


def probe_sd_experiment(
    X,
    y,
    theta: float,
    seeds: Sequence[int] = range(5),
    config: EmpiricalSDConfig | None = None,
    test_fraction: float = 0.3,
    groups=None,
) -> tuple[np.ndarray, list[EmpiricalSDResult]]:
    """Label-noise self-distillation experiment on fixed features, repeated over seeds.

    For each seed: a held-out test part with **clean** labels (stratified by label, or by
    group when ``groups`` is given, seed ``10_000 + seed``), label noise ``theta`` injected
    into the rest (:func:`inject_label_noise`, seed ``seed``), stages tuned on a validation
    split of the rest (``config`` with ``seed`` replaced; grouped too when ``groups`` is
    given), then the clean test error of every stage.

    Parameters
    ----------
    X : ndarray or torch.Tensor, shape (M, N)
        Features, e.g. of a frozen pretrained model.
    y : array_like, shape (M,)
        Clean labels in {0, 1}.
    theta : float
        Fraction of training labels flipped per class, in [0, 0.5).
    seeds : sequence of int
    config : EmpiricalSDConfig, optional
    test_fraction : float
    groups : array_like, shape (M,), optional
        Group ids (e.g. source document), kept on one side of every split.

    Returns
    -------
    errors : ndarray, shape (len(seeds), n_stages + 1)
        Clean test errors of stages ``0..n_stages``.
    results : list of EmpiricalSDResult
    """
    import dataclasses

    config = EmpiricalSDConfig() if config is None else config
    X = _as_features(X)
    y = _as_labels(y, X.shape[0])
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    rows, results = [], []
    for seed in seeds:
        if groups is None:
            rest, test = _stratified_split(y, test_fraction, 10_000 + seed)
            g_rest = None
        else:
            rest, test = grouped_split(y, groups, test_fraction, 10_000 + seed)
            g_rest = np.asarray(groups)[rest]
        y_noisy = inject_label_noise(y[rest], theta, seed)
        cfg = dataclasses.replace(config, seed=int(seed))
        res = fit_self_distillation(X[rest], y_noisy, cfg, X[test], y[test], groups=g_rest)
        rows.append(res.test_errors)
        results.append(res)
    return np.array(rows), results


def breast_cancer_demo(
    theta: float = 0.3,
    seeds: Sequence[int] = range(5),
    n_stages: int = 2,
    labels: str = "hard",
    test_fraction: float = 0.3,
    tuning: str = "greedy",
) -> np.ndarray:
    """Self-distillation on scikit-learn's breast-cancer features (offline, real data).

    :func:`probe_sd_experiment` on the 30 tabular features (for pretrained-network features
    see :mod:`.features`).

    Returns
    -------
    ndarray, shape (len(seeds), n_stages + 1)
        Test errors of stages ``0..n_stages``.
    """
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    config = EmpiricalSDConfig(n_stages=n_stages, labels=labels, tuning=tuning)
    return probe_sd_experiment(X, y.astype(float), theta, seeds, config, test_fraction)[0]


if __name__ == "__main__":  # pragma: no cover
    for theta in (0.2, 0.3):
        for labels in LABEL_MODES:
            err = breast_cancer_demo(theta=theta, seeds=range(10), labels=labels)
            sem = err.std(axis=0, ddof=1) / np.sqrt(len(err))
            print(f"theta={theta} {labels}: test error per stage", err.mean(axis=0), "+-", sem)
