"""The propagation part of ``run.py``: LMs trained on each filtered corpus, samples classified.

One ``propagation seed s`` part: LMs trained until flat on each pipeline's corpus, their
generated text classified by the fingerprint classifier, the word rate (fraction of
alphabetic words in a vocabulary) and stream perplexity of the samples. A helper module:
``run.py`` imports it.
"""

from __future__ import annotations

import re
import time

import numpy as np
import torch
from _common import Row
from _cycles import train_lm
from _fp_classify import SOURCES, _bow

from sci_moe._util import module_device
from sci_moe.data.wiki_pipelines import build_pipeline_corpora
from sci_moe.language import MoELMConfig, TrainConfig
from sci_moe.language.provenance import estimate_mixture, generate, mixture_documents

__all__ = [
    "PROP",
    "TRUTH",
    "document_split",
    "part_propagation",
    "stream_ppl",
    "token_windows",
    "word_rate",
]


PROP = ("c4", "gopher", "norm")


TRUTH = (0.5, 0.3, 0.2)


_WORD = re.compile(r"[A-Za-z]+")


def word_rate(texts, vocabulary: set[str]) -> float:
    """Share of the alphabetic tokens of ``texts`` (2+ letters) found in ``vocabulary``."""
    toks = [w.lower() for t in texts for w in _WORD.findall(t) if len(w) > 1]
    return float(np.mean([w in vocabulary for w in toks])) if toks else 0.0


