"""Omni-Expert, the decisive run: PI, the 40-expert MoE and the OE each trained until flat.

The chain of ``run.py`` (espeak-ng speech, ShoeBox rooms at RT60 0.3/0.6/1.0 s, causal STFT,
IRM target, CI sine vocoder), with every model trained to convergence (issue 43, item 2):
the phoneme-independent model (PI), the 40-expert phoneme MoE (upcycled from PI) and the
Omni-Expert (OE, PI's expert plus 40 x 65 scale/shift tables), and the phoneme classifier,
each on the shared trainer until its validation loss is *flat*: less than 1 % better over
the last 20 % of the steps (:func:`sci_moe.train.is_flat`, checked every ``eval_every``
steps from ``flat_min_steps`` on), at most ``max_epochs`` epochs; ``converged`` is
recorded per model and run. Validation: ``n_val`` utterances of the training voices, kept
out of training. Test: ``n_test`` utterances of two other voices.

Measures per test utterance: STOI and ESTOI (Jensen & Taal 2016) of the 16-channel
CI-vocoded estimate against the vocoded direct path, for reverberant, PI, PI-continued,
MoE^p, MoE^k, OE^p, OE^k and the oracle IRM (``^p`` predicted, ``^k`` oracle phoneme
labels). Per RT60, 5 seeds (data, initialisation and order); the paired test is over the
seeds (per-seed means of the test utterances, paired t-test). MACs per frame and the
measured time per frame of each model side by side (medians over the units).

Verdicts (:func:`verdicts`), per RT60 and metric (STOI, ESTOI):

* OE improves on PI: OE^p vs PI, paired t-test, reproduced if OE is better with p < 0.05;
  and the strongest control, OE^p vs "PI-continued": PI trained on from its flat point
  with the OE's own training (the OE without scale and shift tables) until flat again, so
  any gain of the OE is not the extra training;
* OE is level with the MoE at a fraction of its cost: OE^p vs MoE^p; contradicted when OE
  is worse with p < 0.05, reproduced when the one-sided paired t-test puts the difference
  above ``-LEVEL_MARGIN`` (0.01) with p < 0.05 (equivalence, TOST), not decided otherwise;
  the MAC ratio is in the why;
* oracle labels beat predicted ones: OE^k vs OE^p.

PI-continued starts from PI's best weights, so its curve is plotted from step 0 of its own
training (the x axis is each model's own steps).

Decisive only when every model behind the verdict converged in every seed and p < 0.05.

Written in pieces (``--max-hours``, ``--resume``): one unit is one (RT60, seed); the JSON
holds every finished unit under ``runs`` and is rewritten after each. Measured on the
2-core CPU beside other jobs (load average 3, 1 thread): one unit (RT60 0.3 s, seed 0)
took 121 s wall (87 s CPU): 90 s training (51,901 training and 5,882 validation frames;
all five models flat at the first check, step 3000, MoE and OE best at steps 900-1100 and
overfitting after), the rest data, scoring 12 test utterances and timing. 15 units (5 seeds
x 3 RT60s) are about 30 min: one piece of ``--max-hours 0.5`` (a piece starts no unit
after 30 min), a second one if the machine is busier. ``--device cuda`` trains and scores
the models on a GPU (and times their forwards there); it is recorded in ``machine`` and is
not a setting, so a piece may resume on another device (the stored results are the CPU's).

    nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/omni_expert/full.py \\
        --threads 1 --max-hours 0.5 --resume --plots docs/results/img \\
        --json benchmarks/omni_expert/results/omni_expert_full.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
from _common import (
    OtherLoad,
    Row,
    base_parser,
    check_resume_settings,
    decide_verdict,
    machine_info,
    piece_arguments,
    piece_deadline,
    previous_run,
    print_table,
    refuse,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json_doc,
)
from _omni import masks, time_forward
from scipy import stats

from sci_moe.data.speech import ReverbSpeechConfig, build_reverberant_speech
from sci_moe.speech.omni import (
    FeatureNormalizer,
    FrameSet,
    MaskNetConfig,
    TrainConfig,
    apply_mask,
    converged,
    frame_tensors,
    model_costs,
    train_classifier,
    train_moe,
    train_oe,
    train_pi,
    utterance_frames,
    vocoded_stoi,
)

BENCHMARK = "omni_expert_full"
SYSTEMS = ["reverberant", "PI", "PI-continued", "MoE^p", "MoE^k", "OE^p", "OE^k", "IRM"]
MODELS = ["PI", "PI-continued", "MoE", "OE", "classifier"]
METRICS = {"stoi_vocoded": "vocoded STOI", "estoi_vocoded": "vocoded ESTOI"}
COSTED = ["PI", "MoE^k", "MoE^p", "OE^k", "OE^p", "classifier"]
LEVEL_MARGIN = 0.01  # "level with the MoE": the paired difference above -0.01 (TOST)
FS = 16000


def settings(quick: bool) -> dict:
    """Data, cap and flatness settings of the full run (or the ``--quick`` toy run)."""
    if quick:
        return dict(rt60s=[0.6], n_train=4, n_val=1, n_test=1, n_rirs=1, max_epochs=6,
                    eval_every=4, flat_min_steps=0, batch_size=256,
                    net=dict(context=3, hidden=16, classifier_hidden=16))  # fmt: skip
    return dict(rt60s=[0.3, 0.6, 1.0], n_train=96, n_val=12, n_test=12, n_rirs=2, max_epochs=40,
                eval_every=100, flat_min_steps=3000, batch_size=256,
                net=dict(context=5, hidden=128, classifier_hidden=128))  # fmt: skip


def unit_key(rt60: float, seed: int) -> str:
    return f"rt60={rt60}/seed={seed}"


def run_unit(rt60: float, seed: int, s: dict, cache: Path, progress: bool,
             device: str = "cpu") -> dict:  # fmt: skip
    """Train the four models of one (RT60, seed) until flat and score them on the test set
    (on ``device``, not a setting)."""
    t0 = time.perf_counter()
    net = MaskNetConfig(**s["net"])
    data_cfg = ReverbSpeechConfig(n_train=s["n_train"] + s["n_val"], n_test=s["n_test"],
                                  rt60=rt60, n_rirs=s["n_rirs"], seed=seed)  # fmt: skip
    train_all, test = build_reverberant_speech(data_cfg, cache_dir=cache, progress=progress)

    def frames(utts):
        return FrameSet.concat(
            [utterance_frames(u.reverberant, u.direct, u.phonemes) for u in utts]
        )

    fs = frames(train_all[: s["n_train"]])
    norm = FeatureNormalizer.fit(fs.log_mag)
    D = frame_tensors(fs, norm, net.context)
    V = frame_tensors(frames(train_all[s["n_train"] :]), norm, net.context)
    cfg = TrainConfig(epochs=s["max_epochs"], batch_size=s["batch_size"], seed=seed,
                      eval_every=s["eval_every"], until_flat=True,
                      flat_min_steps=s["flat_min_steps"], progress=progress,
                      device=device)  # fmt: skip
    kw = dict(validation=V, return_result=True)
    pi, r_pi = train_pi(D, net, cfg, **kw)
    moe, r_moe = train_moe(pi, D, cfg, **kw)
    oe, r_oe = train_oe(pi, D, cfg, **kw)
    clf, r_clf = train_classifier(D, net, cfg, **kw)
    # PI trained on from its flat point exactly as the OE is, without the tables
    pi_more, r_more = train_oe(pi, D, cfg, scale=False, shift=False, **kw)
    t_train = time.perf_counter() - t0
    train = {}
    for name, r in zip(MODELS, [r_pi, r_more, r_moe, r_oe, r_clf], strict=True):
        train[name] = dict(steps=r.step, cap=r.steps, reason=r.reason, converged=converged(r, cfg),
                           train_time_s=r.train_time_s, best_val_loss=r.best_metric,
                           curve=[[e["step"], e["val_loss"]] for e in r.evals])  # fmt: skip
    models = (pi, moe, oe, clf, {"none": pi_more})
    scores = {m: {n: [] for n in SYSTEMS} for m in METRICS}
    accs, test_frames = [], []
    for u in test:
        fr = utterance_frames(u.reverberant, u.direct, u.phonemes)
        test_frames.append(fr)
        mk, acc = masks(models, fr, norm, net)
        mk["PI-continued"] = mk.pop("OE^p[none]")
        accs.append(acc)
        for n in SYSTEMS:
            est = apply_mask(u.reverberant, mk[n])
            scores["stoi_vocoded"][n].append(vocoded_stoi(u.direct, est, FS))
            scores["estoi_vocoded"][n].append(vocoded_stoi(u.direct, est, FS, extended=True))
    # ms per 1000 frames = us per frame, on the first three test utterances (~1,500 frames)
    timing = time_forward(models, FrameSet.concat(test_frames[:3]), norm, net)
    costs = {k: vars(c) for k, c in model_costs(pi, moe, oe, clf).items() if k in COSTED}
    return dict(scores=scores, accuracy=float(np.mean(accs)), train=train, costs=costs,
                us_per_frame={k: v for k, v in timing.items() if k in COSTED},
                n_train_frames=len(D), n_val_frames=len(V), train_s=t_train,
                seconds=time.perf_counter() - t0)  # fmt: skip


def make_rows(runs: dict, rt60s: list, seeds: list) -> list[Row]:
    """Rows of the finished units: per seed, the means per RT60, training, costs, timing."""
    rows: list[Row] = []
    for rt in rt60s:
        done = [s for s in seeds if unit_key(rt, s) in runs]
        if not done:
            continue
        for metric in METRICS:
            for n in SYSTEMS:
                per = [float(np.mean(runs[unit_key(rt, s)]["scores"][metric][n])) for s in done]
                for s, v in zip(done, per, strict=True):
                    rows.append(Row(f"rt60={rt}/{n}/seed={s}", metric, v, "1"))
                vs = "reverberant" if n == "PI" else "PI"
                base = [float(np.mean(runs[unit_key(rt, s)]["scores"][metric][vs])) for s in done]
                ratio = float(np.mean(per) / np.mean(base)) if n != "reverberant" else None
                rows.append(Row(f"rt60={rt}/{n}", metric, float(np.mean(per)), "1",
                                None if ratio is None else f"rt60={rt}/{vs}", ratio))  # fmt: skip
        for m in MODELS:
            tr = [runs[unit_key(rt, s)]["train"][m] for s in done]
            rows.append(Row(f"rt60={rt}/{m}", "converged_fraction",
                            float(np.mean([t["converged"] for t in tr])), "fraction"))  # fmt: skip
            rows.append(Row(f"rt60={rt}/{m}", "steps_median",
                            float(np.median([t["steps"] for t in tr])), "steps"))  # fmt: skip
            rows.append(Row(f"rt60={rt}/{m}", "best_val_loss",
                            float(np.mean([t["best_val_loss"] for t in tr])), "1"))  # fmt: skip
        acc = [runs[unit_key(rt, s)]["accuracy"] for s in done]
        rows.append(Row(f"rt60={rt}/classifier", "frame_accuracy", float(np.mean(acc)), "1"))
        rows.append(Row(f"rt60={rt}", "seeds_done", float(len(done)), "count"))
    units = list(runs.values())
    if units:
        costs, base = units[0]["costs"], units[0]["costs"]["MoE^p"]
        us = {k: float(np.median([u["us_per_frame"][k] for u in units])) for k in COSTED[:-1]}
        for n in COSTED:
            c = costs[n]
            rows.append(Row(n, "parameters", c["parameters"], "count", "MoE^p",
                            base["parameters"] / c["parameters"]))  # fmt: skip
            rows.append(Row(n, "macs_per_frame", c["macs"], "MAC", "MoE^p",
                            base["macs"] / c["macs"]))  # fmt: skip
            if n in us:
                rows.append(Row(n, "inference_us_per_frame", us[n], "us", "MoE^p",
                                us["MoE^p"] / us[n]))  # fmt: skip
    return rows


def _per_seed(doc: dict, rt, system: str, metric: str, seeds: list) -> list[float]:
    return [row_value(doc, f"rt60={rt}/{system}/seed={s}", metric) for s in seeds]


def _all_converged(doc: dict, rt, models) -> bool:
    return all(row_value(doc, f"rt60={rt}/{m}", "converged_fraction") == 1.0 for m in models)


def level_verdict(claim, *, metric, ours, base, baseline, converged, note="") -> dict:
    """OE level with the MoE: contradicted when the paired t-test resolves a loss, reproduced
    when the one-sided paired t-test puts the mean difference above ``-LEVEL_MARGIN``
    (p < 0.05, TOST), not decided otherwise."""
    d = np.asarray(ours) - np.asarray(base)
    two = float(stats.ttest_rel(ours, base).pvalue) if np.ptp(d) > 0 else float(d.mean() == 0)
    one = (
        float(stats.ttest_1samp(d + LEVEL_MARGIN, 0.0, alternative="greater").pvalue)
        if np.ptp(d) > 0
        else float(d.mean() + LEVEL_MARGIN <= 0)
    )
    if two < 0.05 and d.mean() < 0:
        verdict, p = "contradicted", two
    elif one < 0.05:
        verdict, p = "reproduced", one
    else:
        verdict, p = "not decided", min(one, 1.0)
    why = (f"{metric} {np.mean(ours):.4g} vs {np.mean(base):.4g}; mean paired difference "
           f"{d.mean():+.3g} over {len(d)} seeds; paired t-test p = {two:.2g}; equivalence "
           f"(difference > -{LEVEL_MARGIN}) one-sided p = {one:.2g}; "
           f"{'converged' if converged else 'not all models converged'}")  # fmt: skip
    return verdict_entry(claim, verdict=verdict, why=f"{why}; {note}" if note else why,
                         metric=metric, ours=float(np.mean(ours)), baseline=baseline,
                         baseline_value=float(np.mean(base)), seeds=len(d), p_value=p,
                         converged=converged,
                         decisive=converged and verdict != "not decided" and p < 0.05)  # fmt: skip


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim, RT60 and metric, by the rules in the module docstring; RT60s
    with fewer than two finished seeds get none yet."""
    seeds = doc["machine"]["seeds"]
    out = []
    cases = {r["case"] for r in doc["rows"]}
    for rt in doc["machine"]["settings"]["rt60s"]:
        done = [s for s in seeds if f"rt60={rt}/PI/seed={s}" in cases]
        if len(done) < 2:
            continue
        macs = row_value(doc, "OE^p", "macs_per_frame") / row_value(doc, "MoE^p", "macs_per_frame")
        for metric, label in METRICS.items():
            oe = _per_seed(doc, rt, "OE^p", metric, done)
            conv = _all_converged(doc, rt, ["PI", "OE", "classifier"])
            out.append(decide_verdict(
                f"OE improves on the phoneme-independent model (RT60 {rt} s, {label})",
                metric=label, ours=oe, baseline="PI",
                baseline_values=_per_seed(doc, rt, "PI", metric, done),
                higher_is_better=True, converged=conv))  # fmt: skip
            out.append(decide_verdict(
                f"OE improves on PI trained on for as long without the tables "
                f"(RT60 {rt} s, {label})",
                metric=label, ours=oe, baseline="PI-continued",
                baseline_values=_per_seed(doc, rt, "PI-continued", metric, done),
                higher_is_better=True,
                converged=_all_converged(doc, rt, MODELS[:2] + MODELS[3:])))  # fmt: skip
            out.append(level_verdict(
                f"OE is level with the 40-expert MoE at a fraction of its cost "
                f"(RT60 {rt} s, {label})", metric=label, ours=oe,
                base=_per_seed(doc, rt, "MoE^p", metric, done), baseline="MoE^p",
                converged=_all_converged(doc, rt, MODELS),
                note=f"OE^p needs {macs:.3g} of MoE^p's MACs per frame"))  # fmt: skip
            out.append(decide_verdict(
                f"oracle phoneme labels beat predicted ones (RT60 {rt} s, {label})",
                metric=label, ours=_per_seed(doc, rt, "OE^k", metric, done), baseline="OE^p",
                baseline_values=oe, higher_is_better=True, converged=conv))  # fmt: skip
    return out


