"""Omni-Expert vs PI vs a 40-expert phoneme MoE: dereverberation masks for CI-vocoded speech.

Synthetic espeak-ng speech (sentences of Python's documentation, disjoint train/test voices)
in pyroomacoustics ShoeBox rooms (6 x 5 x 3 m) at RT60 in {0.3, 0.6, 1.0} s; causal STFT
(8 ms frames, 6 ms hop, 65 bins); IRM target with the direct path as reference; phoneme
labels from espeak's own events (oracle) and a frame classifier (predicted). Per RT60 and
seed: train PI, then the MoE (40 experts upcycled from PI, oracle routing) and the OE
(expert from PI + 40 x 65 scale/shift tables) for the same number of epochs; evaluate
STOI of 16-channel sine-vocoded speech (pystoi) and the log-spectral distance (LSD, dB) of
reverberant, PI, MoE^p, MoE^k, OE^p (folded and mixture forms), OE^k and the oracle IRM.
Paired Wilcoxon tests over test utterances (all seeds pooled) OE vs PI and OE vs MoE;
parameters, MACs per frame and measured inference time as ratios vs MoE^p; the
shift/scale ablation at RT60 0.6 s; pocketsphinx forced-alignment agreement with espeak's
events. Plots with ``--plots DIR``.

    python benchmarks/omni_expert/run.py --json benchmarks/omni_expert/results/omni_expert.json
    python benchmarks/omni_expert/run.py --quick \\
        --json benchmarks/omni_expert/results/omni_expert_quick.json

:func:`verdicts` decides the paper's claims from the rows and writes them into the JSON;
``--verdicts-only PATH`` recomputes a stored JSON's verdicts (no training). ``--device cuda``
trains the four models on a GPU and computes the masks and the inference timing there (the
speech, rooms, features, vocoder and scores stay on the CPU); the device is recorded in
the JSON's ``machine`` block for information only (the stored CPU results stay the
reference).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import numpy as np
import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    decide_verdict,
    machine_info,
    print_table,
    row_value,
    setup,
    verdict_entry,
    verdicts_only,
    write_json,
)
from _omni import masks as _masks
from _omni import time_forward as _time_forward
from scipy.stats import wilcoxon

from sci_moe.data.speech import ReverbSpeechConfig, build_reverberant_speech
from sci_moe.speech import ARPABET
from sci_moe.speech.omni import (
    FeatureNormalizer,
    FrameSet,
    MaskNetConfig,
    TrainConfig,
    apply_mask,
    event_frame_labels,
    force_align,
    frame_tensors,
    label_agreement,
    log_spectral_distance,
    model_costs,
    train_classifier,
    train_moe,
    train_oe,
    train_pi,
    utterance_frames,
    vocoded_stoi,
)

SYSTEMS = ["reverberant", "PI", "MoE^p", "MoE^k", "OE^p", "OE^p-mixture", "OE^k", "IRM"]
ABLATION = {"none": (False, False), "shift": (False, True), "scale": (True, False)}
FS = 16000


def _settings(quick: bool) -> dict:
    if quick:
        return dict(rt60s=[0.6], n_train=12, n_test=3, n_rirs=2, pi_epochs=4, ft_epochs=3,
                    n_align=2)  # fmt: skip
    return dict(rt60s=[0.3, 0.6, 1.0], n_train=16, n_test=4, n_rirs=2, pi_epochs=5, ft_epochs=4,
                n_align=1)  # fmt: skip


def run_config(rt60, seed, s, net, cache_dir, progress, device="cpu"):
    """Train PI, the MoE, the OE (and the ablation's) and the classifier of one (RT60,
    seed) on ``device`` (their ``TrainConfig.device``) and score them on the test set."""
    data_cfg = ReverbSpeechConfig(
        n_train=s["n_train"], n_test=s["n_test"], rt60=rt60, n_rirs=s["n_rirs"], seed=seed
    )
    train, test = build_reverberant_speech(data_cfg, cache_dir=cache_dir, progress=progress)
    fs = FrameSet.concat([utterance_frames(u.reverberant, u.direct, u.phonemes) for u in train])
    norm = FeatureNormalizer.fit(fs.log_mag)
    D = frame_tensors(fs, norm, net.context)
    torch.manual_seed(seed)
    pi_cfg = TrainConfig(epochs=s["pi_epochs"], seed=seed, progress=progress, device=device)
    pi = train_pi(D, net, pi_cfg)
    ft = TrainConfig(epochs=s["ft_epochs"], seed=seed, progress=progress, device=device)
    moe = train_moe(pi, D, ft)
    oe = train_oe(pi, D, ft)
    clf = train_classifier(D, net, TrainConfig(epochs=s["pi_epochs"], seed=seed, device=device))
    ablation = {}
    if rt60 == 0.6:
        for name, (sc, sh) in ABLATION.items():
            ablation[name] = train_oe(pi, D, ft, scale=sc, shift=sh)
    models = (pi, moe, oe, clf, ablation)
    stoi, lsd, accs = {}, {}, []
    test_frames = []
    for u in test:
        fr = utterance_frames(u.reverberant, u.direct, u.phonemes)
        test_frames.append(fr)
        masks, acc = _masks(models, fr, norm, net)
        accs.append(acc)
        for name, m in masks.items():
            est = apply_mask(u.reverberant, m)
            stoi.setdefault(name, []).append(vocoded_stoi(u.direct, est, FS))
            lsd.setdefault(name, []).append(log_spectral_distance(u.direct, est))
    timing = _time_forward(models, FrameSet.concat(test_frames), norm, net)
    agree, failed = [], 0
    for u in test[: s["n_align"]]:
        try:
            ev = force_align(u.direct, FS, u.text, seed=seed)
        except ValueError:  # pocketsphinx finds no path for some synthetic utterances
            failed += 1
            continue
        times = np.arange(0.005, u.direct.size / FS, 0.01)
        agree.append(
            label_agreement(
                event_frame_labels(u.phonemes, times), event_frame_labels(ev, times, espeak=False)
            )
        )
    costs = model_costs(pi, moe, oe, clf)
    return dict(stoi=stoi, lsd=lsd, acc=float(np.mean(accs)), timing=timing, agree=agree,
                align_failed=failed,
                costs=costs, n_train_frames=len(D))  # fmt: skip


def verdicts(doc: dict) -> list[dict]:
    """One verdict per claim of the paper, by rules applied to the run's rows (issue 41).

    Vocoded STOI, higher is better. Comparisons against a baseline trained with the same
    extra epochs use the per-seed rows (``rt60=<r>/<system>/seed=<s>``) in
    :func:`_common.decide_verdict` (paired t-test over seeds, alpha 0.05):

    * OE improves on the phoneme-independent model: OE^p against the strongest control,
      PI fine-tuned for the same epochs without any transform (``OE^p[none]``, the
      ablation's RT60);
    * oracle labels beat predicted ones: OE^k vs OE^p, every RT60;
    * shift and scale together help: OE^p (both) vs the no-transform control.

    OE against the 40-expert MoE (same extra epochs, about 1/40 of the compute) uses the
    benchmark's own paired Wilcoxon test over the test utterances (``wilcoxon_p``,
    ``stoi_diff_mean``): reproduced when it resolves a gain of OE, contradicted when it
    resolves a loss, not decided otherwise, every RT60. Nothing is trained to convergence
    (a few epochs), so nothing is decisive.
    """
    seeds = doc["machine"]["seeds"]
    rt60s = doc["machine"]["settings"]["rt60s"]

    def stoi(rt60, system):
        return [row_value(doc, f"rt60={rt60}/{system}/seed={s}", "stoi_vocoded") for s in seeds]

    def compare(claim, rt60, ours, base):
        return decide_verdict(
            f"{claim} (RT60 {rt60} s)",
            metric="vocoded STOI",
            ours=stoi(rt60, ours),
            baseline=base,
            baseline_values=stoi(rt60, base),
            higher_is_better=True,
            converged=False,
        )

    cases = {r["case"] for r in doc["rows"]}
    ablation = [rt for rt in rt60s if f"rt60={rt}/OE^p[none]/seed={seeds[0]}" in cases]
    out = [
        compare("OE improves on the phoneme-independent expert", rt, "OE^p", "OE^p[none]")
        for rt in ablation
    ]
    for rt in rt60s:
        diff = row_value(doc, f"rt60={rt}/OE^p vs MoE^p", "stoi_diff_mean")
        p = row_value(doc, f"rt60={rt}/OE^p vs MoE^p", "wilcoxon_p")
        ours = row_value(doc, f"rt60={rt}/OE^p", "stoi_vocoded")
        base = row_value(doc, f"rt60={rt}/MoE^p", "stoi_vocoded")
        verdict = "not decided" if p >= 0.05 else "reproduced" if diff > 0 else "contradicted"
        wins = row_value(doc, f"rt60={rt}/OE^p vs MoE^p", "wins")
        out.append(
            verdict_entry(
                f"OE matches the 40-expert MoE at about 1/40 of the compute (RT60 {rt} s)",
                verdict=verdict,
                why=f"vocoded STOI {ours:.4g} vs {base:.4g}; mean paired difference "
                f"{diff:+.3g}, OE ahead on {wins:.0%} of the test utterances; the benchmark's "
                f"paired Wilcoxon test over the utterances p = {p:.2g} "
                f"({'<' if p < 0.05 else '>='} 0.05); not trained to convergence",
                metric="vocoded STOI",
                ours=ours,
                baseline="MoE^p",
                baseline_value=base,
                seeds=len(seeds),
                p_value=p,
                converged=False,
                decisive=False,
            )
        )
    out += [
        compare("oracle phoneme labels beat predicted ones", rt, "OE^k", "OE^p") for rt in rt60s
    ]
    out += [
        compare("shift and scale together improve on no transform", rt, "OE^p", "OE^p[none]")
        for rt in ablation
    ]
    return out


def main(argv=None) -> None:
    p = base_parser(__doc__.splitlines()[0], verdicts=verdicts, device=True)
    p.add_argument("--seeds", type=int, default=3, help="seeds per RT60 (>= 3)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "sci_moe" / "omni_expert",
                   help="room-response cache (default ~/.cache/sci_moe/omni_expert)")  # fmt: skip
    p.add_argument("--plots", type=Path, default=None, help="write PNG plots here")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    if verdicts_only(args) is not None:
        return
    setup(args)
    load = OtherLoad()
    s = _settings(args.quick)
    net = MaskNetConfig(context=5, hidden=128, classifier_hidden=128)
    seeds = list(range(args.seed, args.seed + args.seeds))
    t_start = time.perf_counter()
    results = {}
    for rt60 in s["rt60s"]:
        for seed in seeds:
            t0 = time.perf_counter()
            results[rt60, seed] = run_config(
                rt60, seed, s, net, args.cache, args.progress, args.device
            )
            print(f"RT60={rt60} seed={seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    rows: list[Row] = []
    table = []
    for rt60 in s["rt60s"]:
        per = {name: [] for name in results[rt60, seeds[0]]["stoi"]}
        per_lsd = {name: [] for name in per}
        for seed in seeds:
            r = results[rt60, seed]
            for name in per:
                rows.append(Row(f"rt60={rt60}/{name}/seed={seed}", "stoi_vocoded",
                                float(np.mean(r["stoi"][name])), "1"))  # fmt: skip
                rows.append(Row(f"rt60={rt60}/{name}/seed={seed}", "lsd",
                                float(np.mean(r["lsd"][name])), "dB"))  # fmt: skip
                per[name].extend(r["stoi"][name])
                per_lsd[name].extend(r["lsd"][name])
        means = {n: float(np.mean(v)) for n, v in per.items()}
        lsd_means = {n: float(np.mean(v)) for n, v in per_lsd.items()}
        for name in per:
            vs = "PI" if name != "PI" else "reverberant"
            rows.append(Row(f"rt60={rt60}/{name}", "stoi_vocoded", means[name], "1",
                            f"rt60={rt60}/{vs}", means[name] / means[vs]))  # fmt: skip
            rows.append(Row(f"rt60={rt60}/{name}", "lsd", lsd_means[name], "dB",
                            f"rt60={rt60}/{vs}", lsd_means[vs] / lsd_means[name]))  # fmt: skip
            table.append([rt60, name, means[name], float(np.std(per[name])), lsd_means[name]])
        for a, b in [("OE^p", "PI"), ("OE^k", "PI"), ("OE^p", "MoE^p"), ("OE^k", "MoE^k"),
                     ("MoE^p", "PI"), ("MoE^k", "PI")]:  # fmt: skip
            d = np.asarray(per[a]) - np.asarray(per[b])
            pval = float(wilcoxon(per[a], per[b]).pvalue) if np.any(d != 0) else 1.0
            rows.append(Row(f"rt60={rt60}/{a} vs {b}", "stoi_diff_mean", float(d.mean()), "1"))
            rows.append(Row(f"rt60={rt60}/{a} vs {b}", "wilcoxon_p", pval, "p"))
            rows.append(Row(f"rt60={rt60}/{a} vs {b}", "wins", float(np.mean(d > 0)), "fraction"))
        accs = [results[rt60, sd]["acc"] for sd in seeds]
        rows.append(Row(f"rt60={rt60}/classifier", "frame_accuracy", float(np.mean(accs)), "1"))
        rows.append(Row(f"rt60={rt60}/classifier", "chance", 1 / len(ARPABET), "1"))
        ag = [a for sd in seeds for a in results[rt60, sd]["agree"]]
        n_fail = sum(results[rt60, sd]["align_failed"] for sd in seeds)
        rows.append(Row(f"rt60={rt60}/pocketsphinx vs espeak", "frame_agreement",
                        float(np.mean(ag)) if ag else float("nan"), "1"))  # fmt: skip
        rows.append(Row(f"rt60={rt60}/pocketsphinx vs espeak", "aligned_utterances",
                        float(len(ag)), "count"))  # fmt: skip
        rows.append(Row(f"rt60={rt60}/pocketsphinx vs espeak", "failed_utterances",
                        float(n_fail), "count"))  # fmt: skip
    # costs (identical for every config) and timing (median over configs)
    costs = results[s["rt60s"][0], seeds[0]]["costs"]
    base = costs["MoE^p"]
    cost_table = []
    for name in ["PI", "MoE^k", "MoE^p", "OE^k", "OE^p", "OE^p-mixture", "classifier"]:
        c = costs[name]
        rows.append(Row(name, "parameters", c.parameters, "count", "MoE^p",
                        base.parameters / c.parameters))  # fmt: skip
        rows.append(Row(name, "train_parameters", c.train_parameters, "count", "MoE^p",
                        base.train_parameters / c.train_parameters))  # fmt: skip
        rows.append(Row(name, "macs_per_frame", c.macs, "MAC", "MoE^p", base.macs / c.macs))
        cost_table.append([name, c.parameters, c.train_parameters, c.macs])
    tm = {n: float(np.median([r["timing"][n] for r in results.values()]))
          for n in results[s["rt60s"][0], seeds[0]]["timing"]}  # fmt: skip
    for name, v in tm.items():
        rows.append(Row(name, "inference_ms_per_1k_frames", v, "ms", "MoE^p", tm["MoE^p"] / v))
    if 0.6 in s["rt60s"]:
        abl = {n: [] for n in ["none", "shift", "scale", "both"]}
        for seed in seeds:
            st = results[0.6, seed]["stoi"]
            for n in ["none", "shift", "scale"]:
                abl[n].extend(st[f"OE^p[{n}]"])
            abl["both"].extend(st["OE^p"])
        for n, v in abl.items():
            rows.append(Row(f"ablation rt60=0.6/OE^p[{n}]", "stoi_vocoded", float(np.mean(v)), "1",
                            "ablation rt60=0.6/OE^p[none]",
                            float(np.mean(v)) / float(np.mean(abl["none"]))))  # fmt: skip
    wall = time.perf_counter() - t_start
    print_table(["RT60", "system", "STOI", "std", "LSD dB"], table, "vocoded STOI (all seeds)")
    print_table(["model", "params", "train params", "MACs/frame"], cost_table, "costs")
    print(f"wall {wall:.0f} s")
    if args.plots is not None:
        _plots(rows, s["rt60s"], args.plots)
    if args.json is not None:
        frames = [r["n_train_frames"] for r in results.values()]
        machine = machine_info(
            seed=args.seed,
            seeds=seeds,
            quick=args.quick,
            load=load.report(),
            wall_s=wall,
            settings=s,
            net=vars(net),
            n_train_frames=frames,
            device=args.device,  # information only: the stored CPU results are the reference
        )
        doc = {"machine": machine, "rows": [vars(r) for r in rows]}
        write_json(args.json, "omni_expert", machine, rows, verdicts=verdicts(doc))


def _plots(rows, rt60s, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    val = {(r.case, r.metric): r.value for r in rows}
    names = ["reverberant", "PI", "MoE^p", "MoE^k", "OE^p", "OE^k", "IRM"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    w = 0.8 / len(names)
    for j, metric in enumerate(["stoi_vocoded", "lsd"]):
        ax = axes[j]
        for i, n in enumerate(names):
            ys = [val[(f"rt60={r}/{n}", metric)] for r in rt60s]
            ax.bar(np.arange(len(rt60s)) + i * w, ys, w, label=n)
        ax.set_xticks(np.arange(len(rt60s)) + 0.4 - w / 2, [f"{r} s" for r in rt60s])
        ax.set_xlabel("RT60")
        ax.set_ylabel("STOI (CI-vocoded)" if metric == "stoi_vocoded" else "LSD (dB)")
        if metric == "stoi_vocoded":
            ax.set_ylim(0.4, 1.0)
    axes[0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "omni_quality.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for n in ["PI", "MoE^k", "MoE^p", "OE^k", "OE^p", "OE^p-mixture"]:
        x = val[(n, "macs_per_frame")]
        y = np.mean([val[(f"rt60={r}/{n}", "stoi_vocoded")] for r in rt60s])
        ax.scatter(x, y)
        ax.annotate(n, (x, y), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("MACs per frame (classifier excluded)")
    ax.set_ylabel("mean STOI over RT60")
    fig.tight_layout()
    fig.savefig(out / "omni_compute.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
