"""benchmarks/tempering/_tempering_heavy.py: section (d) of ``run.py --theory``, the claim on
degenerate gaps decided on a heavy-tailed target, and its verdict rule's three branches."""

from __future__ import annotations

import json

import pytest

from .conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def heavy():
    with load_benchmark("tempering/_tempering_heavy.py", "tempering_heavy_under_test") as mod:
        yield mod


def _cases(full, bound, rgap=None):
    pads = [10.0, 20.0, 40.0, 80.0, 160.0][: len(full)]
    rgap = rgap or [2 * b for b in bound]
    return [
        {"pad": p, "full_gap": g, "restricted_gap": r, "bound": b, "bound_full": g / 10}
        for p, g, b, r in zip(pads, full, bound, rgap, strict=True)
    ]


def test_the_verdict_rule(heavy):
    falling = [1e-1, 4e-2, 1.5e-2, 6e-3, 2e-3]
    steady = [1e-3, 1.01e-3, 1.02e-3, 1.02e-3, 1.03e-3]
    cases = _cases(falling, steady)
    v = heavy.heavy_verdict(cases, heavy.heavy_fit(cases))
    assert v["verdict"] == "reproduced" and v["decisive"] and v["p_value"] < 0.05
    # the restricted bound falls with the full gap: the restricted gap buys nothing
    cases = _cases(falling, [f / 50 for f in falling])
    assert heavy.heavy_verdict(cases, heavy.heavy_fit(cases))["verdict"] == "contradicted"
    # a full gap that barely moves: nothing degenerates, nothing to decide
    flat = [1e-2, 0.99e-2, 0.98e-2, 0.98e-2, 0.97e-2]
    cases = _cases(flat, steady)
    v = heavy.heavy_verdict(cases, heavy.heavy_fit(cases))
    assert v["verdict"] == "not decided" and not v["decisive"]
    # a bound above the exact restricted gap is not a bound: not reproduced
    cases = _cases(falling, steady, rgap=[b / 2 for b in steady])
    assert heavy.heavy_verdict(cases, heavy.heavy_fit(cases))["verdict"] == "not decided"


def test_one_padding_exactly(heavy):
    c = heavy.heavy_case(10.0)
    assert 0 < c["bound"] <= c["restricted_gap"] and 0 < c["bound_full"] <= c["full_gap"]
    assert c["omega_states"] < c["states"] and 0.5 < c["omega_mass"] < 1.0


def test_the_stored_run_holds_section_d_and_its_verdict(heavy):
    doc = json.loads((BENCH / "tempering" / "results" / "tempering_theory.json").read_text())
    stored = doc["details"]["heavy"]
    assert [c["pad"] for c in stored["cases"]] == list(heavy.HEAVY["pads"])
    again = heavy.heavy_verdict(stored["cases"], heavy.heavy_fit(stored["cases"]))
    assert doc["verdicts"][1] == again
