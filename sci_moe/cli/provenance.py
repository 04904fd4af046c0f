"""``sci-moe provenance``: train and apply dataset-fingerprint (provenance) classifiers.

Examples
--------
.. code-block:: console

    $ sci-moe provenance build-wiki --out wiki_corpora      # 4 pipelines over 3 sources
    $ sci-moe provenance train wiki_corpora/c4.jsonl wiki_corpora/gopher.jsonl \\
          wiki_corpora/norm.jsonl --model bow --out fp_model
    $ sci-moe provenance predict fp_model some_texts/ --json predictions.json

``train`` reads one corpus per label (a ``.txt`` file = one document, a ``.jsonl`` file = one
``{"text": ...}`` document per line, or a directory of them), cuts sequences of
``--seq-words`` words, splits **by document**, trains, reports the balanced test accuracy with
its 95 % Wilson interval and writes the classifier plus ``metrics.json`` to ``--out``.
``predict`` classifies every document of the inputs (probabilities averaged over its
sequences; a document shorter than one sequence is classified whole).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ._threads import add_threads_argument, torch_threads

__all__ = ["add_parser"]

_MODELS = ("bow", "minilm", "byte")
#: torch threads unless ``--threads``: the classifiers are small (measured: embedding 256
#: sequences with MiniLM was no faster on 2 threads than on 1 on a shared 2-core machine).
THREADS = 1


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``provenance`` subcommand to the subparsers ``sub`` of the ``sci-moe`` parser."""
    p = sub.add_parser("provenance", help="which corpus did a text come from? (fingerprints)")
    psub = p.add_subparsers(dest="provenance_command", required=True)
    tr = psub.add_parser("train", help="train a K-way provenance classifier on K corpora")
    tr.add_argument("corpora", nargs="+", help="one file or folder per corpus (label)")
    tr.add_argument("--names", nargs="+", help="label names (default: file/folder names)")
    tr.add_argument(
        "--model",
        choices=_MODELS,
        default="bow",
        help="bow (default), minilm (frozen MiniLM + MoE head), byte (byte LM)",
    )
    tr.add_argument("--out", required=True, help="output folder for the classifier")
    tr.add_argument("--seq-words", type=int, default=128, help="words per sequence (128)")
    tr.add_argument("--test-fraction", type=float, default=0.2, help="test documents (0.2)")
    tr.add_argument("--steps", type=int, default=None, help="training steps (minilm, byte)")
    tr.add_argument(
        "--lowercase",
        action="store_true",
        help="bow: lower-case the words (default: keep case, as the benchmark)",
    )
    tr.add_argument("--seed", type=int, default=0, help="split and training seed (0)")
    tr.add_argument(
        "--errors",
        choices=("strict", "replace"),
        default="strict",
        help="what to do with bytes that are not UTF-8 (default: error)",
    )
    add_threads_argument(tr, THREADS, "the classifiers are small")
    tr.set_defaults(func=_threaded(_train))
    pr = psub.add_parser("predict", help="classify documents with a trained classifier")
    pr.add_argument("model_dir", help="folder written by 'sci-moe provenance train'")
    pr.add_argument("inputs", nargs="+", help="files or folders of documents to classify")
    pr.add_argument("--json", metavar="PATH", help="also write the predictions as JSON")
    pr.add_argument("--errors", choices=("strict", "replace"), default="strict")
    add_threads_argument(pr, THREADS, "the classifiers are small")
    pr.set_defaults(func=_threaded(_predict))
    wk = psub.add_parser("build-wiki", help="write the offline pipeline corpora as .jsonl")
    wk.add_argument("--out", required=True, help="output folder")
    wk.add_argument("--seed", type=int, default=1, help="pipeline seed (MinHash; default 1)")
    wk.add_argument(
        "--sources",
        nargs="+",
        choices=("wiki", "newsgroups", "news"),
        default=["wiki", "newsgroups", "news"],
        help="source corpora shipped in gensim's wheel (default: all three, as the benchmark)",
    )
    wk.add_argument(
        "--null-control",
        action="store_true",
        help="also write c4#1/c4#2: one pipeline, two seeds, disjoint articles",
    )
    wk.set_defaults(func=_build_wiki)
    return p


def _threaded(command):
    """``command`` run on ``--threads`` torch threads."""

    def run(args: argparse.Namespace) -> int:
        with torch_threads(args.threads, default=THREADS):
            return command(args)

    return run


