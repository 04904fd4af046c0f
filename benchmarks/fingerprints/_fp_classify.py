"""The classification parts of ``run.py``: which corpus a sequence came from, and the null.

The corpora and the stratified pool of sequences, document-level splits per seed, pooled
accuracy rows (fractions, a document-cluster bootstrap interval), the ``classify`` part
(the classifiers on the pool) and the ``null`` part. A helper module: ``run.py`` imports
it.
"""

from __future__ import annotations

import time

import numpy as np
from _common import Row
from _cycles import fit_byte_classifier

from sci_moe.data.wiki_pipelines import (
    build_pipeline_corpora,
    document_source,
    null_control_corpora,
    stratified_pool,
)
from sci_moe.language.provenance import (
    BagOfWordsClassifier,
    BoWConfig,
    ByteClassifierConfig,
    ByteTransformerClassifier,
    EncoderFinetuneClassifier,
    EncoderFinetuneConfig,
    accuracy_interval,
    balance,
    confusion_matrix,
    document_split,
    make_sequences,
    remove_formatting,
    restrict_vocabulary,
    top_words,
)

__all__ = [
    "SOURCES",
    "acc_rows",
    "corpora_and_pool",
    "part_classify",
    "part_null",
    "splits",
]


SOURCES = ("wiki", "newsgroups", "news")


def acc_rows(case, preds, chance, note=""):
    """Pooled accuracy with a document-cluster bootstrap CI + per-seed values and std."""
    yt = np.concatenate([p[0] for p in preds])
    yp = np.concatenate([p[1] for p in preds])
    groups = np.concatenate([p[2] for p in preds]) if all(len(p) > 2 for p in preds) else None
    a, lo, hi = accuracy_interval(yt, yp, groups=groups)
    per = [float((p[0] == p[1]).mean()) for p in preds]
    rows = [
        Row(case, "accuracy", a, "fraction", "chance", a / chance),
        Row(case, "accuracy_ci_low", lo, "fraction", "chance", lo / chance),
        Row(case, "accuracy_ci_high", hi, "fraction", "chance", hi / chance),
        Row(case, "accuracy_seed_std", float(np.std(per)), "fraction"),
        Row(case, "n_test", float(yt.size), "sequences"),
        Row(case, "chance", chance, "fraction"),
    ]
    rows += [Row(case, f"accuracy seed {s}", v, "fraction") for s, v in enumerate(per)]
    print(
        f"{case:<40} acc {a:.3f} [{lo:.3f}, {hi:.3f}]  chance {chance:.3f}  "
        f"seeds {np.round(per, 3).tolist()} {note}",
        flush=True,
    )
    return rows


def splits(data, seeds, base_seed):
    """Document-level train/test indices per seed, classes balanced."""
    for s in range(seeds):
        tr, te = document_split(data, 0.25, seed=base_seed + s)
        yield s, balance(data, tr, seed=base_seed + s), balance(data, te, seed=base_seed + s)


def _bow(cased: bool = True) -> BagOfWordsClassifier:
    return BagOfWordsClassifier(BoWConfig(lowercase=not cased))


def _finetune_classifier(cfg, encoder, tokenizer, cache, seed, device="cpu"):
    """The MiniLM classifier with its top ``minilm_finetune_layers`` layers fine-tuned (the
    lower ones frozen, their states in the shared ``cache``), one cycle's settings."""
    config = EncoderFinetuneConfig(
        layers=cfg["minilm_finetune_layers"],
        max_length=cfg["minilm_finetune_max_length"],
        steps=cfg["minilm_finetune_steps"],
        batch_size=cfg["minilm_finetune_batch"],
        lr=cfg["minilm_finetune_lr"],
        seed=seed,
    )
    return EncoderFinetuneClassifier(
        encoder, tokenizer, config, progress=False, device=device, cache=cache
    )


def corpora_and_pool(cfg, seed):
    corpora = build_pipeline_corpora(seed=1, sources=SOURCES)
    full = make_sequences(corpora, seq_words=cfg["seq_words"])
    data = full.subset(stratified_pool(full, cfg["pool"], cfg["source_share"], seed))
    return corpora, full, data


