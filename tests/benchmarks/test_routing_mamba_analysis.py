"""benchmarks/routing_mamba: the until-flat runs read at equal training tokens (``_rm_equal``,
``run.py --derived-only``) and the interval verdicts' paired-test rule (``_rm_verdicts``)."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from .conftest import BENCH, load_benchmark

LN2 = math.log(2.0)


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("routing_mamba/run.py", "routing_mamba_run_equal") as mod:
        yield mod


@pytest.fixture(scope="module")
def equal(bench):
    import sys

    return sys.modules["_rm_equal"]


def _run(tokens, bpb, params=100, flops=200.0):
    return {
        "hist": {"tokens": list(tokens), "val_loss": [b * LN2 for b in bpb]},
        "params": [params, params],
        "flops": flops,
    }


def test_bpb_at_tokens_interpolates_the_curve(equal):
    run = _run([0, 100, 200], [4.0, 3.0, 2.0])
    assert equal.bpb_at_tokens(run, 100) == pytest.approx(3.0)
    assert equal.bpb_at_tokens(run, 150) == pytest.approx(2.5)
    assert equal.bpb_at_tokens(run, 200) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="not 300"):
        equal.bpb_at_tokens(run, 300)


def test_every_model_is_read_at_the_shortest_run_of_its_group(equal):
    # the baseline flattens at 200 tokens; the other model trains on to 400, where it is
    # better, but at 200 tokens it is worse in every seed
    seeds = [0, 1, 2]
    res = {
        "dense 1x": [_run([0, 100, 200], [4.0, 3.0, 2.0 + 0.01 * s]) for s in seeds],
        "RoM": [_run([0, 100, 200, 300, 400], [4.0, 3.2, 2.3 + 0.02 * s, 1.9, 1.8]) for s in seeds],
    }
    rows = {(r.case, r.metric): r for r in equal.equal_token_rows(res, seeds, equal.groups(res))}
    assert rows[("dense 1x", "equal_tokens")].value == 200
    rom = rows[("RoM", "val_bpb_equal_tokens")]
    assert rom.value == pytest.approx(2.32) and rom.vs == "dense 1x"
    assert rom.ratio == pytest.approx(2.01 / 2.32)
    assert rows[("RoM", "val_bpb_equal_tokens seed 2")].value == pytest.approx(2.34)
    assert rows[("RoM", "val_bpb_equal_tokens_t_p")].value < 0.01
    # no dense sizes and no hybrids here: no ratio and no saving rows
    assert not [k for k in rows if "ratio" in k[1] or "saving" in k[1]]
    assert all(m.split(" seed ")[0] in equal.EQUAL_TOKEN_METRICS for _, m in rows)


def test_groups_follow_the_plans_models(equal, bench):
    p = bench.plan(False, 2400, 9600)
    (lm, base), (hyb, hbase) = equal.groups(bench.models(p))
    assert base == "dense 1x" and "RoM" in lm and not any(n.startswith("hybrid") for n in lm)
    assert hbase == "hybrid dense" and "hybrid RoM" in hyb and len(hyb) == 5


def test_derived_only_adds_the_rows_and_changes_no_other(bench, tmp_path):
    src = BENCH / "routing_mamba" / "results"
    for name in ("routing_mamba_flat.json", "routing_mamba_flat.state.json"):
        shutil.copy(src / name, tmp_path / name)
    path = tmp_path / "routing_mamba_flat.json"
    before = json.loads(path.read_text())
    bench.main(["--derived-only", str(path)])
    after = json.loads(path.read_text())
    kept = [r for r in after["rows"] if "equal_tokens" not in r["metric"]]
    old = [r for r in before["rows"] if "equal_tokens" not in r["metric"]]
    assert kept == old
    assert {k: v for k, v in after.items() if k != "rows"} == {
        k: v for k, v in before.items() if k != "rows"
    }
    # the committed JSON holds exactly these rows already (the rule is idempotent)
    assert after["rows"] == before["rows"]
    new = {(r["case"], r["metric"]) for r in after["rows"]}
    assert ("RoM", "dense_equivalent_ratio_equal_tokens") in new
    assert ("hybrid RoM", "flops_saving_equal_tokens_ci_high") in new


def test_derived_only_refuses_what_it_cannot_read(bench, tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["--derived-only", str(tmp_path / "none.json")])
    src = BENCH / "routing_mamba" / "results"
    shutil.copy(src / "routing_mamba_long.json", tmp_path / "routing_mamba_long.json")
    with pytest.raises(SystemExit):  # no state file beside it
        bench.main(["--derived-only", str(tmp_path / "routing_mamba_long.json")])
    shutil.copy(src / "routing_mamba_long.state.json", tmp_path / "routing_mamba_long.state.json")
    with pytest.raises(SystemExit):  # a fixed-schedule run: nothing to add
        bench.main(["--derived-only", str(tmp_path / "routing_mamba_long.json")])


def test_a_reproduced_saving_is_decisive_only_when_the_test_backs_it(bench):
    """The hybrid saving's reproduced branch uses the same rule as the contradicted one,
    mirrored: decisive when the paired test shows the hybrid RoM better than the dense
    hybrid of equal FLOPs, on >= 5 flat seeds."""

    def doc(shift, seeds=range(5)):
        rows = []
        for case, base in (("hybrid dense", 2.5), ("hybrid RoM", 2.5 + shift)):
            vals = [base + 0.01 * s + 0.003 * (s % 2) for s in seeds]
            rows += [{"case": case, "metric": f"val_bpb seed {s}", "value": v}
                     for s, v in zip(seeds, vals, strict=True)]  # fmt: skip
            rows.append({"case": case, "metric": "converged_runs", "value": len(seeds)})
        for r in bench.HYBRID_RATIOS:
            rows.append({"case": f"hybrid dense {r:g}x", "metric": "converged_runs", "value": 5})
        rows += [
            {"case": "hybrid RoM", "metric": m, "value": v}
            for m, v in (("flops_saving", 0.3), ("flops_saving_ci_low", 0.1),
                         ("flops_saving_ci_high", 0.5))
        ]  # fmt: skip
        return {"machine": {"seeds": list(seeds)}, "rows": rows}

    sys_mod = __import__("sys").modules["_rm_verdicts"]
    better = sys_mod._hybrid_saving_verdict(doc(-0.1))
    assert better["verdict"] == "reproduced" and better["decisive"]
    assert "better than hybrid dense: paired t-test p" in better["why"]
    worse = sys_mod._hybrid_saving_verdict(doc(+0.1))
    assert worse["verdict"] == "reproduced" and not worse["decisive"]
    assert "ours not better" in worse["why"]
    few = sys_mod._hybrid_saving_verdict(doc(-0.1, range(3)))
    assert not few["decisive"] and "only 3 seeds" in few["why"]
