"""``benchmarks/_common``: verdict entries (issue 41, item 2) and the paired tests behind them."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def common():
    with load_benchmark("_common/__init__.py", "bench_common_verdicts") as mod:
        yield mod


def _entry(**over):
    kw = {
        "verdict": "reproduced",
        "why": "rule",
        "metric": "relative_l2",
        "ours": 0.9,
        "baseline": "FLM",
        "baseline_value": 1.0,
        "seeds": 3,
        "p_value": 0.01,
        "converged": True,
        "decisive": True,
    }
    kw.update(over)
    return kw


def test_verdict_entry_has_the_schema_keys_in_order(common):
    e = common.verdict_entry("K=3 beats K=1", **_entry())
    assert tuple(e) == common.VERDICT_KEYS
    assert e["claim"] == "K=3 beats K=1" and e["decisive"] is True


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"verdict": "partly"}, "not one of"),
        ({"decisive": True, "converged": False}, "converged"),
        ({"decisive": True, "p_value": 0.2}, "resolve"),
        ({"decisive": True, "p_value": None}, "resolve"),
        ({"verdict": "not decided", "decisive": True}, "cannot be decisive"),
        ({"seeds": 0}, "seeds"),
        ({"p_value": 1.5}, "p_value"),
        ({"ours": float("nan")}, "ours"),
        ({"why": " "}, "why"),
        ({"converged": 1}, "converged"),
    ],
)
def test_verdict_entry_rejects_what_breaks_the_rules(common, over, match):
    with pytest.raises(ValueError, match=match):
        common.verdict_entry("c", **_entry(**over))


def test_a_non_decisive_verdict_needs_no_resolution(common):
    e = common.verdict_entry("c", **_entry(converged=False, decisive=False, p_value=None))
    assert e["decisive"] is False and e["p_value"] is None


def test_paired_test_p_values(common):
    res = common.paired_test([1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 1.1, 1.9, 3.2, 3.9])
    assert res["n"] == 5 and res["wins"] == 5 and res["losses"] == 0
    assert res["t"] < 1e-3  # differences 1, 0.9, 1.1, 0.8, 1.1: tiny spread
    assert res["wilcoxon"] == pytest.approx(0.0625)  # exact: 2 / 2**5
    assert res["sign"] == pytest.approx(0.0625)
    same = common.paired_test([1.0, 2.0], [1.0, 2.0])
    assert same["t"] == same["wilcoxon"] == same["sign"] == 1.0
    with pytest.raises(ValueError, match="equally long"):
        common.paired_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        common.paired_test([1.0, float("nan")], [1.0, 2.0])


def test_decide_verdict_follows_the_rule(common):
    ours, base = [0.80, 0.82, 0.81], [1.00, 1.05, 1.02]
    kw = {"metric": "err", "baseline": "K=1", "higher_is_better": False}
    e = common.decide_verdict("fewer errors", ours=ours, baseline_values=base, converged=True, **kw)
    # resolved and converged, but three seeds: reproduced, not decisive, and the why says so
    assert e["verdict"] == "reproduced" and e["decisive"] is False and e["p_value"] < 0.05
    assert e["ours"] == pytest.approx(0.81) and e["seeds"] == 3
    assert "only 3 seeds (decisive needs >= 5)" in e["why"]
    assert common.MIN_DECISIVE_SEEDS == 5
    five = common.decide_verdict(
        "fewer errors", ours=[*ours, 0.8, 0.83], baseline_values=[*base, 1.01, 1.0],
        converged=True, **kw,
    )  # fmt: skip
    assert five["verdict"] == "reproduced" and five["decisive"] is True
    assert "decisive needs" not in five["why"]
    three = common.decide_verdict(
        "fewer errors", ours=ours, baseline_values=base, converged=True, min_seeds=3, **kw
    )
    assert three["decisive"] is True
    e = common.decide_verdict(
        "fewer errors", ours=base, baseline_values=ours, converged=False, **kw
    )
    assert e["verdict"] == "contradicted" and e["decisive"] is False
    noisy = common.decide_verdict(
        "fewer errors", ours=[0.9, 1.1, 1.0], baseline_values=[1.0, 1.0, 1.05], converged=True, **kw
    )
    assert noisy["verdict"] == "not decided" and noisy["decisive"] is False
    # The sign test cannot resolve three seeds.
    sign = common.decide_verdict(
        "fewer errors", ours=ours, baseline_values=base, converged=True, test="sign", **kw
    )
    assert sign["verdict"] == "not decided"


def test_write_json_stores_checked_verdicts(common, tmp_path):
    row = common.Row("c", "m", 1.0, "")
    good = common.verdict_entry("c", **_entry())
    common.write_json(tmp_path / "r.json", "demo", {}, [row], verdicts=[good])
    assert json.loads((tmp_path / "r.json").read_text())["verdicts"] == [good]
    with pytest.raises(ValueError, match="not one of"):
        common.write_json(
            tmp_path / "s.json", "demo", {}, [row], verdicts=[{**good, "verdict": "x"}]
        )
    assert not (tmp_path / "s.json").exists()


def test_interval_verdict_follows_the_interval(common):
    kw = {"metric": "accuracy", "baseline": "chance", "baseline_value": 0.25, "seeds": 3}
    kw |= {"higher_is_better": True, "converged": False}
    above = common.interval_verdict("above chance", ours=0.4, low=0.3, high=0.5, **kw)
    inside = common.interval_verdict("above chance", ours=0.26, low=0.2, high=0.3, **kw)
    below = common.interval_verdict("above chance", ours=0.1, low=0.05, high=0.2, **kw)
    assert [v["verdict"] for v in (above, inside, below)] == [
        "reproduced",
        "not decided",
        "contradicted",
    ]
    assert not above["decisive"] and above["p_value"] is None and "0.3-0.5" in above["why"]
    lower = common.interval_verdict(
        "lower", **{**kw, "higher_is_better": False}, ours=0.1, low=0.05, high=0.2
    )
    assert lower["verdict"] == "reproduced"
    with pytest.raises(ValueError, match="does not contain"):
        common.interval_verdict("x", ours=0.9, low=0.3, high=0.5, **kw)


def test_rederive_verdicts_changes_only_the_verdicts(common, tmp_path):
    rows = [common.Row("a", "m", 0.9, ""), common.Row("b", "m", 1.0, "")]
    common.write_json(tmp_path / "r.json", "demo", {"seed": 0}, rows)
    before = json.loads((tmp_path / "r.json").read_text())

    def rule(doc):
        ours, base = common.row_value(doc, "a", "m"), common.row_value(doc, "b", "m")
        return [common.verdict_entry("a below b", **_entry(ours=ours, baseline_value=base))]

    assert common.rederive_verdicts(tmp_path / "r.json", rule) == 0
    after = json.loads((tmp_path / "r.json").read_text())
    assert after.pop("verdicts")[0]["ours"] == 0.9 and after == before
    with pytest.raises(ValueError, match="0 rows"):
        common.row_value(after, "c", "m")


def test_seed_verdict_tests_per_seed_rows_or_asks_for_a_rerun(common):
    rows = [common.Row("a", "loss", 1.0, ""), common.Row("b", "loss", 2.0, "")]
    means = {"machine": {"seeds": [0, 1, 2]}, "rows": [vars(r) for r in rows]}
    kw = {"metric": "loss", "ours": "a", "baseline": "b", "higher_is_better": False}
    rerun = common.seed_verdict("a beats b", means, converged=True, **kw)
    assert rerun["verdict"] == "not decided" and "rerun needed" in rerun["why"]
    assert (rerun["ours"], rerun["baseline_value"], rerun["seeds"]) == (1.0, 2.0, 3)
    per_seed = [
        {"case": c, "metric": f"loss seed {s}", "value": v + step * s}
        for c, v, step in (("a", 1.0, 0.01), ("b", 2.0, 0.03))
        for s in range(3)
    ]
    full = {**means, "rows": means["rows"] + per_seed}
    tested = common.seed_verdict("a beats b", full, converged=True, **kw)
    assert tested["verdict"] == "reproduced" and tested["seeds"] == 3
    assert not tested["decisive"]  # three seeds: resolved, not decisive


def test_summary_verdict_is_welch_from_the_stored_statistics(common):
    from scipy import stats

    kw = {"metric": "err", "baseline": "FLM", "higher_is_better": False, "converged": False}
    far = common.summary_verdict(
        "lower err", ours=(0.3, 0.01, 3), baseline_stats=(0.9, 0.02, 3), ddof=1, **kw
    )
    near = common.summary_verdict(
        "lower err", ours=(0.9, 0.08, 3), baseline_stats=(0.95, 0.05, 3), ddof=1, **kw
    )
    worse = common.summary_verdict(
        "lower err", ours=(0.9, 0.01, 3), baseline_stats=(0.3, 0.0, 3), ddof=0, **kw
    )
    assert [v["verdict"] for v in (far, near, worse)] == [
        "reproduced",
        "not decided",
        "contradicted",
    ]
    want = stats.ttest_ind_from_stats(0.3, 0.01, 3, 0.9, 0.02, 3, equal_var=False).pvalue
    assert far["p_value"] == pytest.approx(want) and not far["decisive"]
    # population sd (ddof 0) is widened to the sample sd before the test
    pop = common.summary_verdict(
        "x", ours=(0.3, 0.01, 3), baseline_stats=(0.9, 0.02, 3), ddof=0, **kw
    )
    assert pop["p_value"] > far["p_value"]
    with pytest.raises(ValueError, match="n >= 2"):
        common.summary_verdict(
            "x", ours=(0.3, 0.01, 1), baseline_stats=(0.9, 0.02, 3), ddof=1, **kw
        )


def test_difference_verdict_is_the_paired_test_from_the_stored_differences(common):
    from scipy import stats

    diffs = [0.30, 0.42, 0.46]
    sd0 = float(np.std(diffs))
    kw = {"metric": "loglik", "ours": 0.5, "baseline": "one Gaussian", "baseline_value": 0.1}
    v = common.difference_verdict(
        "GMM fits better",
        difference=(float(np.mean(diffs)), sd0, 3),
        ddof=0,
        higher_is_better=True,
        converged=False,
        **kw,
    )
    want = stats.ttest_1samp(diffs, 0.0).pvalue
    assert v["p_value"] == pytest.approx(want) and v["verdict"] == "reproduced"
    flat = common.difference_verdict(
        "GMM fits better",
        difference=(0.01, 0.2, 3),
        ddof=1,
        higher_is_better=True,
        converged=False,
        **kw,
    )
    assert flat["verdict"] == "not decided"


def test_the_pages_read_the_schema_the_scripts_write(common):
    """docs/_ext/results_role.py checks entries against the schema of _common/verdicts.py."""
    path = pathlib.Path(__file__).resolve().parents[2] / "docs" / "_ext" / "results_role.py"
    spec = importlib.util.spec_from_file_location("_results_role_schema", path)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    assert ext.VERDICT_KEYS == common.VERDICT_KEYS
    assert set(ext.VERDICT_VALUES) == set(common.VERDICTS)


def test_an_unresolved_gain_below_the_margin_contradicts_the_claim(common):
    kw = {"metric": "acc", "baseline": "base", "higher_is_better": True, "converged": True}
    base = [0.80, 0.82, 0.81, 0.79, 0.83, 0.80]
    # ours wobbles around the baseline by +-0.001: the t-test resolves nothing, but the
    # gain's interval lies wholly below 1 % of 0.81 (0.0081)
    ours = [
        b + d for b, d in zip(base, [0.001, -0.001, 0.0005, -0.0005, 0.001, -0.001], strict=True)
    ]
    e = common.decide_verdict("better", ours=ours, baseline_values=base, **kw)
    assert e["verdict"] == "contradicted" and e["decisive"] is True
    assert e["p_value"] < 0.025 and "smallest gain the claim needs (1% of the baseline" in e["why"]
    # the same run with the margin turned off is undecided
    off = common.decide_verdict("better", ours=ours, baseline_values=base, margin=None, **kw)
    assert off["verdict"] == "not decided" and off["decisive"] is False
    # a noisy gain whose interval reaches the margin stays undecided
    noisy = [b + d for b, d in zip(base, [0.03, -0.02, 0.01, -0.03, 0.02, -0.005], strict=True)]
    e = common.decide_verdict("better", ours=noisy, baseline_values=base, **kw)
    assert e["verdict"] == "not decided"
    # the margin only ever contradicts: a claim that ours is worse, with the same data
    w = common.decide_verdict("worse", ours=ours, baseline_values=base, expect="worse", **kw)
    assert w["verdict"] == "contradicted"
    # three seeds: contradicted but not decisive
    three = common.decide_verdict("better", ours=ours[:3], baseline_values=base[:3], **kw)
    assert three["verdict"] in ("contradicted", "not decided") and three["decisive"] is False


def test_margin_test_interval_and_p(common):
    from scipy import stats

    m = common.margin_test(0.002, 0.001, 9, 0.01)
    half = stats.t.ppf(0.975, 9) * 0.001
    assert m["low"] == pytest.approx(0.002 - half) and m["high"] == pytest.approx(0.002 + half)
    assert m["below"] is True and m["p"] == pytest.approx(stats.t.cdf(-8.0, 9))
    assert common.margin_test(0.02, 0.01, 9, 0.01)["below"] is False
    same = {"low": 0.0, "high": 0.0, "p": 0.0, "below": True}
    assert common.margin_test(0.0, 0.0, 4, 0.01) == same
    with pytest.raises(ValueError, match="margin_test needs"):
        common.margin_test(float("nan"), 0.1, 3, 0.01)


def test_stored_summaries_read_the_margin_too(common):
    kw = {"metric": "acc", "baseline": "base", "higher_is_better": True, "converged": True}
    # Welch from means and sds: 0.801 vs 0.800, sd 0.002, 10 seeds: interval below 0.008
    s = common.summary_verdict(
        "better", ours=(0.801, 0.002, 10), baseline_stats=(0.800, 0.002, 10), ddof=1, **kw
    )
    assert s["verdict"] == "contradicted" and s["decisive"] is True
    d = common.difference_verdict(
        "better", ours=0.801, baseline_value=0.8, difference=(0.001, 0.002, 10), ddof=1, **kw
    )
    assert d["verdict"] == "contradicted" and "smallest gain" in d["why"]
    wide = common.difference_verdict(
        "better", ours=0.81, baseline_value=0.8, difference=(0.01, 0.05, 10), ddof=1, **kw
    )
    assert wide["verdict"] == "not decided"


def test_holm_adjusts_in_order_and_keeps_the_input_order(common):
    # sorted 0.001, 0.01, 0.03, 0.04, 0.5 times 5, 4, 3, 2, 1, then the running maximum
    got = common.holm([0.01, 0.04, 0.03, 0.5, 0.001])
    assert got == pytest.approx([0.04, 0.09, 0.09, 0.5, 0.005])
    assert common.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert common.holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    assert common.holm([]) == []
