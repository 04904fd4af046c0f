r"""Fingerprint propagation: train byte-level LMs on corpora, sample them, read the mixture back.

Mansour & Heckel train LLMs on each corpus and on a known mixture, classify 8192 of their
generations with a classifier trained on the *real* corpora, and recover the mixture from the
predicted class frequencies. Here the LMs are :class:`sci_moe.language.MoETransformerLM`
trained with :func:`sci_moe.language.train` on the UTF-8 bytes of each corpus
(:func:`train_lm_on_texts`), sampled with :func:`generate`; with a :class:`PieceTokenizer`
(whole words with their leading white space, line breaks and punctuation marks as tokens,
rarer pieces spelled out in known chunks; exact round trip) the same functions train and
sample a word-piece LM, which writes words after far fewer steps than a byte LM;
:func:`mixture_documents` builds a training stream with known byte proportions, and
:func:`~sci_moe.language.provenance.estimate_mixture` turns predictions into proportions.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from ..._util import module_device
from .. import MoELMConfig, MoETransformerLM, TextCorpus, TrainConfig, decode, encode, train

__all__ = ["PieceTokenizer", "generate", "mixture_documents", "train_lm_on_texts"]

_PIECE = re.compile(r"\n|[^\S\n]*(?:\w+|[^\w\s])|[^\S\n]+")
_UNK = "\ufffd"


class PieceTokenizer:
    """Word-piece tokens: a word or punctuation mark with its leading spaces, or a line break.

    ``vocab[0]`` is U+FFFD (unknown character); pieces outside the vocabulary are spelled
    out greedily as the longest known chunks (single characters at worst), and characters
    outside it become ``vocab[0]``, so ``decode(encode(t)) == t`` whenever every character
    of ``t`` is in the vocabulary.

    Examples
    --------
    >>> tok = PieceTokenizer.fit(["The cat, the hat.\\n"], vocab_size=40)
    >>> tok.decode(tok.encode("The hat, the cat.\\n"))
    'The hat, the cat.\\n'
    """

    def __init__(self, vocab: Sequence[str]) -> None:
        if not vocab or vocab[0] != _UNK or len(set(vocab)) != len(vocab):
            raise ValueError("vocab must be distinct strings starting with U+FFFD")
        self.vocab = list(vocab)
        self.index = {p: i for i, p in enumerate(self.vocab)}

    @classmethod
    def fit(
        cls, texts: Sequence[str], vocab_size: int = 4096, piece_share: float = 0.5
    ) -> PieceTokenizer:
        """The ``vocab_size`` tokens: every character seen (most frequent first, at most a
        quarter of the vocabulary), the most frequent whole pieces (``piece_share`` of the
        vocabulary), then the most frequent 2- to 5-character chunks of the other pieces."""
        pieces: Counter = Counter()
        chars: Counter = Counter()
        for t in texts:
            pieces.update(_PIECE.findall(t))
            chars.update(t)
        vocab = [_UNK] + [c for c, _ in chars.most_common(vocab_size // 4) if c != _UNK]
        have = set(vocab)
        n_pieces = len(vocab) + int(piece_share * vocab_size)
        rest: Counter = Counter()
        for p, n in pieces.most_common():
            if len(vocab) < min(n_pieces, vocab_size) and len(p) > 1:
                if p not in have:
                    vocab.append(p)
                    have.add(p)
            elif p not in have:
                for k in range(2, 6):
                    for i in range(len(p) - k + 1):
                        rest[p[i : i + k]] += n
        for p, _ in rest.most_common():
            if len(vocab) >= vocab_size:
                break
            if p not in have:
                vocab.append(p)
                have.add(p)
        return cls(vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> torch.Tensor:
        """Token ids of ``text``, int64."""
        ids: list[int] = []
        for p in _PIECE.findall(text):
            i = self.index.get(p)
            if i is not None:
                ids.append(i)
            else:  # greedy longest match, falling back to single characters
                j = 0
                while j < len(p):
                    for k in range(min(5, len(p) - j), 0, -1):
                        i = self.index.get(p[j : j + k])
                        if i is not None or k == 1:
                            ids.append(0 if i is None else i)
                            j += k
                            break
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids) -> str:
        """The text of token ids."""
        return "".join(self.vocab[int(i)] for i in ids)


_SEP = "\n\n"


def train_lm_on_texts(
    documents: Sequence[str],
    model_cfg: MoELMConfig,
    train_cfg: TrainConfig,
    val_fraction: float = 0.1,
    tokenizer: PieceTokenizer | None = None,
    init_from: str | os.PathLike | None = None,
    val_documents: Sequence[str] | None = None,
) -> tuple[MoETransformerLM, dict]:
    """Train a byte-level MoE LM on ``documents`` (joined by blank lines).

    With ``tokenizer`` the tokens are its pieces (``model_cfg.vocab_size`` must equal its
    size) instead of bytes. The token stream is split at ``1 - val_fraction`` of its length
    into training and validation parts (:class:`sci_moe.language.TextCorpus`); with
    ``val_documents`` every one of ``documents`` is trained on and the validation part is
    ``val_documents`` (joined the same way; ``val_fraction`` is not used), so a split by
    document can be shared by several corpora. With
    ``init_from`` (a model file of :func:`sci_moe.language.save_model` or a checkpoint of
    :func:`sci_moe.language.train`) the model starts from those weights with a fresh
    optimiser and schedule: a further training cycle of the same data split.

    ``train_cfg.device`` is where the model trains (and stays: :func:`generate` samples
    it there).

    Returns
    -------
    model : MoETransformerLM
        In eval mode, on ``train_cfg.device``.
    history : dict
        :func:`sci_moe.language.train`'s history (``val_ppl`` etc.).
    """
    docs = [d for d in documents if d.strip()]
    if not docs:
        raise ValueError("no non-empty document to train a language model on")
    if tokenizer is not None and model_cfg.vocab_size != len(tokenizer):
        raise ValueError(
            f"model_cfg.vocab_size {model_cfg.vocab_size} != the tokenizer's {len(tokenizer)}"
        )

    def tokens(texts):
        text = _SEP.join(texts)
        return encode(text) if tokenizer is None else tokenizer.encode(text)

    stream = tokens(docs)
    need = model_cfg.seq_len + 1
    if val_documents is not None:
        val = tokens([d for d in val_documents if d.strip()])
        if stream.numel() < need or val.numel() < need:
            raise ValueError(
                f"{stream.numel()} training and {val.numel()} validation tokens: each part "
                f"needs at least seq_len + 1 = {need}; give more text or a shorter seq_len"
            )
        train_part, val_part = stream, val
    else:
        cut = round(stream.numel() * (1 - val_fraction))
        if cut < need or stream.numel() - cut < need:
            raise ValueError(
                f"{stream.numel()} tokens are too few for seq_len={model_cfg.seq_len} with "
                f"val_fraction={val_fraction}; give more text or a shorter seq_len"
            )
        train_part, val_part = stream[:cut], stream[cut:]
    corpus = TextCorpus(train_part, val_part, {"texts": (train_part.numel(), val_part.numel())})
    history, model = train(
        model_cfg, train_cfg, corpus=corpus, return_model=True, init_from=init_from
    )
    model.eval()
    return model, history


@torch.no_grad()
def generate(
    model: MoETransformerLM,
    num_samples: int,
    length: int,
    *,
    burn_in: int = 64,
    temperature: float = 1.0,
    prompt: str = "\n",
    seed: int = 0,
    batch_size: int = 64,
    tokenizer: PieceTokenizer | None = None,
) -> list[str]:
    """Sample byte sequences from a byte-level LM (sliding window of ``seq_len``).

    Each sample starts from ``prompt``; the first ``burn_in`` generated bytes are discarded so
    that the prompt's influence fades, and the next ``length`` bytes are decoded (invalid
    UTF-8 becomes U+FFFD).

    Parameters
    ----------
    model : MoETransformerLM
    num_samples, length : int
    burn_in : int
    temperature : float
        Softmax temperature (> 0).
    prompt : str
    seed : int
    batch_size : int
    tokenizer : PieceTokenizer, optional
        The model's tokenizer (default: bytes); ``burn_in`` and ``length`` count its tokens.

    The model runs on its own device; the draws are made on the CPU with a generator
    seeded by ``seed``, so the samples do not depend on where the model is beyond the
    rounding of its logits.

    Returns
    -------
    list of str, length num_samples
    """
    if num_samples < 1 or length < 1 or burn_in < 0:
        raise ValueError("num_samples and length must be >= 1 and burn_in >= 0")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    enc, dec = (encode, decode) if tokenizer is None else (tokenizer.encode, tokenizer.decode)
    start = enc(prompt).long()
    if start.numel() == 0:
        raise ValueError("prompt must be at least one byte")
    gen = torch.Generator().manual_seed(seed)
    window = model.config.seq_len
    dev = module_device(model)
    was = model.training
    model.eval()
    out: list[str] = []
    try:
        for s in range(0, num_samples, batch_size):
            b = min(batch_size, num_samples - s)
            seq = start.unsqueeze(0).repeat(b, 1)
            for _ in range(burn_in + length):
                logits, _, _ = model(seq[:, -window:].to(dev))
                p = torch.softmax(logits[:, -1].double() / temperature, -1).cpu()
                nxt = torch.multinomial(p, 1, generator=gen)
                seq = torch.cat([seq, nxt], 1)
            body = seq[:, start.numel() + burn_in :]
            out.extend(dec(row) for row in body)
    finally:
        model.train(was)
    return out


def mixture_documents(
    corpora: Sequence[Sequence[str]],
    proportions: Sequence[float],
    total_bytes: int,
    seed: int = 0,
) -> list[str]:
    """Documents drawn from several corpora so that corpus ``k`` supplies ``proportions[k]``
    of ``total_bytes`` (UTF-8), in a shuffled order.

    Documents are drawn without replacement, in a random order, from each corpus until its
    byte budget is met (the last one is cut to fit).
    """
    p = np.asarray(proportions, dtype=np.float64)
    if p.ndim != 1 or p.size != len(corpora) or np.any(p < 0) or not np.isclose(p.sum(), 1):
        raise ValueError("proportions must be >= 0, sum to 1 and have one entry per corpus")
    rng = np.random.default_rng(seed)
    picked: list[str] = []
    for docs, share in zip(corpora, p, strict=True):
        budget = round(float(share) * total_bytes)
        have = 0
        for i in rng.permutation(len(docs)):
            if have >= budget:
                break
            d = docs[i].encode("utf-8")
            take = d[: budget - have]
            picked.append(take.decode("utf-8", errors="ignore"))
            have += len(take)
        if have < budget:
            raise ValueError(
                f"a corpus has {have} bytes, fewer than the {budget} its proportion needs; "
                "lower total_bytes"
            )
    order = rng.permutation(len(picked))
    return [picked[i] for i in order]