def stream_ppl(model, ids, max_windows: int = 48) -> float:
    """Per-token perplexity of ``model`` on non-overlapping windows of token ids ``ids``
    (on the model's device)."""
    T = model.config.seq_len
    n = min(max_windows, (ids.numel() - 1) // (T + 1))
    if n < 1:
        raise ValueError("validation text shorter than one window")
    w = ids[: n * (T + 1)].view(n, T + 1).to(module_device(model))
    with torch.no_grad():
        logits, _, _ = model(w[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1)
        )
    return float(torch.exp(loss))


def token_windows(tok, ids, n: int, length: int, rng) -> list[str]:
    """``n`` decoded windows of ``length`` tokens at random offsets of the id stream ``ids``."""
    starts = rng.integers(0, ids.numel() - length, n)
    return [tok.decode(ids[o : o + length]) for o in starts]


def document_split(corpora: dict, order: dict, fraction: float) -> tuple[dict, dict]:
    """Split every pipeline's documents by one validation set of source documents.

    Parameters
    ----------
    corpora : dict
        Pipeline name -> list of ``(title, text)`` (:func:`build_pipeline_corpora`).
    order : dict
        Title -> its place in one shuffled order shared by the pipelines.
    fraction : float
        Share of the titles, the last of the order, held out for validation (0 < f < 1).

    Returns
    -------
    train, val : dict
        Pipeline name -> its texts in the shared order, without / with the held-out
        titles; a title is held out in every pipeline or in none.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    first_held = len(order) - max(1, round(fraction * len(order)))
    train, val = {}, {}
    for n, docs in corpora.items():
        ordered = sorted(docs, key=lambda d: order[d[0]])
        train[n] = [x for t, x in ordered if order[t] < first_held]
        val[n] = [x for t, x in ordered if order[t] >= first_held]
    return train, val


def part_propagation(cfg, seed, s, state, device: str = "cpu") -> list[Row]:
    """One propagation seed; the LMs train (and sample) on ``device`` (not a setting)."""
    from sci_moe.language.provenance import PieceTokenizer

    corpora = build_pipeline_corpora(PROP, seed=1, sources=SOURCES)
    # one shuffled document order shared by the pipelines, so their validation tails match
    titles = sorted({t for n in PROP for t, _ in corpora[n]})
    order = {t: i for i, t in enumerate(np.random.default_rng(1234).permutation(titles))}
    texts = {n: [x for t, x in sorted(corpora[n], key=lambda d: order[d[0]])] for n in PROP}
    by_document = cfg.get("prop_split") == "document"
    if by_document:
        # validation = the last tenth of the shared order, in every pipeline: no source
        # document is in one LM's training text and another pipeline's validation text
        train_text, val_text = document_split(corpora, order, 0.1)
        texts = train_text
        stream = {n: "\n\n".join(train_text[n]) for n in PROP}
        cut = {n: len(stream[n]) for n in PROP}
    else:  # the runs before: tails cut at 90 % of each stream (documents leak across)
        val_text = None
        stream = {n: "\n\n".join(texts[n]) for n in PROP}
        cut = {n: int(0.9 * len(stream[n])) for n in PROP}
    tok = PieceTokenizer.fit([stream[n][: cut[n]] for n in PROP], cfg["vocab"])
    vocab = {w.lower() for n in PROP for w in _WORD.findall(stream[n][: cut[n]])}
    lm_cfg = MoELMConfig(
        vocab_size=len(tok),
        d_model=64,
        n_layers=2,
        n_heads=4,
        seq_len=64,
        d_hidden=128,
        num_experts=4,
        top_k=2,
    )
    tcfg = TrainConfig(
        steps=cfg["lm_steps"],
        batch_size=16,
        lr=3e-3,
        warmup=0.05,
        eval_every=cfg["lm_eval"],
        eval_batches=4,
        seed=seed + s,
        progress=False,
        device=device,
    )
    total = int((1.0 if by_document else 0.9) * min(len(stream[n].encode()) for n in PROP))
    sources = dict(texts)
    sources["mixture"] = mixture_documents(
        [texts[n] for n in PROP], np.array(TRUTH), total, seed=seed + s
    )
    if by_document:
        val_total = min(len("\n\n".join(val_text[n]).encode()) for n in PROP)
        val_text = dict(val_text)
        val_text["mixture"] = mixture_documents(
            [val_text[n] for n in PROP], np.array(TRUTH), val_total, seed=seed + s
        )
    rows: list[Row] = []
    gens, lms = {}, {}
    curves = state.setdefault("curves", {}).setdefault("lm", {})
    samples = state.setdefault("samples", {})
    L = cfg["gen_tokens"]
    for i, (n, docs) in enumerate(sources.items()):
        t0 = time.time()
        lm, curve, cycles, conv = train_lm(
            docs,
            lm_cfg,
            tcfg,
            tok,
            cfg["lm_cycles"],
            None if val_text is None else val_text[n],
            min_cycles=cfg["min_cycles"],
        )
        curves.setdefault(n, {})[str(s)] = curve
        ppl = curve[-1][1]
        gens[n] = generate(
            lm, cfg["gen"], L, seed=seed + 100 * s + i, prompt="\n", burn_in=16, tokenizer=tok
        )
        lms[n] = lm
        samples.setdefault(n, {})[str(s)] = gens[n][:3]
        wr = word_rate(gens[n], vocab)
        case = f"propagation LM {n}"
        rows += [
            Row(case, f"val_ppl seed {s}", ppl, "token ppl"),
            Row(case, f"word_rate seed {s}", wr, "fraction"),
            Row(case, f"converged seed {s}", float(conv), "bool"),
            Row(case, f"cycles seed {s}", float(cycles), "cycles"),
            Row(case, f"steps seed {s}", float(curve[-1][0]), "steps"),
        ]
        print(
            f"seed {s} LM {n}: val ppl {ppl:.1f}, word rate {wr:.2f}, {cycles} cycle(s), "
            f"flat {conv} "
            f"({time.time() - t0:.0f} s); sample {gens[n][0][:80]!r}",
            flush=True,
        )
    ids = {n: tok.encode(stream[n]) for n in PROP}
    if by_document:  # the training ids, then the validation ids, as one stream per pipeline
        val_ids = {n: tok.encode("\n\n".join(val_text[n])) for n in PROP}
        train_end = {n: ids[n].numel() for n in PROP}
        ids = {n: torch.cat([ids[n], val_ids[n]]) for n in PROP}
    else:
        train_end = {n: int(0.9 * ids[n].numel()) for n in PROP}
    rng = np.random.default_rng(seed + 10 + s)
    real = token_windows(tok, ids["c4"][: train_end["c4"]], cfg["gen"], L, rng)
    rows.append(Row("real text", f"word_rate seed {s}", word_rate(real, vocab), "fraction"))
    # cross-pipeline generalisation: each single LM on every pipeline's validation tail
    own, cross = [], []
    for a in PROP:
        for b in PROP:
            p = stream_ppl(lms[a], ids[b][train_end[b] :])
            rows.append(Row(f"cross ppl {a} on {b}", f"ppl seed {s}", p, "token ppl"))
            (own if a == b else cross).append(p)
    rows.append(Row("cross-pipeline ppl", f"ppl seed {s}", float(np.mean(cross)), "token ppl"))
    rows.append(Row("own-pipeline ppl", f"ppl seed {s}", float(np.mean(own)), "token ppl"))
    # classifier on real text: random windows of the generations' length, training parts
    xr, yr = [], []
    for k, n in enumerate(PROP):
        tr_ids = ids[n][: train_end[n]]
        xr += token_windows(tok, tr_ids, cfg["real_windows"], L, rng)
        yr += [k] * cfg["real_windows"]
    clf = _bow().fit(xr, np.array(yr), list(PROP))
    single = np.zeros((3, 3), dtype=np.int64)
    for k, n in enumerate(PROP):
        single[k] = np.bincount(clf.predict(gens[n]), minlength=3)
        rows.append(
            Row(
                f"propagation generations of LM {n}",
                f"classified_as_source seed {s}",
                float(single[k, k] / single[k].sum()),
                "fraction",
            )
        )
    acc = float(np.trace(single) / single.sum())
    rows.append(Row("propagation single-LM generations", f"accuracy seed {s}", acc, "fraction"))
    state.setdefault("confusions", {})[str(s)] = single.tolist()
    q = np.bincount(clf.predict(gens["mixture"]), minlength=3) / len(gens["mixture"])
    truth = np.array(TRUTH)
    for label, est in (
        ("classify-and-count", estimate_mixture(q)),
        ("adjusted count", estimate_mixture(q, single)),
    ):
        err = float(np.abs(est - truth).sum())
        for k, n in enumerate(PROP):
            rows.append(
                Row(f"mixture {label} {n}", f"proportion seed {s}", float(est[k]), "fraction")
            )
        rows.append(Row(f"mixture {label}", f"l1_error seed {s}", err, "fraction"))
        print(f"seed {s} mixture {label}: {np.round(est, 3).tolist()}; L1 {err:.3f}", flush=True)
    uniform = float(np.abs(truth - 1 / 3).sum())
    rows.append(Row("mixture uniform guess", f"l1_error seed {s}", uniform, "fraction"))
    print(f"seed {s}: generations classified {acc:.3f} (chance 0.333)", flush=True)
    return rows
