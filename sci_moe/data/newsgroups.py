r"""The 20-Newsgroups excerpt shipped inside ``gensim``, as a binary sentence task (offline).

The corpus of the empirical self-distillation demo (Takanami, Takahashi and Sakata,
NeurIPS 2025, arXiv:2501.16226, Sec. 5 uses features of a frozen pretrained network on a
binary task):

* **Corpus**: ``gensim/test/test_data/mini_newsgroup`` inside the ``gensim`` wheel, a
  zlib-compressed pickle of a scikit-learn ``Bunch`` with 200 posts, 100 from
  ``alt.atheism`` and 100 from ``sci.space``. No download. The pickle is read with
  :class:`sci_moe._util.RestrictedUnpickler`, which only builds the handful of classes such a
  ``Bunch`` needs (:func:`load_mini_newsgroups`).
* **Task**: sentences from the posts' bodies (headers, quoted replies, attribution lines and
  signatures removed), label 0 = ``alt.atheism``, 1 = ``sci.space``
  (:func:`newsgroup_sentences`); the post a sentence comes from is kept as its group, so
  test sentences can come from held-out posts. Single sentences are often ambiguous
  ("I agree with you."), so the task is noisy even before label noise is injected.

Embed the sentences with :func:`sci_moe.data.minilm.cached_embeddings` and pass the arrays
to :func:`sci_moe.theory.self_distillation.probe_sd_experiment`.

Moved here from ``sci_moe.theory.self_distillation.features`` (the theory floor takes
arrays and never imports ``sci_moe.data``).
"""

from __future__ import annotations

import io
import os
import re
import zlib
from pathlib import Path

import numpy as np

from .._util import RestrictedUnpickler
from .gensim_files import gensim_test_file

__all__ = [
    "MINI_NEWSGROUP_FILE",
    "clean_post",
    "load_mini_newsgroups",
    "newsgroup_sentences",
    "split_sentences",
]

#: File name of the corpus inside ``gensim/test/test_data``.
MINI_NEWSGROUP_FILE = "mini_newsgroup"

# (module, name) pairs the mini_newsgroup pickle may reference (old and new spellings).
_ALLOWED = frozenset(
    {
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
)


class _Bunch(dict):
    """Stand-in for ``sklearn.datasets.base.Bunch`` (a dict) when unpickling."""

    def __setstate__(self, state):
        self.update(state)


def load_mini_newsgroups(path: str | os.PathLike | None = None) -> dict:
    """Read gensim's shipped 20-Newsgroups excerpt.

    Parameters
    ----------
    path : path-like, optional
        The ``mini_newsgroup`` file; by default the one inside the installed ``gensim``
        (located without importing gensim).

    Returns
    -------
    dict
        ``data`` (list of 200 raw posts, str), ``target`` (ndarray of int, shape (200,)),
        ``target_names`` (``["alt.atheism", "sci.space"]``).

    Raises
    ------
    pickle.UnpicklingError
        If the file references any class other than plain containers, numpy arrays and the
        ``Bunch``.
    """
    if path is None:
        path = gensim_test_file(MINI_NEWSGROUP_FILE)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"newsgroup corpus file not found: {path}")
    raw = zlib.decompress(path.read_bytes())
    unpickler = RestrictedUnpickler(
        io.BytesIO(raw), allowed=_ALLOWED, substitutes={("sklearn", "Bunch"): _Bunch}
    )
    bunch = unpickler.load()
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
