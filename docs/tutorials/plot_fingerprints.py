"""
Dataset fingerprints: which pipeline processed a text?
======================================================

Mansour & Heckel ("Measuring Fingerprints of Web-filtered Text Datasets and Fingerprint
Propagation Through Training", NeurIPS 2025 D&B, arXiv 2412.02857) show that a simple
classifier can tell from a single short sequence which web-filtered corpus (C4, FineWeb,
RefinedWeb, ...) it was drawn from: every pipeline leaves a *fingerprint* in formatting,
filtering and vocabulary, and that fingerprint survives into the text of language models
trained on the corpus.

Real web corpora differ in their sources as well as in their processing, so a high accuracy
on them does not say *which* of the two the classifier reads. This tutorial uses the
package's controlled setup, where only the processing differs, and runs on a CPU offline:

1. push the same source documents through four pipelines
   (:mod:`sci_moe.data.wiki_pipelines`);
2. cut the outputs into fixed-length sequences and split them **by document**
   (:mod:`sci_moe.language.provenance`);
3. train the bag-of-words classifier and compare its accuracy with chance; look at its
   confusions and at what it reads;
4. run the null control: one pipeline twice with two seeds, where the only right answer
   is chance -- and see a split by sequence score above it anyway.

It is small (the benchmark's pool of 1000 sequences per pipeline, one split, a
bag-of-words classifier) so that it runs in seconds; the full study (five seeds, a
pretrained encoder and a byte-level transformer as
classifiers, propagation through language-model training) is on
:doc:`/results/fingerprints`.
"""

# %%
# Four pipelines over the same documents
# --------------------------------------
# The sources ship inside gensim's wheel: ``wiki`` (Wikipedia articles in MediaWiki
# markup), ``newsgroups`` (raw Usenet posts with headers, quotes and signatures) and
# ``news`` (news paragraphs). :func:`~sci_moe.data.wiki_pipelines.build_pipeline_corpora`
# runs every pipeline of :data:`~sci_moe.data.wiki_pipelines.PIPELINES` over all of them:
#
# * ``c4``: markup stripped to plain text, C4's line and page rules, a strict page-level
#   language-ID threshold;
# * ``gopher``: markup turned into Markdown-like text, Gopher's quality rules;
# * ``norm``: line-keeping stripper, Unicode and white-space normalisation, a lenient
#   line-level language-ID threshold, short documents dropped;
# * ``dedup``: ``c4`` plus MinHash-LSH removal of near-duplicate lines -- the smallest
#   difference of the four.
#
# Each output document keeps its source title, which is the key of the split below.

import matplotlib.pyplot as plt
import numpy as np

from sci_moe.data.wiki_pipelines import (
    SOURCES,
    build_pipeline_corpora,
    document_source,
    null_control_corpora,
    stratified_pool,
)
from sci_moe.language.provenance import (
    BagOfWordsClassifier,
    BoWConfig,
    accuracy_interval,
    balance,
    confusion_matrix,
    document_split,
    make_sequences,
    remove_formatting,
)

corpora = build_pipeline_corpora(seed=1, sources=SOURCES)
names = list(corpora)
K = len(names)
for name, docs in corpora.items():
    n_words = sum(len(text.split()) for _, text in docs)
    print(f"{name:>6}: {len(docs)} documents, {n_words} words")

# %%
# The same passage, four ways
# ---------------------------
# One source document as each pipeline left it (its first few hundred characters). The
# words are mostly the same; line breaks, list and heading marks, kept or dropped lines
# are not.

common = set.intersection(*({t for t, _ in docs} for docs in corpora.values()))
title = sorted(t for t in common if document_source(t) == "wiki")[0]
for name, docs in corpora.items():
    text = dict(docs)[title]
    print(f"--- {name} ({title})\n{text[:240]!r}\n")

# %%
# Sequences, split by document
# ----------------------------
# :func:`~sci_moe.language.provenance.make_sequences` cuts every document into
# non-overlapping sequences of ``seq_words`` words (the exact slice, white space
# included). 1000 per pipeline are drawn at random, stratified by source as in the
# benchmark (:func:`~sci_moe.data.wiki_pipelines.stratified_pool`, ``share``): half from
# ``wiki`` and a quarter from each of ``newsgroups`` and ``news``. A uniform draw would
# follow each pipeline's own mix of sources (80-88 % ``wiki``; ``c4`` and ``dedup`` drop
# almost all of ``newsgroups``), so a classifier could score by telling sources apart;
# with the same shares in every pipeline it mostly cannot. A source a pipeline is short of
# is topped up from its other sources (``c4`` and ``dedup`` have fewer than 250
# ``newsgroups`` sequences), so the counts per source printed below are not exact.
#
# The split is **by document**: :func:`~sci_moe.language.provenance.document_split`
# shuffles the document titles and puts a quarter of them, with *every* sequence of
# *every* version of them, on the test side. Since the four corpora come from the same
# sources, a split by sequence would put one pipeline's version of an article in training
# and another's in the test set, and the sequences of one document share topic, names and
# rare words: a classifier could then score by recognising documents instead of
# processing. After the split each side is balanced again, so chance is exactly 1/K.

