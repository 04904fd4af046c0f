"""One seed for every generator, and their states for exact resume."""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["derive_seed", "get_rng_state", "seed_everything", "set_rng_state"]


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - user code draws from the global one
    torch.manual_seed(seed)  # also seeds every CUDA device


def derive_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed for a generator keyed by ``keys`` (epoch, step, rank), stable across
    processes and Python versions (no ``hash()``: it is salted per process).

    Examples
    --------
    >>> derive_seed(0, 1) == derive_seed(0, 1) != derive_seed(0, 2)
    True
    """
    ss = np.random.SeedSequence([seed % 2**63, *[int(k) % 2**63 for k in keys]])
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> 1)


def get_rng_state() -> dict:
    """The states of every global generator, as plain data for a checkpoint
    (loadable with ``torch.load(weights_only=True)``: no numpy arrays)."""
    version, internal, gauss = random.getstate()
    kind, key, pos, has_gauss, cached = np.random.get_state()  # noqa: NPY002
    state = {
        "python": {"version": version, "internal": list(internal), "gauss": gauss},
        "numpy": {
            "kind": kind,
            "key": torch.from_numpy(key.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore the generators from :func:`get_rng_state`."""
    py = state["python"]
    random.setstate((int(py["version"]), tuple(int(x) for x in py["internal"]), py["gauss"]))
    nps = state["numpy"]
    key = nps["key"].numpy().astype(np.uint32)
    np.random.set_state(  # noqa: NPY002
        (nps["kind"], key, int(nps["pos"]), int(nps["has_gauss"]), float(nps["cached"]))
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