# ---------------------------------------------------------------------------- parts
def part_classify(cfg, seed, state, device: str = "cpu") -> list[Row]:
    """The classification part; the byte classifier and the fine-tuned MiniLM layers train
    on ``device`` (not a setting)."""
    corpora, full, data = corpora_and_pool(cfg, seed)
    names = list(corpora)
    K = len(names)
    rows: list[Row] = []
    for k, n in enumerate(names):
        docs = corpora[n]
        rows.append(Row(f"corpus {n}", "documents", float(len(docs)), "documents"))
        rows.append(
            Row(f"corpus {n}", "words", float(sum(len(t.split()) for _, t in docs)), "words")
        )
        rows.append(Row(f"corpus {n}", "sequences", float((full.labels == k).sum()), "sequences"))
        for s in SOURCES:
            m = [document_source(g) == s for g in data.groups]
            rows.append(
                Row(
                    f"pool {n}",
                    f"sequences from {s}",
                    float(np.sum((data.labels == k) & np.array(m))),
                    "sequences",
                )
            )
    print(f"pipelines {names}: {len(full)} sequences of {cfg['seq_words']} words; pool {len(data)}")

    feats = None
    if cfg["minilm"]:
        from sci_moe.data.minilm import embed_texts

        t0 = time.time()
        feats = embed_texts(list(data.texts), progress=False)
        dt = time.time() - t0
        rows.append(Row("minilm", "embed_seconds", dt, "s"))
        rows.append(Row("minilm", "embed_seconds_per_sequence", dt / len(data), "s"))
    finetune = None
    if cfg.get("minilm_finetune"):  # runs before the setting existed have none
        from sci_moe.data.minilm import load_encoder

        tokenizer, encoder = load_encoder()
        cache: dict = {}
        t0 = time.time()  # the frozen lower layers of the whole pool, once for all seeds
        _finetune_classifier(cfg, encoder, tokenizer, cache, 0).lower_states(list(data.texts))
        dt = time.time() - t0
        rows.append(Row("minilm_finetune", "lower_seconds", dt, "s"))
        rows.append(Row("minilm_finetune", "lower_seconds_per_sequence", dt / len(data), "s"))
        finetune = (encoder, tokenizer, cache)
    cases = ["bow", "bow_lower", "minilm_linear", "byte_lm", "minilm_finetune"]
    cases += ["bow_noformat", "bow_vocab1000"]
    preds = {c: [] for c in cases}
    preds["bow_c4_dedup"] = []
    confusion = np.zeros((K, K), dtype=np.int64)
    pair = [names.index("c4"), names.index("dedup")]
    byte_lm = {**ByteClassifierConfig().lm, "seq_len": cfg["byte_seq"]}
    curves = state.setdefault("curves", {}).setdefault("byte_lm", {})
    converged = []
    ft_curves = state["curves"].setdefault("minilm_finetune", {}) if finetune else {}
    ft_converged = []
    for s, tr, te in splits(data, cfg["seeds"], seed):
        t0 = time.time()
        xtr, ytr = [data.texts[i] for i in tr], data.labels[tr]
        xte, yte = [data.texts[i] for i in te], data.labels[te]
        gte = np.array([data.groups[i] for i in te])
        bow = _bow().fit(xtr, ytr, names)
        yp = bow.predict(xte)
        preds["bow"].append((yte, yp, gte))
        confusion += confusion_matrix(yte, yp, K)
        preds["bow_lower"].append((yte, _bow(False).fit(xtr, ytr).predict(xte), gte))
        m_tr, m_te = np.isin(ytr, pair), np.isin(yte, pair)
        b2 = _bow().fit(
            [x for x, m in zip(xtr, m_tr, strict=True) if m], (ytr[m_tr] == pair[1]).astype(int)
        )
        preds["bow_c4_dedup"].append(
            (
                (yte[m_te] == pair[1]).astype(int),
                b2.predict([x for x, m in zip(xte, m_te, strict=True) if m]),
                gte[m_te],
            )
        )
        nf = _bow().fit([remove_formatting(x) for x in xtr], ytr)
        preds["bow_noformat"].append((yte, nf.predict([remove_formatting(x) for x in xte]), gte))
        vocab = top_words(xtr, 1000)
        rv = _bow().fit([restrict_vocabulary(x, vocab) for x in xtr], ytr)
        preds["bow_vocab1000"].append(
            (yte, rv.predict([restrict_vocabulary(x, vocab) for x in xte]), gte)
        )
        if feats is not None:
            from sklearn.linear_model import LogisticRegression

            lr = LogisticRegression(C=10.0, max_iter=2000).fit(feats[tr], ytr)
            preds["minilm_linear"].append((yte, lr.predict(feats[te]), gte))
        # byte-level model: validation documents held out of the training side
        sub = data.subset(tr)
        fit_i, val_i = document_split(sub, 0.15, seed=seed + 100 + s)
        bc, curves[str(s)], cycles, conv = fit_byte_classifier(
            ByteTransformerClassifier(
                ByteClassifierConfig(lm=byte_lm, steps=cfg["byte_steps"], seed=s),
                progress=False,
                device=device,
            ),
            [sub.texts[i] for i in fit_i],
            sub.labels[fit_i],
            names,
            ([sub.texts[i] for i in val_i], sub.labels[val_i]),
            cfg["byte_eval"],
            cfg["byte_cycles"],
            cfg["min_cycles"],
        )
        preds["byte_lm"].append((yte, bc.predict(xte), gte))
        converged.append(conv)
        rows += [
            Row(f"{K}-way byte_lm", f"converged seed {s}", float(conv), "bool"),
            Row(f"{K}-way byte_lm", f"cycles seed {s}", float(cycles), "cycles"),
            Row(f"{K}-way byte_lm", f"steps seed {s}", float(curves[str(s)][-1][0]), "steps"),
        ]
        print(
            f"seed {s}: {len(tr)} train / {len(te)} test sequences, {time.time() - t0:.0f} s; "
            f"byte_lm {cycles} cycle(s), flat {conv}, val curve "
            f"{[round(b, 3) for _, b in curves[str(s)]]}",
            flush=True,
        )
        if finetune is not None:  # the same fit / validation documents as byte_lm
            t1 = time.time()
            ft, ft_curves[str(s)], ft_cycles, ft_conv = fit_byte_classifier(
                _finetune_classifier(cfg, *finetune, seed=s, device=device),
                [sub.texts[i] for i in fit_i],
                sub.labels[fit_i],
                names,
                ([sub.texts[i] for i in val_i], sub.labels[val_i]),
                cfg["minilm_finetune_eval"],
                cfg["minilm_finetune_cycles"],
                min(cfg["min_cycles"], cfg["minilm_finetune_cycles"]),
            )
            dt = time.time() - t1
            passes = ft_cycles * cfg["minilm_finetune_steps"] * cfg["minilm_finetune_batch"]
            preds["minilm_finetune"].append((yte, ft.predict(xte), gte))
            ft_converged.append(ft_conv)
            case = f"{K}-way minilm_finetune"
            rows += [
                Row(case, f"converged seed {s}", float(ft_conv), "bool"),
                Row(case, f"cycles seed {s}", float(ft_cycles), "cycles"),
                Row(case, f"steps seed {s}", float(ft_curves[str(s)][-1][0]), "steps"),
                Row(case, f"train_seconds seed {s}", dt, "s"),
                # training wall time (validation included) per sequence forward + backward
                Row(case, f"train_seconds_per_sequence seed {s}", dt / passes, "s"),
            ]
            print(
                f"seed {s}: minilm_finetune {ft_cycles} cycle(s), flat {ft_conv}, {dt:.0f} s, "
                f"val curve {[round(b, 3) for _, b in ft_curves[str(s)]]}",
                flush=True,
            )
    for case in ("bow", "bow_lower", "minilm_linear", "byte_lm", "minilm_finetune"):
        if preds[case]:
            rows += acc_rows(f"{K}-way {case}", preds[case], 1 / K)
    rows.append(Row(f"{K}-way byte_lm", "converged_seeds", float(sum(converged)), "seeds"))
    if finetune is not None:
        case = f"{K}-way minilm_finetune"
        rows.append(Row(case, "converged_seeds", float(sum(ft_converged)), "seeds"))
    rows += acc_rows("2-way bow c4 vs dedup", preds["bow_c4_dedup"], 1 / 2)
    rows += acc_rows(f"{K}-way bow formatting removed", preds["bow_noformat"], 1 / K)
    rows += acc_rows(f"{K}-way bow vocabulary 1000", preds["bow_vocab1000"], 1 / K)
    conf_rate = confusion / confusion.sum(1, keepdims=True)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            rows.append(Row(f"confusion bow {a}->{b}", "rate", float(conf_rate[i, j]), "fraction"))
    state["names"] = names
    return rows


