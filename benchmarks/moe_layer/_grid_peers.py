"""``run.py --grid-peers``: the whole grid against transformers' grouped_mm and eager experts.

Issue 41: the grid of ``run.py`` (``--full``, 288 cases) raced sci-moe against transformers'
*eager* experts only, and ``--hf-peers`` (``_hf_peers.py``) raced transformers' default,
``grouped_mm``, at ten shapes. This run races both at every grid case.

Contestants per case (:func:`_moe_layer.measure`, all from the same seed, timed in one
process, **interleaved**: every repeat runs each once, the order rotated per repeat, after
one warm-up each): ``sci-moe``, ``sci-moe other path`` (``d <= 256``), ``dense``,
``transformers eager`` (``MixtralSparseMoeBlock`` as transformers' eager experts) and
``transformers grouped_mm`` (the same block with transformers' default CPU experts
implementation, :func:`_moe_layer.peer_step`; float32 at ``T <= 1024`` checked against
sci-moe's output and gradients first, as ``--hf-peers`` does). Where grouped_mm cannot run
a case (its first step raises: an unsupported dtype, memory) the case is kept without it
and ``machine.grouped_mm_not_run`` says why; a float32 disagreement beyond the tolerance is
reported in ``machine.grouped_mm_check`` and timed all the same (as the eager block is).

Rows (``moe_layer_grid_peers.json``), per case: sci-moe's tokens/s with ``vs`` each other
contestant and ``ratio`` = median over repeats of the per-repeat ``t_other / t_sci``
(> 1: sci-moe faster), the ``x transformers grouped_mm repeat min`` / ``max`` spread of
that paired ratio, each contestant's tokens/s, ``tokens_per_s repeat R`` rows of sci-moe
and both transformers contestants (the paired samples of the verdicts) and sci-moe's model
GFLOP/s.

The run is written in pieces (the house convention of ``_common.piece_arguments``): the
JSON holds every finished case under ``runs`` (keyed by case label; the raw seconds per
step) and ``complete``, and is rewritten after every case, so a killed piece loses one case
at most; ``--max-hours H`` starts no case after ``H`` hours, ``--stop-after N`` measures at
most ``N`` new cases, and ``--resume`` keeps the stored cases (same seed and repeats, or it
refuses) and runs the rest (with none left it measures nothing and leaves the JSON as it
is). ``machine.pieces`` records each piece's commit, contention and cases;
``machine.cases_not_run`` lists what is left. ``--plot PNG`` draws the ratio to grouped_mm
of every case in the JSON (:func:`_grid_peers_plot.plot_grid_peers`).

Verdicts (:func:`verdicts`, re-derivable with ``--verdicts-only PATH``): per grid region
(dtype x ``d``) and per dtype over all ``d``, "sci-moe's step is faster than transformers'
grouped_mm", by :func:`_common.decide_verdict` on the per-case median log tokens/s, paired
case by case (a region of one case: paired over its repeats). ``why`` adds the reading, by
the geometric mean of the per-case ratios ``g``: *level* when ``|g - 1| <`` :data:`LEVEL`,
else *faster* (``g > 1``) or *slower*, with the spread of the per-case ratios and of the
per-repeat paired ratios. A timing trains nothing (``converged`` true); the pairs are cases
(or repeats), not seeds. A *level* region is "not decided" (not decisive) whatever its
p-value: a tie within ``1 +- LEVEL`` is not "faster", and a resolved 2 % is no claim about
speed a user would act on.
"""

from __future__ import annotations

import math
import statistics
import time

import torch
from _common import (
    OtherLoad,
    Row,
    check_resume_settings,
    decide_verdict,
    machine_info,
    piece_deadline,
    previous_run,
    refuse,
    row_dict,
    verdict_entry,
    warn_if_busy,
    write_json_doc,
)
from _grid_peers_plot import plot_grid_peers
from _moe_layer import ALT, DENSE, DTYPES, GRID_D, GROUPED, HF, SCI, Case, measure, parse_label

