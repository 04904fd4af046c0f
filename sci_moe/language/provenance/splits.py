"""Document-level splits and fixed-length sequences of labelled corpora.

Fingerprint classifiers see *sequences* (a fixed number of words) but are split by
*document*: every sequence of one document — and, when several corpora were processed from
the same source documents, every version of it — lies on one side of the split, so a
classifier cannot score by recognising a document it saw in training.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SequenceSet", "balance", "document_split", "make_sequences", "stratified_pool"]

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


def stratified_pool(
    data: SequenceSet,
    per_class: int,
    share: Sequence[float],
    seed: int = 0,
    *,
    sources: Sequence[str] | None = None,
    source_of: Callable[[str], str] | None = None,
) -> np.ndarray:
    """Draw ``per_class`` sequences per class, a given share of them from each source.

    For every class, ``round(share[j] * per_class)`` sequences are drawn at random (without
    replacement) from the class's sequences of source ``sources[j]``, in the order of
    ``sources``; the last source takes what is left of ``per_class``. A source short of
    sequences gives all it has and the class is topped up at random from its other
    sequences. A class with fewer than ``per_class`` sequences gives all of them.

    Parameters
    ----------
    data : SequenceSet
        The source of a sequence is ``source_of(data.groups[i])``.
    per_class : int
        Sequences per class, >= 1.
    share : sequence of float, length S
        Fraction of ``per_class`` from each source, >= 0, summing to 1 (e.g. the
        fingerprints benchmark's ``[0.5, 0.25, 0.25]``: half from ``wiki``, a quarter from
        each of ``newsgroups`` and ``news``).
    seed : int
    sources : sequence of str, length S, optional
        Default :data:`sci_moe.data.wiki_pipelines.SOURCES` (``wiki``, ``newsgroups``,
        ``news``).
    source_of : callable, optional
        Document id -> source name; default
        :func:`sci_moe.data.wiki_pipelines.document_source`.

    Returns
    -------
    ndarray of int, shape (<= K * per_class,)
        Increasing indices into ``data`` (``K * per_class`` when every class has enough).

    Examples
    --------
    >>> groups = tuple(f"news:{i}" for i in range(8)) + tuple(f"T{i}" for i in range(8))
    >>> data = SequenceSet(("x",) * 16, np.zeros(16, dtype=int), groups, ("a",))
    >>> idx = stratified_pool(data, 4, [0.5, 0.25, 0.25], seed=0)
    >>> int((idx >= 8).sum()), len(idx)  # wiki sequences (T*), all drawn
    (2, 4)
    """
    if sources is None or source_of is None:
        # imported here: sci_moe.data.wiki_pipelines imports this package
        from ...data.wiki_pipelines import SOURCES, document_source

        sources = SOURCES if sources is None else sources
        source_of = document_source if source_of is None else source_of
    sources = tuple(sources)
    share = [float(x) for x in share]
    if int(per_class) != per_class or per_class < 1:
        raise ValueError(f"per_class must be an integer >= 1, got {per_class}")
    per_class = int(per_class)
    if len(share) != len(sources) or not sources:
        raise ValueError(
            f"share has {len(share)} entries but there are {len(sources)} sources "
            f"{list(sources)}: give one fraction per source"
        )
    if any(not np.isfinite(x) or x < 0 for x in share) or abs(sum(share) - 1.0) > 1e-6:
        raise ValueError(f"share must be fractions >= 0 that sum to 1, got {share}")
    rng = np.random.default_rng(seed)
    labels = np.asarray(data.labels)
    src = np.array([source_of(g) for g in data.groups])
    out = []
    for k in range(len(data.classes)):
        taken: list[np.ndarray] = []
        left = per_class
        for j, s in enumerate(sources):
            cand = np.flatnonzero((labels == k) & (src == s))
            room = per_class - sum(map(len, taken))
            n = room if j == len(sources) - 1 else min(round(share[j] * per_class), room)
            pick = rng.choice(cand, size=min(n, cand.size), replace=False)
            taken.append(pick)
            left -= pick.size
        if left > 0:
            rest = np.setdiff1d(np.flatnonzero(labels == k), np.concatenate(taken))
            taken.append(rng.choice(rest, size=min(left, rest.size), replace=False))
        out.append(np.concatenate(taken))
    return np.sort(np.concatenate(out))
