"""Dataset fingerprints on a controlled setup: which pipeline processed a text?

Mansour & Heckel (NeurIPS 2025 D&B, arXiv 2412.02857) classify single sequences by the
web-filtered corpus they come from. Here the ground truth is known: the documents of three
source corpora that ship inside gensim's wheel (``wiki``: 106 Wikipedia articles in
MediaWiki markup; ``newsgroups``: 200 raw Usenet posts with headers, quotes and
signatures; ``news``: 300 news articles) go through K = 4 pipelines
(:mod:`sci_moe.data.wiki_pipelines`: ``c4``, ``gopher``, ``norm``, ``dedup``) that differ
as the paper's do -- markup stripping / formatting, line and page filters, MinHash
deduplication, language-ID thresholds (page-level strict in ``c4``, line-level lenient in
``norm``) -- so only the processing differs. Sequences of ``seq_words`` words, a pool of
``pool`` per class stratified over the sources (``source_share``), **split by document**
(every version of a document on one side), classes balanced (chance = 1/K).

Parts (``seeds`` split/training seeds; every accuracy is stored per seed, pooled over the
seeds with a 95 % interval from a bootstrap over test *documents*, and tested against chance
with a paired t-test over the seeds):

1. ``classify``: K-way accuracy of the bag-of-words logistic regression without
   lower-casing (``bow``; lower-cased: ``bow_lower``), the frozen all-MiniLM-L6-v2 encoder
   with a linear (logistic-regression) head (``minilm_linear``), the same encoder with its
   **top** ``minilm_finetune_layers`` **layers fine-tuned, the lower layers frozen**, and a
   linear head on the mean-pooled states (``minilm_finetune``,
   :class:`~sci_moe.language.provenance.EncoderFinetuneClassifier`: the frozen layers'
   states of the pool are computed once and cached, so a training step runs only the top
   layers forward and backward -- full fine-tuning of all six layers does not fit the
   one-thread budget; rows ``minilm_finetune | lower_seconds_per_sequence`` and
   ``train_seconds_per_sequence``; cycles of ``minilm_finetune_steps`` steps of
   ``minilm_finetune_batch`` sequences, at most ``minilm_finetune_cycles``, validation
   accuracy every ``minilm_finetune_eval`` steps; from ``fingerprints_v3.json`` on) and the
   byte-level MoE transformer fine-tuned as a classifier
   (``byte_lm``, validation accuracy every ``byte_eval`` steps on held-out training
   documents, trained until flat: see Convergence); both fine-tuned classifiers validate on
   the same held-out training documents; ablations of the bag-of-words model
   re-trained on transformed text (formatting removed; vocabulary restricted to the 1000
   most frequent training words);
   the smallest processing difference alone (``c4`` vs ``dedup``, 2-way);
2. ``null``: the null control -- the ``dedup`` pipeline (whose MinHash seed matters) run
   with two seeds on disjoint random halves of the documents, document-level split (must be
   at chance), and a sequence-level split for contrast;
3. ``propagation seed s``: MoE LMs on word-piece tokens
   (:class:`~sci_moe.language.provenance.PieceTokenizer`, ``vocab`` tokens; a byte-level LM
   of the same cost still wrote letter soup after 1500 steps) trained on ``c4``, ``gopher``,
   ``norm`` and on a known mixture (0.5, 0.3, 0.2 of the bytes) until flat (see
   Convergence), the validation perplexity every ``lm_eval`` steps; samples and the share
   of generated words found in the training vocabulary (``word_rate``, vs real text's) show
   whether they write words; a bag-of-words classifier trained on real windows of
   ``gen_tokens`` tokens classifies ``gen`` generations of that length per LM;
   mixture estimated by classify-and-count and adjusted count; cross-pipeline perplexity
   (each single LM on every pipeline's validation text) for the generalisation claim.
   Validation text (``prop_split``): ``"document"`` holds out the last tenth of one shuffled
   order of the source documents in every pipeline
   (:func:`_fp_propagation.document_split`), so no source document is in one LM's training
   text and another pipeline's validation text; the runs before the setting existed
   (``fingerprints.json``, ``fingerprints_v2.json``) cut each token stream at 90 %, where
   such documents leak, and their cross-dataset verdict is "not decided" for that reason.

Convergence (``_cycles.FLAT_RULE``, stated in the JSON's ``machine.flat_rule``): the byte
classifier trains in cycles of ``byte_steps`` steps (at most ``byte_cycles``), the
fine-tuned MiniLM in cycles of ``minilm_finetune_steps`` (at most
``minilm_finetune_cycles``; judged from cycle ``min(min_cycles, minilm_finetune_cycles)``
on), each LM in
cycles of ``lm_steps`` (at most ``lm_cycles``); a cycle is a fresh warm-up + cosine schedule
from the previous cycle's weights, and training stops after the first cycle, from cycle
``min_cycles`` on (:data:`MIN_CYCLES` = 2 in the full and the ``--quick`` plan, or the
smaller cap where ``--byte-cycles`` / ``--lm-cycles`` lower one below it; ``--min-cycles``
sets it), whose concatenated validation curve is flat: the best value of its last 20 % of
the steps less than 1 % better (relative) than the best before
(:func:`sci_moe.train.is_flat`, at least five evaluations) -- the byte classifier's
validation accuracy (and the fine-tuned MiniLM's), the LMs' validation loss (ln of the
stored perplexity).
``min_cycles`` exists because the end of one annealed warm-up + cosine schedule always
looks flat (the learning rate decays to its floor) however much a restart would still
gain: ``fingerprints_v2.json``, judged from the first cycle, stopped its byte classifier
after exactly one cycle on all 5 seeds while its LMs ran 4-5 (on the Routing Mamba
benchmark every LM given a second cycle ended it 3-5 % lower); runs before
``fingerprints_v3.json`` lack the setting (judged from cycle 1), so a ``--resume`` of
theirs is refused. Rows per model and seed: ``converged seed s`` (flat),
``cycles seed s`` and ``steps seed s``; a model at its cap unflat has ``converged`` 0, and
a verdict is decisive only when the models it compares are flat (logistic regressions are
convex fits). Until the review of issue 43 the rule was point to point, then one run of
``lm_steps`` = 1200 / ``byte_steps`` = 800 steps judged on the perplexity (the stored
``fingerprints.json``: 0 of 12 LMs and 2 of 3 byte classifiers flat, the same on the loss;
``--rejudge PATH`` judges a stored JSON's ``curves`` again by the current rule).
Rows: ``ratio`` = accuracy / chance. The JSON's ``verdicts`` come from :func:`verdicts`;
``curves`` holds the learning curves (cycles concatenated) and ``samples`` generations of
every LM.

Run: ``python benchmarks/fingerprints/run.py [--quick] [--json PATH] [--seed 0] [--plots DIR]
[--max-hours H] [--resume [--finish]] [--seeds N] [--byte-steps N] [--byte-cycles N]
[--lm-steps N] [--lm-cycles N] [--min-cycles N] [--no-minilm] [--no-minilm-finetune]
[--minilm-finetune-steps N] [--minilm-finetune-cycles N] [--device cuda]`` (pieces: the run stops
after the part during which ``H`` hours passed and writes ``PATH.state.json``; ``--resume``
continues from it); ``--verdicts-only PATH`` recomputes a stored JSON's verdicts from its
rows.
``--device`` is where the byte classifier, the fine-tuned MiniLM layers and the
propagation LMs train and sample (the bag-of-words and the MiniLM embedding and cached
lower layers stay on the CPU); it is recorded in the JSON's ``machine``
block and is not a setting, so a piece may resume on another device. The full run::

    flock /work/notes/longrun.lock nice -n 10 env OMP_NUM_THREADS=1 \
        .venv/bin/python benchmarks/fingerprints/run.py --threads 1 \
        --json benchmarks/fingerprints/results/fingerprints_v3.json --plots docs/results/img \
        --max-hours 1      # then the same with --resume until it writes the verdicts

Measured (``fingerprints_v2.json``, 5 cycles at most per LM, one thread beside other
jobs): 10,113 s in three pieces, of which about 1,700 s per propagation seed (LMs of
375-680 s each; 4 of the 20 LMs reached the 5-cycle cap unflat); the next run, with
document-aligned validation text, at most 8 LM cycles and at least 2 byte-classifier
cycles (about 110 s per seed each beyond v2's one), is estimated at 3-4 h; its
fine-tuned MiniLM (top 2 layers; measured on 32-480 pool sequences on one thread, beside
other jobs: 0.04-0.06 s per sequence for the cached lower four layers, once; 0.04-0.08 s
per sequence and step for the top two forward and backward, validation included) adds
about 200 s of caching and 250-750 s per seed (2-3 cycles of 200 steps of 16 sequences,
1.25 epochs of the about 2,550 fitting sequences each), about 0.4-1.1 h in all.

Time (one thread of the 2-core EPYC, from the 3-seed run of 1,263 s: MiniLM embedding
132 s, about 25 s of bag-of-words fits per seed, 0.135 s per byte-classifier step with its
evaluations, 0.045 s per LM step, about 30 s per propagation seed besides the LMs): the
5 paired seeds, with the byte classifiers flat after 1-2 cycles of 800 steps (2 of 3 were
flat after one) and the LMs after 3-4 cycles of 1200 steps (their loss still fell 1.1-2.0 %
over the last fifth of one cycle; a power law in the steps halves that per doubling or
faster, and they overfit from about 6 epochs of their ~0.8M tokens, 1200 steps being
1.6 epochs), take about 1,100 s to classify, 5 s for the null control and 800 s per
propagation seed: **about 5,000 s (1.4 h) in all**; at every cap (4 byte cycles, 5 LM
cycles) about 8,000 s (2.2 h). ``--max-hours 1`` ends the first piece after the
propagation seed that crosses the hour (about 4 of 5), the second finishes.

This script holds the command line, the plan and the pieces; its parts are helper modules
beside it: ``_cycles.py`` (training until flat), ``_fp_classify.py`` (corpora, pool and the
``classify`` and ``null`` parts), ``_fp_propagation.py`` (the ``propagation seed s``
parts), ``_fp_verdicts.py`` (verdicts, ``--rejudge``) and ``_fp_plots.py`` (plot).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
import numpy as np
from _cycles import FLAT_RULE
from _cycles import fit_byte_classifier as fit_byte_classifier
from _cycles import flat as flat
from _cycles import lm_flat as lm_flat
from _cycles import train_lm as train_lm
from _fp_classify import part_classify, part_null
from _fp_plots import plot
from _fp_propagation import document_split as document_split
from _fp_propagation import part_propagation
from _fp_propagation import word_rate as word_rate
from _fp_verdicts import cross_dataset_verdict as cross_dataset_verdict
from _fp_verdicts import lms_converged as lms_converged
from _fp_verdicts import match_effect as match_effect
from _fp_verdicts import rejudge, verdicts

from sci_moe.data.wiki_pipelines import document_source as document_source
from sci_moe.data.wiki_pipelines import stratified_pool as stratified_pool

Row = _common.Row


#: Cycles every until-flat fit trains before its curve is judged (the plan's
#: ``min_cycles``, at most the caps): the end of one annealed cycle always looks flat.
MIN_CYCLES = 2


def settings(quick: bool) -> dict:
    """The run's plan: data sizes, seeds, and the cycle sizes (``byte_steps``,
    ``lm_steps``, ``minilm_finetune_steps``), caps (``byte_cycles``, ``lm_cycles``,
    ``minilm_finetune_cycles``) and minimum (``min_cycles``: :data:`MIN_CYCLES`, at most
    the byte and LM caps; the fine-tuned MiniLM takes it up to its own cap) of the training
    until flat; the fine-tuned MiniLM's top layers (``minilm_finetune_layers``), token
    limit (MiniLM's 256), batch and learning rate."""
    common = dict(
        quick=quick,
        seq_words=64,
        source_share=[0.5, 0.25, 0.25],
        byte_seq=256,
        gen_tokens=64,
        prop_split="document",
        minilm_finetune_layers=2,
        minilm_finetune_max_length=256,
        minilm_finetune_batch=16,
        minilm_finetune_lr=1e-4,
    )
    if quick:
        plan = dict(
            common,
            seeds=3,
            pool=120,
            byte_steps=60,
            byte_cycles=2,
            byte_eval=20,
            lm_steps=60,
            lm_cycles=2,
            lm_eval=20,
            gen=16,
            vocab=1024,
            real_windows=100,
            minilm=True,
            minilm_finetune=True,
            minilm_finetune_steps=12,
            minilm_finetune_cycles=2,
            minilm_finetune_eval=4,
        )
    else:
        plan = dict(
            common,
            seeds=5,
            pool=1000,
            byte_steps=800,
            byte_cycles=4,
            byte_eval=50,
            lm_steps=1200,
            lm_cycles=8,
            lm_eval=100,
            gen=100,
            vocab=4096,
            real_windows=1000,
            minilm=True,
            minilm_finetune=True,
            minilm_finetune_steps=200,
            minilm_finetune_cycles=3,
            minilm_finetune_eval=40,
        )
    plan["min_cycles"] = min(MIN_CYCLES, plan["byte_cycles"], plan["lm_cycles"])
    return plan


def pooled_rows(rows: list[Row], seeds: int) -> list[Row]:
    """Means and seed spreads of the per-seed propagation rows (for the page)."""
    out = []
    by = {}
    for r in rows:
        m = re.fullmatch(r"(.+) seed (\d+)", r.metric)
        if m and not r.metric.startswith("accuracy seed"):
            by.setdefault((r.case, m.group(1), r.unit), []).append(r.value)
    for (case, metric, unit), v in by.items():
        if v and not any(x.case == case and x.metric == metric for x in rows):
            out.append(Row(case, metric, float(np.mean(v)), unit))
            out.append(Row(case, f"{metric}_seed_std", float(np.std(v)), unit))
    for case in ("propagation single-LM generations",):
        v = [r.value for r in rows if r.case == case and r.metric.startswith("accuracy seed")]
        if len(v) == seeds:
            out.append(
                Row(
                    case, "accuracy", float(np.mean(v)), "fraction", "chance", 3 * float(np.mean(v))
                )
            )
            out.append(Row(case, "accuracy_seed_std", float(np.std(v)), "fraction"))
    return out


def main() -> int:
    p = _common.base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    _common.piece_arguments(p, unit="part")
    p.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    p.add_argument(
        "--no-minilm", action="store_true", help="skip the frozen-MiniLM linear classifier"
    )
    p.add_argument(
        "--no-minilm-finetune",
        action="store_true",
        help="skip the MiniLM classifier with its top layers fine-tuned",
    )
    for flag, key, what in (
        ("--byte-steps", "byte_steps", "steps per training cycle of the byte classifier"),
        ("--byte-cycles", "byte_cycles", "most cycles of the byte classifier"),
        ("--lm-steps", "lm_steps", "steps per training cycle of each propagation LM"),
        ("--lm-cycles", "lm_cycles", "most cycles of each propagation LM"),
        (
            "--minilm-finetune-steps",
            "minilm_finetune_steps",
            "steps per training cycle of the fine-tuned MiniLM",
        ),
        (
            "--minilm-finetune-cycles",
            "minilm_finetune_cycles",
            "most cycles of the fine-tuned MiniLM",
        ),
        (
            "--min-cycles",
            "min_cycles",
            "cycles of every until-flat fit before its curve is judged, at most both caps",
        ),
        ("--seeds", "seeds", "paired split/training seeds"),
    ):
        p.add_argument(flag, type=int, default=None, dest=key, help=f"{what} (default: the plan's)")
    p.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        metavar="JSON",
        help="judge a stored JSON's curves flat or not again by the current rule (the "
        "convergence rows and the verdicts; no training)",
    )
    p.add_argument(
        "--finish",
        action="store_true",
        help="with --resume: write the final JSON from the parts done so far (verdicts "
        "on the seeds that ran)",
    )
    args = p.parse_args()
    if (code := _common.verdicts_only(args)) is not None:
        return code
    if args.rejudge is not None:
        doc = rejudge(json.loads(args.rejudge.read_text()))
        _common.write_json_doc(args.rejudge, doc)
        print(f"wrote {args.rejudge}")
        return 0
    _common.setup(args)
    cfg = settings(args.quick)
    if args.no_minilm:
        cfg["minilm"] = False
    if args.no_minilm_finetune:
        cfg["minilm_finetune"] = False
    for key in (
        "byte_steps",
        "byte_cycles",
        "lm_steps",
        "lm_cycles",
        "minilm_finetune_steps",
        "minilm_finetune_cycles",
        "min_cycles",
        "seeds",
    ):
        if (value := getattr(args, key)) is not None:
            if value < 1:
                raise SystemExit(f"--{key.replace('_', '-')} must be >= 1, got {value}")
            cfg[key] = value
    cap = min(cfg["byte_cycles"], cfg["lm_cycles"])
    if args.min_cycles is None:  # the plan's, kept within caps lowered on the command line
        cfg["min_cycles"] = min(MIN_CYCLES, cap)
    elif args.min_cycles > cap:
        raise SystemExit(
            f"--min-cycles {args.min_cycles} exceeds a cap of cycles (--byte-cycles "
            f"{cfg['byte_cycles']}, --lm-cycles {cfg['lm_cycles']}): lower --min-cycles or "
            "raise the caps"
        )
    state = _common.resume_state(args)
    if state:
        try:
            _common.check_resume_settings(state.get("settings"), cfg, _common.state_path(args.json))
        except ValueError as err:
            _common.refuse(str(err))
    state.setdefault("done", [])
    state.setdefault("rows", [])
    state["settings"] = cfg
    deadline = _common.piece_deadline(args)
    parts = ["classify", "null"] + [f"propagation seed {s}" for s in range(cfg["seeds"])]
    for part in parts:
        if part in state["done"] or args.finish:
            continue
        if time.perf_counter() > deadline:
            print(f"--max-hours {args.max_hours} reached; stopping before {part}")
            break
        t0 = time.time()
        print(f"== {part}", flush=True)
        if part == "classify":
            new = part_classify(cfg, args.seed, state, device=args.device)
        elif part == "null":
            new = part_null(cfg, args.seed, state)
        else:
            new = part_propagation(cfg, args.seed, int(part.split()[-1]), state, device=args.device)
        new.append(Row(f"part {part}", "wall_seconds", time.time() - t0, "s"))
        state["rows"] += [_common.row_dict(r) for r in new]
        state["done"].append(part)
        if args.json is not None:
            _common.write_json_doc(_common.state_path(args.json), state)
            write(args, cfg, state, final=False)
    done = all(p in state["done"] for p in parts)
    if args.finish and not done and not {"classify", "null"} <= set(state["done"]):
        raise SystemExit("--finish needs the classify and null parts done")
    if done or args.finish:
        rows = [_common.row_from_dict(r) for r in state["rows"]]
        rows += pooled_rows(rows, cfg["seeds"])
        wall = sum(r.value for r in rows if r.case.startswith("part ") and r.unit == "s")
        rows.append(Row("total", "wall_seconds", wall, "s"))
        state["final_rows"] = [_common.row_dict(r) for r in rows]
        doc = write(args, cfg, state, final=True)
        for v in doc["verdicts"]:
            print(f"{v['verdict']:>12}  p={v['p_value']}  {v['claim']}")
        if args.plots is not None:
            plot(doc, args.plots, args.quick)
    return 0


def write(args, cfg, state, final: bool) -> dict:
    """The results JSON: rows, verdicts (when every part is done), curves and samples."""
    machine = _common.machine_info(
        seed=args.seed, settings=cfg, flat_rule=FLAT_RULE, device=getattr(args, "device", "cpu")
    )
    doc = {
        "benchmark": "fingerprints",
        "machine": machine,
        "rows": state["final_rows"] if final else state["rows"],
        "parts_done": list(state["done"]),
        "names": state.get("names", []),
        "curves": state.get("curves", {}),
        "samples": state.get("samples", {}),
        "confusions": state.get("confusions", {}),
    }
    if final:
        doc["verdicts"] = [_common.verdict_entry(**v) for v in verdicts(doc)]
    if args.json is not None:
        _common.write_json_doc(args.json, doc)
        print(f"wrote {args.json}" + ("" if final else " (partial)"), flush=True)
    return doc


if __name__ == "__main__":
    sys.exit(main())
