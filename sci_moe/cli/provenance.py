"""``sci-moe provenance``: train and apply dataset-fingerprint (provenance) classifiers.

Examples
--------
.. code-block:: console

    $ sci-moe provenance build-wiki --out wiki_corpora      # 4 pipelines over 3 sources
    $ sci-moe provenance train wiki_corpora/c4.jsonl wiki_corpora/gopher.jsonl \\
          wiki_corpora/norm.jsonl --model bow --out fp_model
    $ sci-moe provenance predict fp_model some_texts/ --json predictions.json
    $ sci-moe provenance train wiki_corpora/c4.jsonl wiki_corpora/gopher.jsonl \\
          --model byte --until-flat --steps 3000 --eval-every 50 --out fp_byte

``train`` reads one corpus per label (a ``.txt`` file = one document, a ``.jsonl`` file = one
``{"text": ...}`` document per line, or a directory of them), cuts sequences of
``--seq-words`` words, splits **by document**, trains, reports the balanced test accuracy with
its 95 % Wilson interval and writes the classifier plus ``metrics.json`` to ``--out``.
``predict`` classifies every document of the inputs (probabilities averaged over its
sequences; a document shorter than one sequence is classified whole).

``--model byte --until-flat`` trains until the validation accuracy is flat instead of for a
fixed number of steps: ``--val-fraction`` of the training documents (0.15, as the benchmark)
are held out for validation, the accuracy on them is measured every ``--eval-every`` steps,
and the run stops at the first evaluation (at a step >= ``--flat-min-steps``) where the best
accuracy of the last 20 % of the steps is less than 1 % (relative) better than the best
before, over five evaluations at least (the engine's ``stop_when_flat`` rule,
:func:`sci_moe.train.is_flat`); ``--steps`` (default 300) is then the cap and still sets
the warm-up + cosine schedule. ``metrics.json`` records ``until_flat``: ``cycles`` (1: one
schedule; the benchmark's restarts in cycles from the previous weights are not offered
here), ``steps`` run, ``cap``, ``converged`` (false: the cap was reached unflat, train
again with a larger ``--steps``), ``eval_every``, the validation documents and sequences
and the validation ``curve`` ``[[step, accuracy], ...]``.
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
    tr.add_argument(
        "--until-flat",
        action="store_true",
        help="byte: train until the validation accuracy is flat (--steps is the cap)",
    )
    tr.add_argument(
        "--eval-every", type=int, default=25, help="--until-flat: steps between evaluations (25)"
    )
    tr.add_argument(
        "--flat-min-steps", type=int, default=0, help="--until-flat: no flat stop before (0)"
    )
    tr.add_argument(
        "--val-fraction",
        type=float,
        default=0.15,
        help="--until-flat: training documents held out for validation (0.15)",
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


#: The byte model's default step count (:class:`ByteClassifierConfig`), the cap of
#: ``--until-flat`` without ``--steps``.
_BYTE_STEPS = 300
#: Evaluations :func:`sci_moe.train.is_flat` needs before a curve can be flat.
_FLAT_POINTS = 5


def _check_until_flat(args: argparse.Namespace) -> None:
    """Refuse ``--until-flat`` settings that cannot work, saying what to do (ValueError)."""
    if not args.until_flat:
        return
    if args.model != "byte":
        raise ValueError(
            f"--until-flat trains the byte model only, not --model {args.model}: "
            "add --model byte or drop --until-flat"
        )
    if args.eval_every < 1:
        raise ValueError(f"--eval-every must be >= 1 with --until-flat, got {args.eval_every}")
    if args.flat_min_steps < 0:
        raise ValueError(f"--flat-min-steps must be >= 0, got {args.flat_min_steps}")
    if not 0.0 < args.val_fraction < 1.0:
        raise ValueError(f"--val-fraction must be in (0, 1), got {args.val_fraction}")
    cap = args.steps or _BYTE_STEPS
    if cap < 1:
        raise ValueError(f"--steps must be >= 1, got {cap}")
    if cap // args.eval_every < _FLAT_POINTS:
        raise ValueError(
            f"--until-flat needs at least {_FLAT_POINTS} evaluations to judge flatness, but "
            f"--steps {cap} / --eval-every {args.eval_every} gives {cap // args.eval_every}: "
            f"raise --steps or lower --eval-every to at most {max(cap // _FLAT_POINTS, 1)}"
        )
    if args.flat_min_steps > cap:
        raise ValueError(
            f"--flat-min-steps {args.flat_min_steps} is beyond the cap --steps {cap}: "
            "the run could never stop flat; lower it or raise --steps"
        )


def _train(args: argparse.Namespace) -> int:
    from ..language import provenance as pv

    _check_until_flat(args)
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
    flat = None
    if args.until_flat:
        sub = data.subset(tr)
        try:
            fit_i, val_i = pv.document_split(sub, args.val_fraction, seed=args.seed + 100)
        except ValueError as err:
            raise ValueError(
                f"--until-flat holds out --val-fraction {args.val_fraction} of the training "
                f"documents for validation, and that split fails: {err}. Raise --val-fraction "
                "(or lower --test-fraction) or give each corpus more documents"
            ) from err
        xval = [sub.texts[i] for i in val_i]
        clf.fit(
            [sub.texts[i] for i in fit_i],
            sub.labels[fit_i],
            classes,
            val=(xval, sub.labels[val_i]),
            eval_every=args.eval_every,
            stop_when_flat=0.01,
            flat_min_steps=args.flat_min_steps,
        )
        flat = {
            "cycles": 1,
            "steps": len(clf.losses),
            "cap": clf.config.steps,
            "converged": bool(clf.converged),
            "eval_every": args.eval_every,
            "flat_min_steps": args.flat_min_steps,
            "tolerance": 0.01,
            "val_documents": len({sub.groups[i] for i in val_i}),
            "val_sequences": int(val_i.size),
            "curve": [[int(st), float(a)] for st, a in clf.curve],
        }
        if not flat["converged"]:
            print(
                f"not flat after the cap of {flat['cap']} steps: train again with a larger "
                "--steps for a converged classifier"
            )
    else:
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
    if args.model == "byte":
        metrics["steps"] = len(clf.losses)
    if flat is not None:
        metrics["until_flat"] = flat
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