BENCHMARK = "moe_layer_grid_peers"
#: The eager block's name in this run's rows (``transformers`` in the older grid JSONs).
EAGER = "transformers eager"
#: A geometric mean ratio within 1 +- LEVEL reads "level".
LEVEL = 0.05
_NAMES = {HF: EAGER}


def _name(who: str) -> str:
    return _NAMES.get(who, who)


def case_rows(case: Case, times: dict) -> list[Row]:
    """The JSON rows of one finished case (see the module docstring)."""
    other = times["_paths"][1]
    times = {_name(w): t for w, t in times.items() if not w.startswith("_")}
    tag = f"{case.label} {SCI}"
    med = {who: statistics.median(t) for who, t in times.items()}
    tps = case.T / med[SCI]
    rows = []
    for who, ts in times.items():
        if who == SCI:
            continue
        ratio = statistics.median(b / a for a, b in zip(times[SCI], ts, strict=True))
        vs = f"{case.label} {who}" + (f" ({other})" if who == ALT else "")
        rows.append(Row(tag, "tokens_per_s", tps, "tokens/s", vs, ratio))
    if GROUPED in times:
        per = [b / a for a, b in zip(times[SCI], times[GROUPED], strict=True)]
        rows.append(Row(tag, f"x {GROUPED} repeat min", min(per), "x"))
        rows.append(Row(tag, f"x {GROUPED} repeat max", max(per), "x"))
    for who, ts in times.items():
        name = f"{case.label} {who}"
        if who != SCI:
            rows.append(Row(name, "tokens_per_s", case.T / med[who], "tokens/s"))
        if who in (SCI, EAGER, GROUPED):
            for r, t in enumerate(ts):
                rows.append(Row(name, f"tokens_per_s repeat {r}", case.T / t, "tokens/s"))
    gflops = case.T * case.flops_per_token() / med[SCI] / 1e9
    rows.append(Row(tag, "model_flops_per_s", gflops, "GFLOP/s"))
    return rows


def regions() -> list[tuple[str, object]]:
    """The verdicts' grid regions: (name, predicate on a :class:`Case`)."""
    out = [
        (f"{dt} d={d}", lambda c, dt=dt, d=d: c.dtype == dt and c.d == d)
        for dt in DTYPES
        for d in GRID_D
    ]
    return out + [(f"{dt}, every d", lambda c, dt=dt: c.dtype == dt) for dt in DTYPES]


def _repeats(doc: dict, label: str, who: str) -> list[float]:
    vals = {
        r["metric"]: r["value"]
        for r in doc["rows"]
        if r["case"] == f"{label} {who}" and r["metric"].startswith("tokens_per_s repeat ")
    }
    return [vals[f"tokens_per_s repeat {r}"] for r in range(len(vals))]