def plot_curves(runs: dict, rt60s: list, path: Path) -> None:
    """Validation loss against steps of every model, seed and RT60 (the learning curves)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(rt60s), figsize=(4 * len(rt60s), 6), squeeze=False)
    colours = {"PI": "C0", "PI-continued": "C4", "MoE": "C1", "OE": "C2", "classifier": "C3"}
    for j, rt in enumerate(rt60s):
        for key, u in runs.items():
            if not key.startswith(f"rt60={rt}/"):
                continue
            for m, c in colours.items():
                ax = axes[1 if m == "classifier" else 0, j]
                st, v = np.asarray(u["train"][m]["curve"]).T
                ls = "-" if u["train"][m]["converged"] else ":"
                ax.plot(st, v, ls, color=c, lw=0.8, label=m if key.endswith("seed=0") else None)
        axes[0, j].set_title(f"RT60 {rt} s (dotted: not flat)")
        axes[0, j].set_ylabel("validation mask loss")
        axes[1, j].set_ylabel("validation cross-entropy")
        axes[1, j].set_xlabel("step")
        axes[0, j].set_yscale("log")
        axes[0, j].legend(fontsize=7)
        axes[1, j].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    piece_arguments(p, unit="(RT60, seed) unit")
    p.add_argument("--seeds", type=int, default=5, help="paired seeds per RT60 (default 5)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "sci_moe" / "omni_expert",
                   help="room-response cache (default ~/.cache/sci_moe/omni_expert)")  # fmt: skip
    p.add_argument("--plots", type=Path, default=None, help="write the learning curves here")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    if verdicts_only(args) is not None:
        return 0
    setup(args)
    s = settings(args.quick)
    seeds = list(range(args.seed, args.seed + args.seeds))
    machine = machine_info(seed=args.seed, seeds=seeds, quick=args.quick, settings=s,
                           level_margin=LEVEL_MARGIN,
                           flat_rule="validation loss < 1 % better over the last 20 % of the "
                           "steps (sci_moe.train.is_flat)", device=args.device)  # fmt: skip
    runs: dict = {}
    if (old := previous_run(args)) is not None:
        try:
            check_resume_settings(old["machine"].get("settings"), s, args.json)
        except ValueError as err:
            refuse(str(err))
        runs = old.get("runs", {})
        machine["pieces"] = list(old["machine"].get("pieces", []))
    machine.setdefault("pieces", []).append({"units": 0, "load": None})
    other, t0, deadline = OtherLoad(), time.perf_counter(), piece_deadline(args)
    units = [(rt, sd) for sd in seeds for rt in s["rt60s"]]  # seed-major: all RT60s grow

    def write() -> dict:
        rows = make_rows(runs, s["rt60s"], seeds)
        doc = {"benchmark": BENCHMARK, "machine": machine, "rows": [vars(r) for r in rows]}
        doc["verdicts"] = [verdict_entry(**v) for v in verdicts(doc)] if rows else []
        doc["complete"] = all(unit_key(*u) in runs for u in units)
        doc["runs"] = runs
        if args.json is not None:
            write_json_doc(args.json, doc)
        return doc

    for rt, sd in units:
        if unit_key(rt, sd) in runs:
            continue
        if time.perf_counter() > deadline:
            break
        rec = run_unit(rt, sd, s, args.cache, args.progress, args.device)
        runs[unit_key(rt, sd)] = rec
        piece = machine["pieces"][-1]
        piece.update(units=piece["units"] + 1, load=other.report())
        tr = rec["train"]
        print(f"RT60={rt} seed={sd}: {rec['seconds']:.0f} s; steps/converged "
              + ", ".join(f"{m} {tr[m]['steps']}/{tr[m]['converged']}" for m in MODELS)
              + "; STOI " + ", ".join(f"{n} {np.mean(rec['scores']['stoi_vocoded'][n]):.3f}"
                                      for n in ("PI", "MoE^p", "OE^p")), flush=True)  # fmt: skip
        write()
    doc = write()
    table = [[r["case"], r["metric"], r["value"]] for r in doc["rows"] if "seed=" not in r["case"]]
    print_table(["case", "metric", "value"], table, BENCHMARK)
    for v in doc["verdicts"]:
        print(
            f"{v['verdict']:>12}  decisive={v['decisive']!s:5}  p={v['p_value']:.2g}  {v['claim']}"
        )
    if args.plots is not None and runs:
        tag = "_quick" if args.quick else ""
        plot_curves(runs, s["rt60s"], args.plots / f"omni_expert_full{tag}_curves.png")
    print(f"piece {time.perf_counter() - t0:.0f} s; complete: {doc['complete']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