def part_null(cfg, seed, state) -> list[Row]:
    null = null_control_corpora("dedup", seeds=(1, 2), partition_seed=seed, sources=SOURCES)
    nd = make_sequences(null, seq_words=cfg["seq_words"])
    nd = nd.subset(stratified_pool(nd, cfg["pool"], cfg["source_share"], seed))
    npred, leak = [], []
    for s, tr, te in splits(nd, cfg["seeds"], seed):
        clf = _bow().fit([nd.texts[i] for i in tr], nd.labels[tr])
        gte = np.array([nd.groups[i] for i in te])
        npred.append((nd.labels[te], clf.predict([nd.texts[i] for i in te]), gte))
        perm = np.random.default_rng(seed + s).permutation(len(nd))
        cut = int(0.75 * len(nd))
        ltr, lte = perm[:cut], perm[cut:]
        clf = _bow().fit([nd.texts[i] for i in ltr], nd.labels[ltr])
        gl = np.array([nd.groups[i] for i in lte])
        leak.append((nd.labels[lte], clf.predict([nd.texts[i] for i in lte]), gl))
    rows = [Row("null control", "sequences", float(len(nd)), "sequences")]
    rows += acc_rows("null control bow (document split)", npred, 0.5)
    rows += acc_rows("null control bow (sequence split)", leak, 0.5, "(leaky, for contrast)")
    return rows
