"""Bag-of-words logistic regression: the fingerprint paper's simple baseline.

Tokens are words (lower-cased unless ``BoWConfig.lowercase`` is false, so that case habits
count too), single punctuation marks and line breaks (so layout and punctuation habits
count, as in ``train_BoW.py`` of Mansour & Heckel's code, which vectorises the raw text);
unigrams and bigrams; sublinear tf-idf weights, L2-normalised
rows; multinomial logistic regression (scikit-learn, L2 penalty).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["BagOfWordsClassifier", "BoWConfig", "bow_tokens"]

_TOKENS = re.compile(r"\w+|[^\w\s]|\n")


def bow_tokens(text: str) -> list[str]:
    """Tokens of the bag-of-words model: words, punctuation marks and ``"\\n"``.

    Examples
    --------
    >>> bow_tokens("A b.\\n- c")
    ['A', 'b', '.', '\\n', '-', 'c']
    """
    return _TOKENS.findall(text)


@dataclass
class BoWConfig:
    """Options of :class:`BagOfWordsClassifier`.

    Parameters
    ----------
    max_ngram : int
        Longest token n-gram (1 or 2 typical).
    min_df : int
        Drop n-grams that occur in fewer training sequences.
    max_features : int
        Keep the most frequent n-grams.
    C : float
        Inverse L2 regularisation strength of the logistic regression.
    max_iter : int
        Solver iterations.
    lowercase : bool
        Lower-case the words before counting (the vectoriser's default; false keeps case).
    """

    max_ngram: int = 2
    min_df: int = 2
    max_features: int = 100_000
    C: float = 10.0
    max_iter: int = 1000
    lowercase: bool = True

    def __post_init__(self) -> None:
        for name in ("max_ngram", "min_df", "max_features", "max_iter"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.C > 0:
            raise ValueError(f"C must be > 0, got {self.C}")


class BagOfWordsClassifier:
    """K-way provenance classifier on bag-of-n-gram features.

    Parameters
    ----------
    config : BoWConfig, optional

    Examples
    --------
    >>> clf = BagOfWordsClassifier(BoWConfig(min_df=1))
    >>> clf = clf.fit(["a b.", "a c.", "x\\ny", "x\\nz"], [0, 0, 1, 1], classes=["p", "q"])
    >>> clf.predict(["a d.", "x\\nw"]).tolist()
    [0, 1]
    """

    kind = "bow"

    def __init__(self, config: BoWConfig | None = None) -> None:
        self.config = config or BoWConfig()
        self.classes: tuple[str, ...] = ()
        self.vocabulary: list[str] = []
        self.idf = np.zeros(0)
        self.coef = np.zeros((0, 0))
        self.intercept = np.zeros(0)

    def _vectorizer(self, vocabulary=None):
        from sklearn.feature_extraction.text import CountVectorizer

        c = self.config
        return CountVectorizer(
            tokenizer=bow_tokens,
            token_pattern=None,
            lowercase=c.lowercase,
            ngram_range=(1, c.max_ngram),
            min_df=1 if vocabulary is not None else c.min_df,
            max_features=None if vocabulary is not None else c.max_features,
            vocabulary=vocabulary,
            dtype=np.float64,
        )

    def _features(self, counts):
        from sklearn.preprocessing import normalize

        x = counts.tocsr().astype(np.float64)
        x.data = 1.0 + np.log(x.data)
        x = x.multiply(self.idf[None, :]).tocsr()
        return normalize(x)

    def fit(self, texts: Sequence[str], labels, classes: Sequence[str] | None = None):
        """Fit on training ``texts`` with integer ``labels`` in ``0..K-1``; returns ``self``."""
        from sklearn.linear_model import LogisticRegression

        y = _check_labels(texts, labels)
        self.classes = _class_names(y, classes)
        vec = self._vectorizer()
        try:
            counts = vec.fit_transform(list(texts))
        except ValueError as err:  # empty vocabulary after min_df
            raise ValueError(f"no n-gram survives min_df={self.config.min_df}: {err}") from None
        vocab = vec.vocabulary_
        self.vocabulary = sorted(vocab, key=vocab.get)
        df = np.bincount(counts.tocsr().indices, minlength=len(self.vocabulary))  # per column
        n = counts.shape[0]
        self.idf = np.log((1 + n) / (1 + df)) + 1.0
        lr = LogisticRegression(C=self.config.C, max_iter=self.config.max_iter)
        lr.fit(self._features(counts), y)
        coef = np.zeros((len(self.classes), len(self.vocabulary)))
        inter = np.zeros(len(self.classes))
        if len(lr.classes_) == 2 and lr.coef_.shape[0] == 1:
            coef[lr.classes_[1]], inter[lr.classes_[1]] = lr.coef_[0], lr.intercept_[0]
        else:
            coef[lr.classes_], inter[lr.classes_] = lr.coef_, lr.intercept_
        missing = sorted(set(range(len(self.classes))) - set(lr.classes_.tolist()))
        inter[missing] = -np.inf
        self.coef, self.intercept = coef, inter
        return self

    def decision_function(self, texts: Sequence[str]) -> np.ndarray:
        """Class scores (logits), shape (n, K)."""
        if not self.vocabulary:
            raise ValueError("the classifier is not fitted: call fit first")
        vec = self._vectorizer({w: i for i, w in enumerate(self.vocabulary)})
        x = self._features(vec.transform(list(texts)))
        return np.asarray(x @ self.coef.T) + self.intercept

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, shape (n, K)."""
        z = self.decision_function(texts)
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Predicted class indices, shape (n,)."""
        return self.decision_function(texts).argmax(axis=1)

    # -- persistence (see sci_moe.language.provenance.save_classifier)
    def state(self) -> tuple[dict, dict]:
        """``(config, arrays)``: JSON-able settings and the weight arrays."""
        cfg = {"config": asdict(self.config), "vocabulary": self.vocabulary}
        arrays = {"idf": self.idf, "coef": self.coef, "intercept": self.intercept}
        return cfg, arrays

    @classmethod
    def from_state(cls, classes, config: dict, arrays: dict, **_) -> BagOfWordsClassifier:
        """Rebuild from :meth:`state`."""
        clf = cls(BoWConfig(**config["config"]))
        clf.classes = tuple(classes)
        clf.vocabulary = list(config["vocabulary"])
        clf.idf, clf.coef = np.asarray(arrays["idf"]), np.asarray(arrays["coef"])
        clf.intercept = np.asarray(arrays["intercept"])
        return clf


def _class_names(y, classes: Sequence[str] | None) -> tuple[str, ...]:
    """``classes``, or ``"0" .. "K-1"`` with ``K = max(y) + 1`` when none are given."""
    return tuple(classes) if classes is not None else tuple(map(str, range(int(y.max()) + 1)))


def _check_labels(texts: Sequence[str], labels) -> np.ndarray:
    y = np.asarray(labels, dtype=np.int64)
    if y.ndim != 1 or y.size != len(texts):
        raise ValueError(f"labels must be 1-D with one entry per text, got shape {y.shape}")
    if y.size == 0:
        raise ValueError("no training texts")
    if y.min() < 0:
        raise ValueError("labels must be class indices >= 0")
    if np.unique(y).size < 2:
        raise ValueError("training data must contain at least 2 classes")
    return y
