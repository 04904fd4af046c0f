"""Document-level splits and fixed-length sequences of labelled corpora.

Fingerprint classifiers see *sequences* (a fixed number of words) but are split by
*document*: every sequence of one document — and, when several corpora were processed from
the same source documents, every version of it — lies on one side of the split, so a
classifier cannot score by recognising a document it saw in training.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SequenceSet", "balance", "document_split", "make_sequences"]

_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class SequenceSet:
    """Labelled sequences with the document each came from.

    Attributes
    ----------
    texts : tuple of str, length n
    labels : ndarray of int, shape (n,)
        Corpus index in ``0..K-1``.
    groups : tuple of str, length n
        Split key (document id; shared by the versions of one source document).
    classes : tuple of str, length K
        Corpus names.
    """

    texts: tuple
    labels: np.ndarray
    groups: tuple
    classes: tuple

    def __post_init__(self) -> None:
        n = len(self.texts)
        if len(self.labels) != n or len(self.groups) != n:
            raise ValueError(
                f"texts ({n}), labels ({len(self.labels)}) and groups ({len(self.groups)}) "
                "must have the same length"
            )

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, index: Sequence[int] | np.ndarray) -> SequenceSet:
        """The sequences at ``index`` (same classes)."""
        idx = np.asarray(index, dtype=np.int64)
        return SequenceSet(
            tuple(self.texts[i] for i in idx),
            np.asarray(self.labels)[idx],
            tuple(self.groups[i] for i in idx),
            self.classes,
        )

    def map(self, fn) -> SequenceSet:
        """The same set with ``fn`` applied to every text (a transform)."""
        return SequenceSet(tuple(fn(t) for t in self.texts), self.labels, self.groups, self.classes)


def make_sequences(
    corpora: dict[str, Sequence[tuple[str, str]]],
    seq_words: int = 128,
    max_per_document: int | None = None,
) -> SequenceSet:
    """Cut every document into non-overlapping sequences of ``seq_words`` words.

    A sequence is the exact slice of the document from its first to its last word, so the
    white space and line breaks in between (the formatting) are kept. A trailing part with
    fewer than ``seq_words`` words is dropped.

    Parameters
    ----------
    corpora : dict of str to sequence of (doc_id, text)
        One entry per corpus (its name is the class); ``doc_id`` is the split key.
    seq_words : int
    max_per_document : int, optional
        Keep at most this many sequences per document (the first ones).

    Returns
    -------
    SequenceSet
        Classes in the order of ``corpora``.
    """
    if seq_words < 1:
        raise ValueError(f"seq_words must be >= 1, got {seq_words}")
    if len(corpora) < 2:
        raise ValueError(f"need at least 2 corpora to classify, got {len(corpora)}")
    texts, labels, groups = [], [], []
    for k, (name, docs) in enumerate(corpora.items()):
        n_before = len(texts)
        for doc_id, text in docs:
            spans = [m.span() for m in _TOKEN.finditer(text)]
            n = len(spans) // seq_words
            if max_per_document is not None:
                n = min(n, max_per_document)
            for j in range(n):
                a = spans[j * seq_words][0]
                b = spans[(j + 1) * seq_words - 1][1]
                texts.append(text[a:b])
                labels.append(k)
                groups.append(str(doc_id))
        if len(texts) == n_before:
            raise ValueError(
                f"corpus {name!r} has no document with {seq_words} words: it is empty or its "
                "documents are too short; give more text or a smaller seq_words"
            )
    return SequenceSet(
        tuple(texts), np.asarray(labels, dtype=np.int64), tuple(groups), tuple(corpora)
    )


def document_split(
    data: SequenceSet,
    test_fraction: float = 0.2,
    seed: int = 0,
    min_documents: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """Split by document: indices of the training and test sequences.

    The distinct ``groups`` are shuffled with ``seed`` and the first
    ``round(test_fraction * n_groups)`` (at least one) go to the test side, so no document
    has sequences on both sides.

    Parameters
    ----------
    data : SequenceSet
    test_fraction : float
        In (0, 1).
    seed : int
    min_documents : int
        Every class must have sequences from at least this many documents on each side.

    Returns
    -------
    train, test : ndarray of int
        Increasing indices into ``data``.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    uniq = sorted(set(data.groups))
    if len(uniq) < 2:
        raise ValueError(
            f"a document-level split needs at least 2 documents, got {len(uniq)}; "
            "give each corpus more documents"
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(uniq))
    n_test = min(len(uniq) - 1, max(1, round(test_fraction * len(uniq))))
    test_groups = {uniq[i] for i in order[:n_test]}
    is_test = np.fromiter((g in test_groups for g in data.groups), bool, len(data))
    labels = np.asarray(data.labels)
    for k, name in enumerate(data.classes):
        for side, mask in (("training", ~is_test), ("test", is_test)):
            docs = {data.groups[i] for i in np.flatnonzero(mask & (labels == k))}
            if len(docs) < min_documents:
                raise ValueError(
                    f"corpus {name!r} has {len(docs)} document(s) on the {side} side, the "
                    f"split needs at least {min_documents}: give it more documents or change "
                    f"test_fraction ({test_fraction})"
                )
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def balance(
    data: SequenceSet, index: np.ndarray, seed: int = 0, per_class: int | None = None
) -> np.ndarray:
    """Subsample ``index`` to the same number of sequences per class (chance = 1/K).

    Parameters
    ----------
    data : SequenceSet
    index : ndarray of int
    seed : int
    per_class : int, optional
        Target count; default (and maximum) the smallest class count in ``index``.

    Returns
    -------
    ndarray of int
        Increasing indices.
    """
    rng = np.random.default_rng(seed)
    index = np.asarray(index)
    labels = np.asarray(data.labels)[index]
    counts = [int((labels == k).sum()) for k in range(len(data.classes))]
    m = min(counts)
    if m == 0:
        raise ValueError(f"a class has no sequences here (counts per class {counts})")
    m = m if per_class is None else min(m, int(per_class))
    out = [rng.choice(index[labels == k], size=m, replace=False) for k in range(len(counts))]
    return np.sort(np.concatenate(out))