seq_words, per_class, share = 64, 1000, [0.5, 0.25, 0.25]  # share: wiki, newsgroups, news
full = make_sequences(corpora, seq_words=seq_words)
data = full.subset(stratified_pool(full, per_class, share, seed=0))
train, test = document_split(data, 0.25, seed=0)
train, test = balance(data, train, seed=0), balance(data, test, seed=0)
overlap = {data.groups[i] for i in train} & {data.groups[i] for i in test}
print(f"{len(full)} sequences of {seq_words} words; drawn {len(data)}")
drawn = [document_source(g) for g in data.groups]
print("drawn per source:", {s: drawn.count(s) for s in SOURCES})
print(f"train {len(train)}, test {len(test)} sequences; documents on both sides: {len(overlap)}")


def texts(d, index):
    return [d.texts[i] for i in index]


# %%
# A bag-of-words classifier
# -------------------------
# :class:`~sci_moe.language.provenance.BagOfWordsClassifier` is the paper's baseline: word,
# punctuation and line-break uni- and bigrams, sublinear tf-idf, multinomial logistic
# regression. Case is kept (``lowercase=False``): capitalisation habits are part of a
# fingerprint. The accuracy's 95 % interval comes from a bootstrap over test *documents*
# (:func:`~sci_moe.language.provenance.accuracy_interval` with ``groups``), since the
# sequences of one document are not independent.

clf = BagOfWordsClassifier(BoWConfig(lowercase=False))
clf.fit(texts(data, train), data.labels[train], classes=names)
y_true, y_pred = data.labels[test], clf.predict(texts(data, test))
test_docs = [data.groups[i] for i in test]
acc, lo, hi = accuracy_interval(y_true, y_pred, groups=test_docs)
print(f"{K}-way accuracy {acc:.3f} [{lo:.3f}, {hi:.3f}], chance {1 / K:.3f}, ratio {acc * K:.2f}")

# %%
# Which pipelines does it confuse?
# --------------------------------
# Rows are the true pipeline, columns the predicted one, each row normalised. ``dedup``
# is ``c4`` with some duplicated lines removed, so most of its sequences are exactly
# ``c4`` sequences: that pair is where the errors should concentrate.

conf = confusion_matrix(y_true, y_pred, K)
rate = conf / conf.sum(axis=1, keepdims=True)
fig, ax = plt.subplots(figsize=(4.2, 3.6))
im = ax.imshow(rate, vmin=0, vmax=1, cmap="Blues")
for i in range(K):
    for j in range(K):
        ax.text(
            j,
            i,
            f"{rate[i, j]:.2f}",
            ha="center",
            va="center",
            color="white" if rate[i, j] > 0.5 else "black",
        )
ax.set_xticks(range(K), names)
ax.set_yticks(range(K), names)
ax.set_xlabel("predicted pipeline")
ax.set_ylabel("true pipeline")
ax.set_title(f"bag of words, accuracy {acc:.2f} (chance {1 / K:.2f})")
fig.colorbar(im, ax=ax, fraction=0.046)
fig.tight_layout()

# %%
# What it reads
# -------------
# The n-grams with the largest weight for each class (``"\n"`` is a line break). Layout
# marks (Markdown ``*`` and ``#``, line breaks) are processing; content words are topics
# of the training documents, which the split by document keeps from paying off. Then the
# ablation of the paper: re-train and test on the same sequences with the formatting
# removed (:func:`~sci_moe.language.provenance.remove_formatting`: one line, single
# spaces, no list or heading marks). What accuracy is left comes from the words the
# pipelines keep or drop.

for k, name in enumerate(names):
    top = np.argsort(clf.coef[k])[::-1][:6]
    print(f"{name:>6}:", ", ".join(repr(clf.vocabulary[j]) for j in top))

