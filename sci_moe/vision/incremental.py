"""Class-incremental training with feature replay (CoGaMiD) and its baselines.

Methods (``IncrementalConfig.method``):

* ``"finetune"``: plain cross-entropy on the background-shifted labels of each step;
* ``"prototype"``: STAR-like replay of one stored prototype per old class;
* ``"gmm"``: CoGaMiD replay of pseudo-features sampled from per-class Gaussian mixtures
  (``n_components`` = K; K = 1 is a single Gaussian).

Both replay methods share the rest of the step-``t`` loss (as in DKD/STAR):

.. math::

    L = L_{\\mathrm{uCE}} + \\lambda_{\\mathrm{kd}} \\lVert f_\\theta - f_{\\theta_{t-1}}\\rVert^2
        + \\lambda_{\\mathrm{rep}}\\, \\mathrm{CE}(h_\\theta(\\tilde f), \\tilde y),

with :math:`L_{\\mathrm{uCE}}` the unbiased cross-entropy of MiB (a background pixel's
target probability is :math:`p_0 + \\sum_{c \\in C_{old}} p_c`, the background shift
handling) and :math:`(\\tilde f, \\tilde y)` the replayed pseudo-features of old classes.
Each step's data and randomness come from ``seed`` and the step index only, so a run
resumed from the checkpoint of step ``t`` repeats the uninterrupted run exactly.

Options of ``"gmm"`` (their exact formulas are not published; these are readings of the
abstract): ``dynamic_adjustment`` refits the stored mixtures after each step with the
features of background-labelled new pixels the model predicts as an old class with
probability :math:`\\ge \\tau` (:meth:`GaussianMixtureMemory.adjust`); ``grc_weight`` adds
:func:`grc_loss`, which pulls new-class features to their class centre and away from the
stored old-class components.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from sci_moe._util import atomic_torch_save

from .._util import progress_bar
from .memory import GaussianMixtureMemory, PrototypeMemory
from .protocol import background_shift_labels, incremental_tasks, mean_iou
from .synthetic import SceneConfig, SceneGenerator
from .unet import SmallUNet

__all__ = ["IncrementalConfig", "grc_loss", "run_incremental", "step_features"]

METHODS = ("finetune", "prototype", "gmm")


@dataclass
class IncrementalConfig:
    """Configuration of one incremental run (sizes in images / iterations).

    Attributes
    ----------
    method : {"finetune", "prototype", "gmm"}
    n_components, covariance_type
        Mixture size K and ``"full"`` / ``"diag"`` (``method="gmm"`` only).
    base, increment : int
        Protocol ``base-increment`` (4-1 on 6 classes: three steps).
    scene : SceneConfig
    n_train, n_test : int
        Training images per step (each holds a class of the step) and test images.
    base_iters, step_iters, batch_size, lr
        Adam iterations of step 0 and of every later step, batch size, learning rate.
    width, feature_dim : int
        :class:`SmallUNet` sizes.
    replay_per_class : int
        Pseudo-features per old class and iteration.
    kd_weight, replay_weight : float
        :math:`\\lambda_{kd}` and :math:`\\lambda_{rep}`.
    max_pixels_per_class : int
        Features per class used to fit a memory.
    dynamic_adjustment, da_threshold
        Dynamic Adjustment of the mixtures and its confidence :math:`\\tau`.
    grc_weight, grc_temperature
        Weight and temperature of :func:`grc_loss` (0 disables it).
    seed : int
    """

    method: str = "gmm"
    n_components: int = 3
    covariance_type: str = "full"
    base: int = 4
    increment: int = 1
    scene: SceneConfig = field(default_factory=SceneConfig)
    n_train: int = 200
    n_test: int = 60
    base_iters: int = 300
    step_iters: int = 100
    batch_size: int = 8
    lr: float = 3e-3
    width: int = 16
    feature_dim: int = 16
    replay_per_class: int = 256
    kd_weight: float = 1.0
    replay_weight: float = 1.0
    max_pixels_per_class: int = 4000
    dynamic_adjustment: bool = False
    da_threshold: float = 0.7
    grc_weight: float = 0.0
    grc_temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if (self.dynamic_adjustment or self.grc_weight > 0) and self.method != "gmm":
            raise ValueError("dynamic_adjustment and grc_weight need method='gmm'")
        if not 0 < self.da_threshold < 1 or self.grc_temperature <= 0 or self.grc_weight < 0:
            raise ValueError("need 0 < da_threshold < 1, grc_temperature > 0, grc_weight >= 0")
        if min(self.n_train, self.n_test, self.batch_size, self.base_iters) < 1:
            raise ValueError("n_train, n_test, batch_size and base_iters must be >= 1")


def _gen(seed: int, step: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(1_000_003 * seed + 1009 * step + salt)


def _step_data(world: SceneGenerator, cfg: IncrementalConfig, tasks, t: int):
    """Training images of step t: every image holds a class of step t; labels shifted."""
    seen = [c for task in tasks[: t + 1] for c in task]
    g = _gen(cfg.seed, t, 1)
    imgs, masks = [], []
    have = 0
    while have < cfg.n_train:
        x, m = world.generate(cfg.n_train, step=t, classes=seen, generator=g)
        ok = torch.stack([(m == c).flatten(1).any(1) for c in tasks[t]]).any(0)
        imgs.append(x[ok])
        masks.append(m[ok])
        have += int(ok.sum())
    x, m = torch.cat(imgs)[: cfg.n_train], torch.cat(masks)[: cfg.n_train]
    return x, background_shift_labels(m, tasks[t])


def step_features(model: SmallUNet, images, labels, classes, max_per_class, generator):
    """Penultimate features of the labelled pixels of ``classes``.

    Parameters
    ----------
    model : SmallUNet
    images : Tensor, shape (B, 3, H, W)
    labels : Tensor, shape (B, H, W)
    classes : sequence of int
    max_per_class : int
        Random subset size per class.
    generator : torch.Generator or None

    Returns
    -------
    features : Tensor, shape (N, D)
    labels : Tensor, shape (N,)
    """
    with torch.no_grad():
        feats = torch.cat([model.features(images[i : i + 16]) for i in range(0, len(images), 16)])
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
        neg = -(f[:, None] - old_means.to(f.dtype)).pow(2).sum(-1) / temperature
        logits = torch.cat([pos, neg], 1)
        losses.append(-(pos.squeeze(1) - torch.logsumexp(logits, 1)))
    if not losses:
        return features.sum() * 0.0
    return torch.cat(losses).mean()


def _unbiased_ce(logits, labels, n_old: int):
    # logits (B, C+1, H, W) over seen classes; old classes are 1..n_old.
    logp = F.log_softmax(logits, 1)
    bg = torch.logsumexp(logp[:, : n_old + 1], 1)
    lp = torch.where(labels == 0, bg, logp.gather(1, labels.unsqueeze(1)).squeeze(1))
    return -lp.mean()


def _dynamic_adjustment(model, memory, x, y, n_seen, cfg, g):
    with torch.no_grad():
        feats = torch.cat([model.features(x[i : i + 16]) for i in range(0, len(x), 16)])
        prob = torch.softmax(model.classify(feats)[:, : n_seen + 1], 1)
    conf, pred = prob.max(1)
    old = torch.zeros_like(pred, dtype=torch.bool)
    for c in memory.classes:
        old |= pred == c
    pick = (y == 0) & old & (conf >= cfg.da_threshold)
    f = feats.permute(0, 2, 3, 1)[pick]
    lab = pred[pick]
    if f.shape[0] > cfg.max_pixels_per_class:
        keep = torch.randperm(f.shape[0], generator=g)[: cfg.max_pixels_per_class]
        f, lab = f[keep], lab[keep]
    memory.adjust(f, lab, generator=g)


def _evaluate(model, x_test, m_test, tasks, t):
    seen = [c for task in tasks[: t + 1] for c in task]
    target = background_shift_labels(m_test, seen)
    with torch.no_grad():
        logits = torch.cat([model(x_test[i : i + 16]) for i in range(0, len(x_test), 16)])
    pred = logits[:, : len(seen) + 1].argmax(1)
    old = [c for task in tasks[:t] for c in task]
    return {
        "miou_all": mean_iou(pred, target, seen),
        "miou_old": mean_iou(pred, target, old) if old else float("nan"),
        "miou_new": mean_iou(pred, target, tasks[t]),
        "miou_base": mean_iou(pred, target, tasks[0]),
    }


def run_incremental(
    cfg: IncrementalConfig,
    checkpoint_dir: str | Path | None = None,
    stop_after: int | None = None,
    start_state: dict | None = None,
    progress: bool = True,
) -> dict:
    """Run all steps of the protocol; returns per-step metrics.

    Parameters
    ----------
    cfg : IncrementalConfig
    checkpoint_dir : path, optional
        If given, ``step_<t>.pt`` is written atomically after each step, and an existing
        latest checkpoint there is resumed from.
    stop_after : int, optional
        Stop after this step (used to test resumption).
    start_state : dict, optional
        A step-0 state ``{"model": state_dict}`` to start from (shares a base model
        between methods); step 0 is then not retrained.
    progress : bool
        Show progress over the training iterations of all steps: a tqdm bar on a terminal,
        plain periodic lines when stderr is not one (``sci_moe._util.progress_bar``).

    Returns
    -------
    dict
        ``{"config": ..., "steps": [metrics of step 0, 1, ...], "model": SmallUNet,
        "memory": memory or None}``.
    """
    tasks = incremental_tasks(cfg.scene.n_classes, cfg.base, cfg.increment)
    world = SceneGenerator(cfg.scene)
    torch.manual_seed(cfg.seed)
    model = SmallUNet(cfg.scene.n_classes, cfg.width, cfg.feature_dim)
    memory = None
    if cfg.method == "gmm":
        memory = GaussianMixtureMemory(cfg.n_components, cfg.covariance_type, reg_covar=1e-3)
    elif cfg.method == "prototype":
        memory = PrototypeMemory()
    steps: list[dict] = []
    first = 0
    ckdir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if ckdir is not None and ckdir.exists():
        done = sorted(int(p.stem.split("_")[1]) for p in ckdir.glob("step_*.pt"))
        if done:
            state = torch.load(ckdir / f"step_{done[-1]}.pt", weights_only=True)
            model.load_state_dict(state["model"])
            if memory is not None:
                memory.load_state_dict(state["memory"])
            steps = [
                dict(zip(state["metric_names"], row, strict=True))
                for row in state["metrics"].tolist()
            ]
            first = done[-1] + 1
    last = len(tasks) - 1 if stop_after is None else min(stop_after, len(tasks) - 1)
    todo = [
        0
        if (t == 0 and start_state is not None)
        else (cfg.base_iters if t == 0 else cfg.step_iters)
        for t in range(first, last + 1)
    ]
    bar = progress_bar(
        total=sum(todo),
        desc=f"CoGaMiD {cfg.method}",
        unit="it",
        leave=False,
        disable=not progress,
    )
    for t in range(first, len(tasks)):
        bar.set_postfix(step=t)
        x, y = _step_data(world, cfg, tasks, t)
        g = _gen(cfg.seed, t, 2)
        n_seen = sum(len(task) for task in tasks[: t + 1])
        n_old = n_seen - len(tasks[t])
        old_model = copy.deepcopy(model).eval() if t > 0 else None
        if t == 0 and start_state is not None:
            model.load_state_dict(start_state["model"])
        else:
            opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
            iters = cfg.base_iters if t == 0 else cfg.step_iters
            for _ in range(iters):
                idx = torch.randint(len(x), (cfg.batch_size,), generator=g)
                feats = model.features(x[idx])
                logits = model.classify(feats)[:, : n_seen + 1]
                if t == 0 or cfg.method == "finetune":
                    loss = F.cross_entropy(logits, y[idx])
                else:
                    loss = _unbiased_ce(logits, y[idx], n_old)
                    with torch.no_grad():
                        old_f = old_model.features(x[idx])
                    loss = loss + cfg.kd_weight * (feats - old_f).pow(2).mean()
                    fr, yr = memory.sample(cfg.replay_per_class, generator=g)
                    rl = model.classify(fr.to(feats.dtype))[:, : n_seen + 1]
                    loss = loss + cfg.replay_weight * F.cross_entropy(rl, yr)
                    if cfg.grc_weight > 0:
                        fl = feats.permute(0, 2, 3, 1).reshape(-1, feats.shape[1])
                        loss = loss + cfg.grc_weight * grc_loss(
                            fl,
                            y[idx].reshape(-1),
                            tasks[t],
                            memory.component_means(),
                            cfg.grc_temperature,
                        )
                opt.zero_grad()
                loss.backward()
                opt.step()
                bar.update()
        if cfg.dynamic_adjustment and t > 0:
            _dynamic_adjustment(model, memory, x, y, n_seen, cfg, g)
        if memory is not None:
            f, lab = step_features(model, x, y, tasks[t], cfg.max_pixels_per_class, g)
            memory.fit(f, lab, tasks[t], generator=g)
        x_test, m_test = SceneGenerator(cfg.scene).generate(
            cfg.n_test, step=t, generator=_gen(cfg.seed, t, 3)
        )
        steps.append(_evaluate(model, x_test, m_test, tasks, t))
        if ckdir is not None:
            names = list(steps[0])
            state = {
                "model": model.state_dict(),
                "memory": memory.state_dict() if memory is not None else {},
                "metric_names": names,
                "metrics": torch.tensor(
                    [[s[k] for k in names] for s in steps], dtype=torch.float64
                ),
            }
            atomic_torch_save(ckdir / f"step_{t}.pt", state)
        if stop_after is not None and t >= stop_after:
            break
    bar.close()
    return {"config": asdict(cfg), "steps": steps, "model": model, "memory": memory}
