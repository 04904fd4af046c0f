"""Save and load fitted provenance classifiers (a folder: JSON settings + safetensors weights)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from ..._util import atomic_write_bytes, atomic_write_text
from .bow import BagOfWordsClassifier
from .byte_classifier import ByteTransformerClassifier
from .embedding_head import EmbeddingMoEClassifier
from .encoder_finetune import EncoderFinetuneClassifier

__all__ = ["CLASSIFIERS", "load_classifier", "save_classifier"]

#: Classifier kinds by name.
CLASSIFIERS = {
    c.kind: c
    for c in (
        BagOfWordsClassifier,
        EmbeddingMoEClassifier,
        ByteTransformerClassifier,
        EncoderFinetuneClassifier,
    )
}
_META, _WEIGHTS = "classifier.json", "weights.safetensors"


def save_classifier(clf, path: str | os.PathLike) -> Path:
    """Write a fitted classifier to the folder ``path`` (created; files replaced atomically).

    ``classifier.json`` holds the kind, the class names and the settings;
    ``weights.safetensors`` the arrays (for an ``encoder_finetune`` classifier only the
    fine-tuned top layers and the head: the frozen lower layers come from the encoder
    passed to :func:`load_classifier`). Returns the folder.
    """
    from safetensors.torch import save

    if getattr(clf, "kind", None) not in CLASSIFIERS:
        raise ValueError(f"cannot save {type(clf).__name__}: not a provenance classifier")
    config, arrays = clf.state()
    tensors = {
        k: (torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v)
        .detach()
        .clone()
        .contiguous()
        for k, v in arrays.items()
    }
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / _WEIGHTS, save(tensors))
    meta = {"kind": clf.kind, "classes": list(clf.classes), "settings": config}
    atomic_write_text(out / _META, json.dumps(meta))
    return out


def load_classifier(path: str | os.PathLike, embed=None, *, encoder=None, tokenizer=None):
    """Load a classifier written by :func:`save_classifier`.

    Parameters
    ----------
    path : path-like
        The folder.
    embed : callable, optional
        The frozen embedding of an ``embedding_moe`` classifier.
    encoder, tokenizer : optional
        The pretrained encoder and its tokenizer an ``encoder_finetune`` classifier was
        trained with (its frozen lower layers; checked against the saved checksum). For
        all-MiniLM-L6-v2: ``tokenizer, encoder = sci_moe.data.minilm.load_encoder()``.

    Raises
    ------
    FileNotFoundError
        When the folder holds no saved classifier.
    ValueError
        For an unknown kind, or an ``encoder_finetune`` classifier without (or with another)
        encoder.
    """
    from safetensors.torch import load_file

    folder = Path(path)
    if not (folder / _META).is_file() or not (folder / _WEIGHTS).is_file():
        raise FileNotFoundError(f"{folder} holds no saved classifier ({_META} + {_WEIGHTS})")
    meta = json.loads((folder / _META).read_text())
    kind = meta.get("kind")
    if kind not in CLASSIFIERS:
        raise ValueError(f"{folder}: unknown classifier kind {kind!r}; known {sorted(CLASSIFIERS)}")
    tensors = load_file(str(folder / _WEIGHTS))
    arrays = tensors if kind != "bow" else {k: v.numpy() for k, v in tensors.items()}
    return CLASSIFIERS[kind].from_state(
        meta["classes"], meta["settings"], arrays, embed=embed, encoder=encoder, tokenizer=tokenizer
    )