plain = data.map(remove_formatting)
clf_plain = BagOfWordsClassifier(BoWConfig(lowercase=False))
clf_plain.fit(texts(plain, train), plain.labels[train], classes=names)
acc_plain, lo_p, hi_p = accuracy_interval(
    y_true, clf_plain.predict(texts(plain, test)), groups=test_docs
)
print(f"formatting removed: accuracy {acc_plain:.3f} [{lo_p:.3f}, {hi_p:.3f}], chance {1 / K:.3f}")

# %%
# The null control
# ----------------
# A classifier that scores above chance might still be reading something other than the
# processing. :func:`~sci_moe.data.wiki_pipelines.null_control_corpora` runs *one*
# pipeline (``dedup``, whose MinHash seed matters) twice, with two seeds, on disjoint
# random halves of the source documents. The two classes differ by nothing but their
# documents, so on a split by document the right accuracy is chance, 1/2.
#
# The same data split by *sequence* (a random quarter of the sequences for test) puts
# sequences of every document on both sides; the classifier then learns which documents
# fell in which half and scores above chance on a difference that does not exist.

null = null_control_corpora("dedup", seeds=(1, 2), partition_seed=0, sources=SOURCES)
nd = make_sequences(null, seq_words=seq_words)
nd = nd.subset(stratified_pool(nd, per_class, share, seed=0))
ntr, nte = document_split(nd, 0.25, seed=0)
ntr, nte = balance(nd, ntr, seed=0), balance(nd, nte, seed=0)
by_doc = BagOfWordsClassifier(BoWConfig(lowercase=False))
by_doc.fit(texts(nd, ntr), nd.labels[ntr], classes=nd.classes)
a_doc = accuracy_interval(
    nd.labels[nte], by_doc.predict(texts(nd, nte)), groups=[nd.groups[i] for i in nte]
)

perm = np.random.default_rng(0).permutation(len(nd))
seq_tr, seq_te = np.sort(perm[: 3 * len(nd) // 4]), np.sort(perm[3 * len(nd) // 4 :])
by_seq = BagOfWordsClassifier(BoWConfig(lowercase=False))
by_seq.fit(texts(nd, seq_tr), nd.labels[seq_tr], classes=nd.classes)
a_seq = accuracy_interval(
    nd.labels[seq_te], by_seq.predict(texts(nd, seq_te)), groups=[nd.groups[i] for i in seq_te]
)
null_chance = 1 / len(nd.classes)
for label, (a, lo_, hi_) in (("split by document", a_doc), ("split by sequence", a_seq)):
    print(
        f"null control, {label}: accuracy {a:.3f} [{lo_:.3f}, {hi_:.3f}], chance {null_chance:.3f}"
    )

fig, ax = plt.subplots(figsize=(5.6, 3.0))
rows = [
    ("4 pipelines", acc, lo, hi, 1 / K),
    ("4 pipelines,\nno formatting", acc_plain, lo_p, hi_p, 1 / K),
    ("null, by document", *a_doc, null_chance),
    ("null, by sequence", *a_seq, null_chance),
]
for y, (_, a, l_, h_, chance) in enumerate(rows):
    ax.errorbar(a, y, xerr=[[a - l_], [h_ - a]], fmt="o", color="C0", capsize=3)
    ax.plot([chance, chance], [y - 0.35, y + 0.35], color="C3")
ax.set_yticks(range(len(rows)), [r[0] for r in rows])
ax.invert_yaxis()
ax.set_xlim(0, 1)
ax.set_xlabel("test accuracy, 95 % interval over documents")
ax.set_title("red: chance", fontsize=9, loc="right")
fig.tight_layout()

# %%
# Next: propagation and the full run
# ----------------------------------
# The paper's second claim is that fingerprints *propagate*: a language model trained on
# one corpus writes text that the classifier assigns to that corpus, and the mixture of
# a model's training data can be read back from its generations
# (:func:`~sci_moe.language.provenance.train_lm_on_texts`,
# :func:`~sci_moe.language.provenance.generate`,
# :func:`~sci_moe.language.provenance.estimate_mixture`). A language model that writes
# words takes minutes to train on a CPU, too long for this page; the benchmark trains
# them until their validation loss is flat, with five seeds, alongside the classifiers
# above and the pretrained and byte-level ones::
#
#     nice env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fingerprints/run.py --quick
#     nice env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fingerprints/run.py \
#         --threads 1 --json benchmarks/fingerprints/results/fingerprints_v3.json \
#         --plots docs/results/img --max-hours 1     # then --resume until done
#
# Its stored results and verdicts are on :doc:`/results/fingerprints`; the API is
# :mod:`sci_moe.language.provenance` and :mod:`sci_moe.data.wiki_pipelines`.