def _embed():
    from ..data.minilm import embed_texts

    return lambda texts: embed_texts(texts, progress=False)


def _train(args: argparse.Namespace) -> int:
    from ..language import provenance as pv

    corpora = pv.read_corpora(args.corpora, args.names, errors=args.errors)
    data = pv.make_sequences(corpora, seq_words=args.seq_words)
    tr, te = pv.document_split(data, args.test_fraction, seed=args.seed)
    te = pv.balance(data, te, seed=args.seed)
    classes = list(data.classes)
    xtr, xte = [data.texts[i] for i in tr], [data.texts[i] for i in te]
    if args.model == "bow":
        clf = pv.BagOfWordsClassifier(pv.BoWConfig(lowercase=args.lowercase))
    elif args.model == "minilm":
        cfg = pv.EmbeddingHeadConfig(
            seed=args.seed, **({"steps": args.steps} if args.steps else {})
        )
        clf = pv.EmbeddingMoEClassifier(embed=_embed(), config=cfg)
    else:
        cfg = pv.ByteClassifierConfig(
            seed=args.seed, **({"steps": args.steps} if args.steps else {})
        )
        clf = pv.ByteTransformerClassifier(cfg)
    clf.fit(xtr, data.labels[tr], classes)
    yp = clf.predict(xte)
    acc, lo, hi = pv.accuracy_interval(data.labels[te], yp)
    conf = pv.confusion_matrix(data.labels[te], yp, len(classes))
    out = pv.save_classifier(clf, args.out)
    metrics = {
        "classes": classes,
        "model": args.model,
        "seq_words": args.seq_words,
        "train_sequences": int(tr.size),
        "test_sequences": int(te.size),
        "test_documents": len({data.groups[i] for i in te}),
        "accuracy": acc,
        "accuracy_ci95": [lo, hi],
        "chance": 1 / len(classes),
        "confusion": conf.tolist(),
        "seed": args.seed,
    }
    from .._util import atomic_save_json

    atomic_save_json(out / "metrics.json", metrics)
    print(
        f"{len(classes)}-way {args.model}: test accuracy {acc:.3f} (95% CI {lo:.3f}-{hi:.3f}, "
        f"chance {1 / len(classes):.3f}) on {te.size} sequences; saved to {out}"
    )
    return 0


def _predict(args: argparse.Namespace) -> int:
    from ..language import provenance as pv

    folder = Path(args.model_dir)
    meta_path = folder / "metrics.json"
    if not meta_path.is_file():
        raise ValueError(f"{folder} has no metrics.json: train it with 'sci-moe provenance train'")
    meta = json.loads(meta_path.read_text())
    clf = pv.load_classifier(folder, embed=_embed() if meta["model"] == "minilm" else None)
    n = int(meta["seq_words"])
    results = []
    for path in args.inputs:
        for doc_id, text in pv.read_corpus(path, errors=args.errors):
            toks = text.split()
            seqs = [" ".join(toks[i : i + n]) for i in range(0, max(len(toks) - n + 1, 1), n)]
            prob = clf.predict_proba(seqs).mean(axis=0)
            k = int(np.argmax(prob))
            results.append(
                {
                    "input": str(path),
                    "document": doc_id,
                    "prediction": clf.classes[k],
                    "probabilities": dict(zip(clf.classes, map(float, prob), strict=True)),
                }
            )
            print(f"{path}\t{doc_id}\t{clf.classes[k]}\t{prob[k]:.3f}")
    if args.json:
        from .._util import atomic_save_json

        atomic_save_json(args.json, {"classes": list(clf.classes), "predictions": results})
    return 0


def _build_wiki(args: argparse.Namespace) -> int:
    from .._util import atomic_write_text
    from ..data.wiki_pipelines import build_pipeline_corpora, null_control_corpora

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    corpora = build_pipeline_corpora(seed=args.seed, sources=args.sources)
    if args.null_control:
        corpora.update(null_control_corpora("c4", seeds=(1, 2), sources=args.sources))
    for name, docs in corpora.items():
        lines = "".join(json.dumps({"id": t, "text": x}) + "\n" for t, x in docs)
        atomic_write_text(out / f"{name}.jsonl", lines)
        print(f"{out / (name + '.jsonl')}: {len(docs)} documents")
    return 0
