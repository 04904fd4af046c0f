"""Time ScoreMD's own JAX training loop on its Mueller-Brown recipe (a driver, not a copy).

Runs under a Python that has JAX (ScoreMD pins jax 0.5.2, jaxlib 0.5.1, flax 0.10.4, optax
0.2.4, orbax-checkpoint 0.11.6), never under sci-moe's venv: it imports neither torch nor
sci_moe. It imports ScoreMD's modules from ``--src`` (a checkout of
https://github.com/noegroup/ScoreMD) and builds the recipe as its ``train.py`` does for
``dataset=mueller_brown +architecture=mlp/small_potential training_schedule.epochs=180
training_schedule.losses.0.time_weighting.midpoint=0.5`` (``TRAIN.md``; ``--variant fp``
adds ``div_est=2 beta=0.0005 residual_fp=True partial_t_approx=True single_gamma=True``):
``MixtureOfModels([PotentialScoreModel 3 x 92 swish])`` with the ranged weighting, the
cosine AdamW (3e-4 -> 1e-5, clip 1e3), ``EmaTrainState(ema_weight=0.995)``, and
``OneAfterAnother(BS=128)``, whose ``train`` generator jit-compiles one whole epoch
(``jax.lax.scan`` over the batches) and yields after each.

What differs from ``python train.py``:

* the data: ``--frames`` rows of shape (2,) drawn here (normal, scale 0.4) instead of
  ScoreMD's Mueller-Brown simulation (the step's cost does not depend on the values);
* no hydra, checkpoints, wandb logging or evaluation (outside the timed epochs);
* modules that ScoreMD imports for other data sets or for logging and that this driver
  never calls (``bgmol``, ``deeptime``, ``openmm``, ``mdtraj``, ``wandb``) are replaced
  by empty stand-ins when they are not installed (``stubbed`` in the output).

Prints one line ``@@scoremd-result {json}``: per-epoch wall seconds (the first holds the
compile), steps per epoch, versions. Threads are the caller's business (``XLA_FLAGS``,
``taskset``). Example::

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        /tmp/jaxenv/bin/python benchmarks/energy_diffusion/scoremd_driver.py \\
        --src /tmp/scoremd --variant fp
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
import types
from functools import partial

RESULT_MARK = "@@scoremd-result "
#: imported by ScoreMD's data-set and logging modules, never called by this driver
STUB_ROOTS = ("bgmol", "deeptime", "openmm", "mdtraj", "wandb", "nglview")
FP_KWARGS = {
    "div_est": 2,
    "beta": 0.0005,
    "residual_fp": True,
    "partial_t_approx": True,
    "single_gamma": True,
}


class _Stub(types.ModuleType):
    """A module whose every attribute is another stand-in (enough for ``from x import y``)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        sub = _Stub(f"{self.__name__}.{name}")
        setattr(self, name, sub)
        return sub

    def __call__(self, *args, **kwargs):
        return self


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots, self.used = roots, set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            self.used.add(fullname.split(".")[0])
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Stub(spec.name)

    def exec_module(self, module) -> None:
        module.__path__ = []


def _install_stubs() -> _StubFinder:
    missing = tuple(r for r in STUB_ROOTS if importlib.util.find_spec(r) is None)
    finder = _StubFinder(missing)
    sys.meta_path.append(finder)  # after the real finders: only what is not installed
    return finder