def verdicts(doc: dict) -> list[dict]:
    """Per region: is sci-moe's step faster than transformers' grouped_mm? (see above)"""
    labels = [lab for lab in doc["runs"] if GROUPED in doc["runs"][lab]]
    out = []
    for name, inside in regions():
        cases = [lab for lab in labels if inside(parse_label(lab))]
        if not cases:
            continue
        sci = {lab: _repeats(doc, lab, SCI) for lab in cases}
        grp = {lab: _repeats(doc, lab, GROUPED) for lab in cases}
        ratios = {lab: [s / g for s, g in zip(sci[lab], grp[lab], strict=True)] for lab in cases}
        per_case = [statistics.median(ratios[lab]) for lab in cases]
        every = [r for lab in cases for r in ratios[lab]]
        if len(cases) > 1:
            ours = [math.log(statistics.median(sci[lab])) for lab in cases]
            base = [math.log(statistics.median(grp[lab])) for lab in cases]
            paired, metric = "cases", "log tokens_per_s (per case: median over repeats)"
        else:
            ours = [math.log(v) for v in sci[cases[0]]]
            base = [math.log(v) for v in grp[cases[0]]]
            paired, metric = "repeats of its one case", "log tokens_per_s (per repeat)"
        if len(ours) < 2:
            continue
        g = math.exp(statistics.fmean(math.log(r) for r in per_case))
        reading = "level" if abs(g - 1) < LEVEL else "faster" if g > 1 else "slower"
        left = sum(1 for lab in doc["runs"] if inside(parse_label(lab))) - len(cases)
        note = (
            f"reading: {reading} (sci-moe vs grouped_mm: geometric mean ratio {g:.3f}, "
            f"level within 1 +- {LEVEL:g}; per-case median ratios {min(per_case):.3f}-"
            f"{max(per_case):.3f} over {len(cases)} cases; per-repeat paired ratios "
            f"{min(every):.3f}-{max(every):.3f}); paired over {paired}; "
            f"{left} cases of the region without grouped_mm; a timing, nothing trained"
        )
        entry = decide_verdict(
            f"sci-moe's MoE layer step (forward + backward, one thread) is faster than "
            f"transformers' grouped_mm experts over the grid region {name}",
            metric=metric,
            ours=ours,
            baseline=GROUPED,
            baseline_values=base,
            higher_is_better=True,
            converged=True,
            note=note,
        )
        if reading == "level":
            # a tie within 1 +- LEVEL is not "faster", however well resolved
            entry.update(
                verdict="not decided",
                decisive=False,
                why=f"a practical tie (geometric mean ratio within 1 +- {LEVEL:g}), "
                f"not faster; {entry['why']}",
            )
        out.append(entry)
    return out


def _document(machine: dict, runs: dict, cases: list[Case], repeats: int) -> dict:
    order = {c.label: i for i, c in enumerate(cases)}
    rows, not_run, check = [], {}, {}
    for label in sorted(runs, key=lambda lab: order.get(lab, len(order))):
        notes = runs[label].get("_notes", {})
        if "grouped_mm_not_run" in notes:
            not_run[label] = notes["grouped_mm_not_run"]
        if "grouped_mm_check" in notes:
            check[label] = notes["grouped_mm_check"]
        rows += case_rows(parse_label(label), runs[label])
    machine["cases_done"] = len(runs)
    machine["cases_not_run"] = [c.label for c in cases if c.label not in runs]
    machine["grouped_mm_not_run"], machine["grouped_mm_check"] = not_run, check
    machine["paths"] = {lab: runs[lab]["_paths"][0] for lab in runs}
    doc = {
        "benchmark": BENCHMARK,
        "machine": machine,
        "complete": not machine["cases_not_run"],
        "rows": [row_dict(r) for r in rows],
        "runs": runs,
    }
    found = verdicts(doc) if repeats >= 2 else []
    doc["verdicts"] = [verdict_entry(**v) for v in found]
    return doc


