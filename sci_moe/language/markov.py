r"""Generated text with a known loss floor: documents drawn from one of several Markov sources.

A stream of documents over a small alphabet of letters, each document ended by ``"\n"``.
Every document draws its source :math:`s` uniformly from :math:`S` sources, its first
letter from the source's stationary distribution :math:`\pi_s` and every next token from

.. math::

    P(\text{end} \mid s, a) = q, \qquad P(b \mid s, a) = (1 - q)\,T_s[a, b],

with :math:`T_s` the source's order-1 transition table over the letters (rows drawn from
a Dirichlet distribution, so the sources differ in every row) and :math:`q` the end
probability (document lengths are geometric, mean :math:`1/q` letters, the same for
every source). Predicting the next letter well needs the source, which only the context
reveals, and each source is its own table: the data rewards experts that specialise.

Both loss floors are exact:

* :meth:`MarkovSources.oracle_entropy_rate`, the entropy rate in nats per byte of a
  predictor that is told every document's source (closed form, below);
* :meth:`MarkovSources.bayes_loss`, the per-token loss of the Bayes-optimal predictor
  that sees only the window (the forward recursion over the hidden source), the floor of
  any model trained on windows of the stream.

With :math:`H(p)` the entropy in nats, :math:`h(q)` the binary entropy and
:math:`H_s = \sum_a \pi_s(a) H(T_s[a])`, a document of source :math:`s` has
:math:`1/q` letters on average, each followed by one token, plus its first letter after
the previous ``"\n"``, so with source labels known

.. math::

    H_\text{oracle} = \frac{\tfrac{1}{S}\sum_s \big[H(\pi_s)
        + \tfrac{1}{q}\,\big(h(q) + (1 - q) H_s\big)\big]}{1/q + 1}.

:func:`markov_corpus` samples a stream and splits it like :func:`text_corpus` (first
``1 - val_fraction`` of the bytes train, the rest validates); the text is plain ASCII, so
``sci-moe train lm --text-file`` reads the same corpus from :meth:`MarkovSources.sample`'s
output written to a file.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np
import torch

from .data import TextCorpus, text_corpus

__all__ = ["SEPARATOR", "MarkovSources", "markov_corpus"]

SEPARATOR = "\n"


def _entropy(p: np.ndarray) -> np.ndarray:
    """Entropy in nats along the last axis (``0 log 0 = 0``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(p), 0.0).sum(-1)


