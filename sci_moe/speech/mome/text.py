r"""Characters for the CTC head: vocabulary, greedy decoding, CER and WER.

The vocabulary is the CTC blank (id 0), space, ``a``-``z`` and the apostrophe (29
symbols). :func:`normalize_text` lower-cases and keeps only those characters.
Greedy CTC decoding takes the arg-max per output frame, merges repeats and drops
blanks. Error rates are corpus-level:

.. math:: \mathrm{CER} = \frac{\sum_u d(\hat c_u, c_u)}{\sum_u |c_u|}, \qquad
          \mathrm{WER} = \frac{\sum_u d(\hat w_u, w_u)}{\sum_u |w_u|}

with ``d`` the Levenshtein distance over characters (words).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

__all__ = [
    "BLANK",
    "VOCAB",
    "char_error_rate",
    "ctc_greedy_decode",
    "decode_ids",
    "edit_distance",
    "encode_text",
    "normalize_text",
    "word_error_rate",
]

#: Output symbols of the CTC head; index 0 is the blank.
VOCAB = ("<blank>", " ", *"abcdefghijklmnopqrstuvwxyz", "'")
#: Id of the CTC blank.
BLANK = 0
_INDEX = {c: i for i, c in enumerate(VOCAB) if i}


def normalize_text(text: str) -> str:
    """Lower-case, map other characters to spaces, collapse runs of spaces.

    Examples
    --------
    >>> normalize_text("Hello, World!  It's 3pm.")
    "hello world it's pm"
    """
    text = re.sub(r"[^a-z' ]+", " ", text.lower())
    return re.sub(r" +", " ", text).strip()


def encode_text(text: str) -> torch.Tensor:
    """Character ids of :func:`normalize_text`'s output, shape ``(n,)``, int64 (no blank)."""
    norm = normalize_text(text)
    if not norm:
        raise ValueError(f"text {text!r} has no letters to transcribe")
    return torch.tensor([_INDEX[c] for c in norm], dtype=torch.long)


def decode_ids(ids: Sequence[int]) -> str:
    """Characters of non-blank ids."""
    return "".join(VOCAB[int(i)] for i in ids if int(i) != BLANK)


def ctc_greedy_decode(log_probs: torch.Tensor, lengths: torch.Tensor) -> list[str]:
    """Greedy (best-path) CTC decoding.

    Parameters
    ----------
    log_probs : Tensor, shape (B, T, V)
    lengths : Tensor, shape (B,)
        Valid output frames per sequence.

    Returns
    -------
    list of str
        ``B`` transcripts (repeats merged, blanks removed, spaces stripped).
    """
    best = log_probs.argmax(-1).cpu()
    out = []
    for b in range(best.shape[0]):
        seq = best[b, : int(lengths[b])]
        if seq.numel():
            keep = torch.ones_like(seq, dtype=torch.bool)
            keep[1:] = seq[1:] != seq[:-1]
            seq = seq[keep]
        out.append(re.sub(r" +", " ", decode_ids(seq.tolist())).strip())
    return out


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance (insertions, deletions, substitutions all cost 1)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _rate(hyps: Sequence[str], refs: Sequence[str], split) -> float:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    errors = sum(edit_distance(split(h), split(r)) for h, r in zip(hyps, refs, strict=True))
    total = sum(len(split(r)) for r in refs)
    if total == 0:
        raise ValueError("the references are empty: an error rate is undefined")
    return errors / total


def char_error_rate(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus character error rate (references normalised with :func:`normalize_text`).

    Examples
    --------
    >>> char_error_rate(["helo world"], ["hello world"])
    0.09090909090909091
    """
    return _rate(hyps, [normalize_text(r) for r in refs], list)


def word_error_rate(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus word error rate (references normalised with :func:`normalize_text`).

    Examples
    --------
    >>> word_error_rate(["helo world"], ["hello world"])
    0.5
    """
    return _rate(hyps, [normalize_text(r) for r in refs], str.split)