def _commit(src: str) -> str | None:
    path = os.path.join(src, "COMMIT")
    if os.path.isfile(path):
        with open(path) as f:
            return f.read().strip() or None
    try:
        out = subprocess.run(
            ["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def run(src: str, variant: str, epochs: int, frames: int, seed: int) -> dict:
    """Build ScoreMD's recipe and time ``epochs`` epochs of its jitted training loop."""
    sys.path.insert(0, os.path.join(src, "src"))
    finder = _install_stubs()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import scoremd.diffusion.classic.sde  # noqa: F401  (first: sde <-> utils import cycle)
    from scoremd.data.dataset.base import Datapoints, Dataset
    from scoremd.data.preprocess import CenterMolecule
    from scoremd.diffusion.classic.utils import get_loss
    from scoremd.loss import RangedLoss
    from scoremd.models import MLPModelInfo, RangedModel
    from scoremd.models.mixture import MixtureOfModels
    from scoremd.training import equal_weight
    from scoremd.training.optimizer import get_cosine_lr_optimizer
    from scoremd.training.schedule import IDENTITY, OneAfterAnother
    from scoremd.training.train_state import EmaTrainState
    from scoremd.training.weighting import construct_ranged_constant_weighting_function

    class _Frames(Dataset):  # MuellerBrownSimulation's shape, data drawn here
        def __init__(self, data):
            super().__init__(name="mueller_brown", sample_shape=(2, 1), kbT=23.0)
            self._data = data

        def _get_data(self):
            return Datapoints(data=self._data, features=None), None, None

    rng = np.random.default_rng(seed)
    data = jnp.asarray((0.4 * rng.standard_normal((frames, 2))).astype(np.float32))
    dataset = _Frames(data)
    bs = 128
    # train.py: ranged models sorted, weighting built from them, norm factor 1 (toy data)
    ranged = [RangedModel(MLPModelInfo([92, 92, 92], "swish", True), range=(1.0, 0.0))]
    model = MixtureOfModels(
        [m.build(dataset, 1.0) for m in ranged],
        construct_ranged_constant_weighting_function(ranged, normalize=True),
        CenterMolecule(dataset),
    )
    key = jax.random.PRNGKey(seed)
    key, init_key = jax.random.split(key)
    params = model.init(init_key, jnp.ones([bs, 2]), None, jnp.ones([bs, 1]), training=False)
    optimizer = partial(
        get_cosine_lr_optimizer, learning_rate=3e-4, min_learning_rate=1e-5, clip=1e3
    )
    state = EmaTrainState.create(
        apply_fn=model.apply, params=params, tx=optimizer(1), ema_weight=0.995
    )
    # stores.py's standard_loss (+ the FP overrides of TRAIN.md)
    kwargs = {
        "likelihood_weighting": False,
        "sliced": False,
        "div_est": 1,
        "gaussian_div_est": False,
        "partial_t_approx": False,
    }
    loss = partial(get_loss, **(kwargs | (FP_KWARGS if variant == "fp" else {})))
    schedule = OneAfterAnother(
        losses=[
            RangedLoss(
                loss=loss,
                range=[1.0, 1e-5],
                time_weighting=partial(equal_weight, midpoint=0.5),
            )
        ],
        BS=bs,
        BS_factor=1,
        epochs=[epochs],
        augment=IDENTITY,
    )
    train_data = dataset.train
    seconds, losses = [], []
    t0 = time.perf_counter()
    gen = schedule.train(state, model, optimizer, None, 0, train_data, None, 1, 1.0, key)
    for state, loss_arr, _ in gen:
        jax.block_until_ready(state.params)
        t1 = time.perf_counter()
        seconds.append(t1 - t0)
        losses.append(float(np.asarray(loss_arr).sum(axis=-1).mean()))
        t0 = time.perf_counter()
    import flax
    import optax

    return {
        "variant": variant,
        "epoch_seconds": seconds,
        "steps_per_epoch": frames // bs,
        "mean_loss": losses,
        "jax": jax.__version__,
        "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else None,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS"),
        "scoremd_commit": _commit(src),
        "stubbed": sorted(finder.used),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", required=True, help="ScoreMD checkout (holds src/scoremd)")
    p.add_argument("--variant", choices=("plain", "fp"), default="plain")
    p.add_argument("--epochs", type=int, default=3, help="epochs (the first holds the compile)")
    p.add_argument("--frames", type=int, default=100_000, help="training rows (recipe: 100k)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if not os.path.isdir(os.path.join(args.src, "src", "scoremd")):
        raise SystemExit(f"--src {args.src!r} holds no src/scoremd (a ScoreMD checkout)")
    if args.epochs < 1 or args.frames < 128:
        raise SystemExit("--epochs must be >= 1 and --frames >= 128 (one batch)")
    out = run(args.src, args.variant, args.epochs, args.frames, args.seed)
    print(RESULT_MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