def grid_peers_main(args, cases: list[Case]) -> int:
    """``--grid-peers``: measure ``cases`` (in order) in pieces into ``--json``."""
    import transformers

    import sci_moe

    if args.json is None:
        raise SystemExit("--grid-peers needs --json PATH (the run is written in pieces there)")
    prev = previous_run(args)
    runs = {} if prev is None else dict(prev["runs"])
    pieces = [] if prev is None else list(prev["machine"].get("pieces", []))
    if prev is not None:
        m = prev["machine"]
        try:
            check_resume_settings(
                {"seed": m.get("seed"), "repeats": m.get("repeats")},
                {"seed": args.seed, "repeats": args.repeats},
                args.json,
                fix="pass the same --seed and --repeats",
            )
        except ValueError as err:
            refuse(str(err))
    machine = machine_info(
        seed=args.seed,
        sci_moe=sci_moe.__version__,
        transformers=transformers.__version__,
        mode="grid-peers",
        repeats=args.repeats,
        cases=len(cases),
        malloc=args.malloc,
        contestants=[SCI, ALT + " (d <= 256)", DENSE, EAGER, GROUPED],
        timing="one process; contestants interleaved, order rotated per repeat; "
        "ratio = median of per-repeat t_other / t_sci",
        level=LEVEL,
        pieces=pieces,
    )
    todo = [c for c in cases if c.label not in runs]
    print(
        f"moe_layer grid-peers: {len(cases)} cases, {len(runs)} stored, {len(todo)} to run; "
        f"torch {machine['torch']}, {torch.get_num_threads()} threads, transformers "
        f"{transformers.__version__}, {args.repeats} repeats, git {machine['git']}",
        flush=True,
    )
    if not todo and prev is not None:  # nothing left to measure: the stored run as it is
        if args.plot:
            print(f"wrote {plot_grid_peers(prev, args.plot)}")
        return 0
    warn_if_busy()
    other = OtherLoad()
    deadline = piece_deadline(args)
    piece = {"git": machine["git"], "cases": []}
    pieces.append(piece)
    t0 = time.perf_counter()
    for i, case in enumerate(todo):
        if time.perf_counter() > deadline or (args.stop_after is not None and i >= args.stop_after):
            print(f"piece ends: {len(todo) - i} cases left (continue with --resume)")
            break
        runs[case.label] = times = measure(case, args.seed, args.repeats, grouped_mm=True)
        piece["cases"].append(case.label)
        piece["contention"] = other.report()
        write_json_doc(args.json, _document(machine, runs, cases, args.repeats))
        med = {w: statistics.median(t) for w, t in times.items() if not w.startswith("_")}
        said = ", ".join(
            f"x {_name(w)} {med[w] / med[SCI]:.2f}" for w in (DENSE, HF, GROUPED) if w in med
        )
        why = times["_notes"].get("grouped_mm_not_run")
        print(
            f"[{len(runs)}/{len(cases)} {time.perf_counter() - t0:.0f} s] {case.label}: "
            f"{1e3 * med[SCI]:.1f} ms/step, {said}" + (f" (no grouped_mm: {why})" if why else ""),
            flush=True,
        )
    piece["contention"] = other.report()
    doc = _document(machine, runs, cases, args.repeats)
    write_json_doc(args.json, doc)
    for v in doc["verdicts"]:
        print(f"{v['verdict']:>12}  p={v['p_value']:.2g}  {v['claim']}")
    print(f"wrote {args.json} ({'complete' if doc['complete'] else 'in pieces: --resume'})")
    if args.plot:
        print(f"wrote {plot_grid_peers(doc, args.plot)}")
    return 0


def estimate_cpu_s(grid: dict, grouped_factor: float = 1.0, repeats: int = 3) -> dict:
    """Seconds of timed steps a ``--grid-peers`` run needs, from a stored grid JSON's rows.

    Per case of ``grid`` (a ``--full`` / ``--case`` JSON of ``run.py``): every contestant's
    step (``T`` over its median tokens/s) runs ``1 + repeats`` times (warm-up and repeats),
    sci-moe and the eager block once more at float32 ``T <= 1024`` (the check), and the
    grouped_mm contestant ``1 + repeats`` times at ``grouped_factor`` times sci-moe's step.
    Returns ``{"grid_s", "grouped_mm_s", "total_s", "cases"}``; model building and the
    difference between machines are not in it.
    """
    steps: dict[str, dict[str, float]] = {}
    for r in grid["rows"]:
        if r["case"].startswith("summary") or r["metric"] != "tokens_per_s":
            continue
        label, who = r["case"].split(" ", 1)
        steps.setdefault(label, {})[who] = parse_label(label).T / r["value"]
    old = new = 0.0
    for label, t in steps.items():
        case = parse_label(label)
        old += (1 + repeats) * sum(t.values())
        if case.dtype == "float32" and case.T <= 1024:
            old += t[SCI] + t.get(HF, 0.0)
        new += (1 + repeats) * grouped_factor * t[SCI]
    return {"grid_s": old, "grouped_mm_s": new, "total_s": old + new, "cases": len(steps)}