@dataclass(frozen=True, eq=False)
class MarkovSources:
    """``S`` order-1 Markov sources over ``V`` letters, documents ended by ``"\\n"``.

    Parameters
    ----------
    transitions : ndarray, shape (S, V, V)
        Row-stochastic transition table of each source (rows: the current letter).
    end_prob : float
        Probability ``q`` that a letter ends its document (mean length ``1/q`` letters).
    alphabet : str
        The ``V`` letters (ASCII, distinct, no ``"\\n"``).
    """

    transitions: np.ndarray
    end_prob: float
    alphabet: str

    def __post_init__(self) -> None:
        T = np.asarray(self.transitions, dtype=float)
        if T.ndim != 3 or T.shape[1] != T.shape[2]:
            raise ValueError(f"transitions must have shape (S, V, V), got {T.shape}")
        if (T < 0).any() or not np.allclose(T.sum(-1), 1.0, atol=1e-9):
            raise ValueError("every row of transitions must be a probability distribution")
        if not 0.0 < self.end_prob < 1.0:
            raise ValueError(f"end_prob must be in (0, 1), got {self.end_prob}")
        a = self.alphabet
        if len(a) != T.shape[1] or len(set(a)) != len(a) or not a.isascii() or SEPARATOR in a:
            raise ValueError(
                f"alphabet must be {T.shape[1]} distinct ASCII characters without a newline, "
                f"got {a!r}"
            )
        object.__setattr__(self, "transitions", T)

    @classmethod
    def random(
        cls,
        num_sources: int = 8,
        alphabet_size: int = 16,
        concentration: float = 0.3,
        mean_length: float = 128.0,
        seed: int = 0,
    ) -> MarkovSources:
        """Sources with Dirichlet(``concentration``) transition rows (smaller: more
        predictable letters), letters ``a, b, ...``, end probability ``1/mean_length``."""
        if num_sources < 1 or not 2 <= alphabet_size <= 26:
            raise ValueError(
                f"need num_sources >= 1 and 2 <= alphabet_size <= 26, got {num_sources}, "
                f"{alphabet_size}"
            )
        if concentration <= 0 or mean_length <= 1:
            raise ValueError(
                f"need concentration > 0 and mean_length > 1, got {concentration}, {mean_length}"
            )
        rng = np.random.default_rng(seed)
        T = rng.dirichlet(np.full(alphabet_size, concentration), (num_sources, alphabet_size))
        T = np.maximum(T, 1e-12)  # no exact zeros: every letter stays possible
        T /= T.sum(-1, keepdims=True)
        return cls(T, 1.0 / mean_length, string.ascii_lowercase[:alphabet_size])

    @property
    def num_sources(self) -> int:
        return self.transitions.shape[0]

    def stationary(self) -> np.ndarray:
        """Stationary letter distribution of each source, shape ``(S, V)``."""
        out = []
        for T in self.transitions:
            w, v = np.linalg.eig(T.T)
            p = np.real(v[:, np.argmin(np.abs(w - 1.0))])
            out.append(p / p.sum())
        return np.array(out)

    def oracle_entropy_rate(self) -> float:
        """Entropy rate (nats per byte) given every document's source (module docstring)."""
        q = self.end_prob
        pi = self.stationary()
        h_s = (pi * _entropy(self.transitions)).sum(-1)
        hq = -(q * np.log(q) + (1 - q) * np.log1p(-q))
        per_doc = _entropy(pi) + (hq + (1 - q) * h_s) / q
        return float(per_doc.mean() / (1.0 / q + 1.0))

    def sample(self, n_bytes: int, seed: int = 0) -> str:
        """About ``n_bytes`` bytes of the stream (whole documents, cut to ``n_bytes``)."""
        if n_bytes < 1:
            raise ValueError(f"n_bytes must be >= 1, got {n_bytes}")
        rng = np.random.default_rng(seed)
        q, S = self.end_prob, self.num_sources
        n_docs = int(n_bytes * q * 1.2) + 16
        while True:
            lengths = rng.geometric(q, n_docs)
            if (lengths + 1).sum() >= n_bytes:
                break
            n_docs *= 2
        src = rng.integers(0, S, n_docs)
        cdf = np.cumsum(self.transitions, -1)
        pi_cdf = np.cumsum(self.stationary(), -1)
        letters = np.zeros((n_docs, lengths.max()), dtype=np.int64)
        last = self.transitions.shape[1] - 1
        width = int(lengths.max())
        letters = np.zeros((n_docs, width), dtype=np.int64)
        cur = np.minimum((rng.random(n_docs)[:, None] > pi_cdf[src]).sum(1), last)
        letters[:, 0] = cur
        for t in range(1, width):
            u = rng.random(n_docs)[:, None]
            cur = np.minimum((u > cdf[src, cur]).sum(1), last)
            letters[:, t] = cur
        codes = np.frombuffer(self.alphabet.encode("ascii"), dtype=np.uint8)
        pos = np.arange(width + 1)[None, :]
        rows = np.full((n_docs, width + 1), ord(SEPARATOR), dtype=np.uint8)
        rows[:, :-1] = np.where(pos[:, :-1] < lengths[:, None], codes[letters], ord(SEPARATOR))
        keep = pos <= lengths[:, None]  # the letters and one separator per document
        return rows[keep].tobytes()[:n_bytes].decode("ascii")

    def _token_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities over the 256 bytes: ``(S, 256, 256)`` next byte given the
        source and the current byte (letters and the separator), and ``(S, 256)`` for the
        first letter of a document; bytes outside the alphabet get ``-inf``."""
        S = self.num_sources
        q = self.end_prob
        codes = torch.tensor(list(self.alphabet.encode("ascii")))
        sep = ord(SEPARATOR)
        first = torch.full((S, 256), -torch.inf, dtype=torch.float64)
        first[:, codes] = torch.from_numpy(np.log(self.stationary()))
        nxt = torch.full((S, 256, 256), -torch.inf, dtype=torch.float64)
        block = torch.from_numpy(np.log1p(-q) + np.log(self.transitions))
        nxt[:, codes[:, None], codes[None, :]] = block
        nxt[:, codes, sep] = float(np.log(q))
        return nxt, first

    def bayes_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-token loss (nats) of the Bayes-optimal predictor that sees only the window.

        The forward recursion over the hidden source: the belief at a window's first
        letter is proportional to ``pi_s`` of that letter (uniform after ``"\\n"``: a new
        document's source is unknown), each observed next token multiplies it by its
        likelihood under the source, and a ``"\\n"`` resets it to uniform. Exact for windows
        of the stationary stream (geometric lengths do not depend on the source).

        Parameters
        ----------
        x, y : Tensor, int64, shape (n, T)
            Windows and their next tokens (:func:`~sci_moe.language.validation_windows`).

        Returns
        -------
        Tensor, float64, shape (n, T)
            ``-log p(y_t | x_0 .. x_t)``; ``inf`` where a byte is impossible (outside the
            alphabet, or a broken stream).
        """
        if x.shape != y.shape or x.ndim != 2:
            raise ValueError(f"x and y must have the same shape (n, T), got {x.shape}, {y.shape}")
        nxt, first = self._token_tables()
        S = self.num_sources
        sep = ord(SEPARATOR)
        n, T = x.shape
        x, y = x.long(), y.long()
        uniform = torch.full((n, S), -np.log(S), dtype=torch.float64)
        x0 = x[:, 0]
        logb = torch.where(
            (x0 == sep)[:, None], uniform, torch.log_softmax(first[:, x0].T, dim=1)
        )  # log belief over the source before predicting y_0
        out = torch.empty(n, T, dtype=torch.float64)
        mix_first = torch.logsumexp(first - np.log(S), dim=0)  # (256,) a new document's letter
        for t in range(T):
            at_sep = x[:, t] == sep
            lik = nxt[:, x[:, t], y[:, t]].T  # (n, S)
            pred = torch.logsumexp(logb + lik, dim=1)
            out[:, t] = -torch.where(at_sep, mix_first[y[:, t]], pred)
            # after "\n" y_t is the new document's first letter: the belief restarts there
            post_sep = torch.log_softmax(first[:, y[:, t]].T, dim=1)
            logb = torch.where(at_sep[:, None], post_sep, torch.log_softmax(logb + lik, dim=1))
        return out


def markov_corpus(
    sources: MarkovSources, n_bytes: int, val_fraction: float = 0.1, seed: int = 0
) -> TextCorpus:
    """``n_bytes`` of :meth:`MarkovSources.sample` split as :func:`text_corpus` splits a text
    (the same corpus ``sci-moe train lm --text-file`` reads from the sample written out)."""
    return text_corpus(sources.sample(n_bytes, seed), val_fraction, name="markov_sources")
