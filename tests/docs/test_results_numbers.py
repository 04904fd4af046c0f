"""Numbers quoted by hand on the results pages agree with the benchmark JSON they cite.

The tables under ``docs/results/generated/`` are rendered from ``benchmarks/results/*.json``
by ``docs/_results.py``; the hand-written pages ``docs/results/*.rst`` quote figures in prose
and tables. Every decimal number with at least two significant digits on those pages (outside
code blocks) must be accounted for, in one of four ways:

1. it equals, at its printed precision, a ``value`` or ``ratio`` (or 100 x one, a percentage)
   of a row of one of the JSON files the page names (:func:`test_every_number_is_accounted_for`);
2. it is bound to one row in :data:`CLAIMS` (page, quoted string, JSON, case, metric), checked
   exactly (:func:`test_claims_match_their_row`);
3. it is a statistic over seed rows in :data:`DERIVED` (mean or population std of a metric
   over the cases with a prefix), recomputed from the JSON (:func:`test_derived_numbers`);
4. it is listed in :data:`NOT_FROM_JSON` with the reason (the paper's own number, a setup
   constant, a run that is not stored, or arithmetic on other quoted numbers).

A number added to a page without one of these fails the test: add the JSON row (preferred),
or bind or list it here. Integers (seeds, sizes, counts) are not checked.
"""

from __future__ import annotations

import json
import pathlib
import re
from decimal import Decimal

import numpy as np
import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
RESULTS = DOCS.parent / "benchmarks" / "results"
PAGES = sorted(p for p in (DOCS / "results").glob("*.rst") if p.name != "index.rst")

#: A decimal number, not part of a word, an arXiv id or a version string.
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*\.\d+(?:e[-+]?\d+)?(?![\w.]*\w)")


def _rows(name: str) -> list[dict]:
    return json.loads((RESULTS / name).read_text())["rows"]


def _cited_json(text: str) -> list[str]:
    return sorted({n for n in re.findall(r"([a-z_0-9]+\.json)", text) if (RESULTS / n).is_file()})


def _prose_numbers(text: str):
    """(line number, quoted string) of every checked number outside code blocks."""
    in_code = False
    for i, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith((".. code-block", ".. math::")) or line.rstrip().endswith("::"):
            in_code = True
            continue
        if in_code and line and not line[0].isspace():
            in_code = False
        if in_code:
            continue
        for m in NUMBER.finditer(line):
            s = m.group(0)
            if len(s.replace("-", "").replace(".", "").replace(",", "").lstrip("0")) >= 2:
                yield i, s


def _agrees(quoted: str, value: float, scale: float = 1.0) -> bool:
    """``value * scale`` rounds to ``quoted`` (half a unit of its last digit, plus float slack)."""
    d = Decimal(quoted.replace(",", ""))
    half = 0.5 * 10.0 ** d.as_tuple().exponent
    return abs(value * scale - float(d)) <= half * (1 + 1e-9) + 1e-12


def _matches_any(quoted: str, names: list[str]) -> bool:
    for name in names:
        for r in _rows(name):
            for v in (r.get("value"), r.get("ratio")):
                if isinstance(v, int | float) and (_agrees(quoted, v) or _agrees(quoted, v, 100)):
                    return True
    return False


#: (page, quoted string, JSON file, case, metric, field, scale): numbers bound to one row.
CLAIMS = [
    (
        "self_distillation.rst",
        "0.3502 / 0.3471 (-0.4)",
        "self_distillation.json",
        "bce 0-SD alpha=0.25",
        ("error", "sim_error", "sim_z"),
    ),
    (
        "self_distillation.rst",
        "0.3428 / 0.3387 (-0.6)",
        "self_distillation.json",
        "bce 1-SD hard alpha=0.25",
        ("error", "sim_error", "sim_z"),
    ),
    (
        "self_distillation.rst",
        "0.2431 / 0.2287 (-3.9)",
        "self_distillation.json",
        "bce 0-SD alpha=1",
        ("error", "sim_error", "sim_z"),
    ),
    (
        "tempering.rst",
        "RWMH      0.6226 / 0.3269 / 0.0505  0.352    0.0481",
        "tempering.json",
        "muller-brown kT=10 RWMH",
        (None, "population_B", None, "max_population_error", "population_B_stderr"),
    ),
    (
        "tempering.rst",
        "ST+RWMH   0.9709 / 0.0253 / 0.0038  0.00347  0.00121",
        "tempering.json",
        "muller-brown kT=10 ST+RWMH",
        (None, "population_B", None, "max_population_error", "population_B_stderr"),
    ),
    (
        "tempering.rst",
        "ST+MALA   0.9726 / 0.0240 / 0.0034  0.00209  0.00120",
        "tempering.json",
        "muller-brown kT=10 ST+MALA",
        (None, "population_B", None, "max_population_error", "population_B_stderr"),
    ),
]

#: (page, quoted string, JSON file, case prefix, metric, statistic): "mean" or "std"
#: (population std, ddof=0) of ``metric`` over the cases starting with the prefix.
DERIVED = [
    ("energy_diffusion.rst", q, "energy_diffusion_aldp.json", prefix, metric, stat)
    for prefix, stats in (
        (
            "aldp/moe_seed",
            (("0.094", "0.004"), ("0.196", "0.027"), ("1.69", "0.12"), ("3.71", "0.63")),
        ),
        (
            "aldp/both_seed",
            (("0.095", "0.005"), ("0.104", "0.003"), ("1.67", "0.11"), ("1.44", "0.08")),
        ),
    )
    for metric, (mean, std) in zip(("iid_js", "md_js", "iid_pmf", "md_pmf"), stats, strict=True)
    for q, stat in ((mean, "mean"), (std, "std"))
]

_GAUSS_TABLE = (
    "estimate (mode weight) and err/se = abs err / stderr of the row; the JSON stores abs err "
    "and stderr"
)
_MB_TABLE = (
    "P(A), P(C) (only P(B) is stored), err/se = |P(B) - exact| / se(B), and state changes per "
    "chain (not stored)"
)

#: page -> {quoted string: why it is not (directly) a JSON figure}.
NOT_FROM_JSON: dict[str, dict[str, str]] = {
    "fedlease.rst": {
        "2509.15087": "arXiv id",
        "3.2": "section number of the paper",
        "87.76": "the paper's GLUE average (FedLEASE)",
        "82.23": "the paper's GLUE average (FedIT)",
        "84.60": "the paper's GLUE average (FedSA)",
        "5.53": "the paper's headline gain (87.76 - 82.23)",
        "3.16": "arithmetic on the paper's numbers (87.76 - 84.60)",
        "2.3": "ratio of two JSON rows (fedlease / fedit bytes down per round)",
    },
    "mome.rst": {"2510.04136": "arXiv id"},
    "moe_layer.rst": {
        "1.08": "development microbenchmark of the padded bmm (not stored; the page says so)",
        "1.32": "development microbenchmark of the padded bmm (not stored; the page says so)",
    },
    "omni_expert.rst": {
        "0.797": "the paper's STOI (PI, LSTM, Table 2)",
        "0.807": "the paper's STOI (OE^p, LSTM, Table 2)",
        "0.836": "the paper's STOI (OE^k, LSTM, Table 2)",
        "0.819": "the paper's Table 3 (OE^p GRU+A, no transform)",
        "0.826": "the paper's Table 3 (shift)",
        "0.829": "the paper's Table 3 (scale, both)",
        "109.45": "the paper's MMACs (OE, App. A.4)",
        "109.44": "the paper's MMACs (PI, App. A.4)",
    },
    "energy_diffusion.rst": {
        "2506.17139": "arXiv id",
        "0.85": "ScoreMD's plain ms/step (issue 28; also the speed JSON's scoremd/plain row)",
        "3.85": "ScoreMD's FP ms/step (issue 28; also the speed JSON's scoremd/fp row)",
        "0.55": "ratio of two JSON rows (train_cpu_s / train_wall_s, plain seed 1)",
        "0.49": "ratio of two JSON rows (train_cpu_s / train_wall_s, fp seed 1)",
        "2.15": "ratio of two JSON rows (md_js_scoremd of plain seed 1 / ScoreMD's plain)",
        "-0.558": "setup: Muller-Brown shift",
        "1.442": "setup: Muller-Brown shift",
        "0.995": "setup: EMA decay",
        "-1.8": "setup: histogram box",
        "36.8": "setup: reference trajectory length",
        "10.6": "setup: normalisation factor",
        "2.13": "software version",
        "0.0122": "the paper's numbers",
        "0.0448": "the paper's numbers",
        "0.111": "the paper's numbers",
        "0.504": "the paper's numbers",
        "0.0046": "derived: bond W1 mean over seeds (bond rows not bound in DERIVED yet)",
        "6.4": "rounded prose (pm) of bond W1 rows",
        "7.45": "setup: normalisation factor",
    },
    "fingerprints.rst": {
        "2412.02857": "arXiv id",
        "0.333": "chance level of a 3-way task (1/3)",
    },
    "mvcge.rst": {
        "0.017": "Monte Carlo s.e. of the Bayes oracle, printed by the run, not a JSON row",
        "1.39": "ln 4, the entropy of uniform use of four experts",
    },
    "mxd.rst": {"2505.21364": "arXiv id"},
    "routing_mamba.rst": {
        "2506.18145": "arXiv id",
    },
    "alanine_energy_model.rst": {
        "-1.4": "read off the figure (phi of the MD basin), prose",
        "-0.7": "read off the figure (psi of alpha_R), prose",
        "36.8": "setup: reference trajectory length",
        "0.39": "a separate timing of one FP step (not stored)",
        "0.04": "a separate timing of one DSM step (not stored); also the issue's target",
    },
    "md.rst": {
        "3.9": "range over several rows of md.json (prose, rounded)",
        "0.034": "amber step time from a separate timing, not a JSON row (not verified)",
    },
    "routing_science.rst": {
        "2504.12463": "arXiv id",
        "2505.22323": "arXiv id",
        "0.29": "setup: corpus size",
        "10.4": "wall time of the run (log)",
        "0.65": "bias-balancer setting from the run configuration",
        "0.95": "bias-balancer setting from the run configuration",
        "-15.0": "derived: relative change in % of two JSON rows",
        "4.7": "derived: relative change in % of two JSON rows",
        "1.8": "derived: relative change in % of two JSON rows",
        "13.431": "per-seed fine-tuning values, not stored in routing_science.json",
        "13.315": "per-seed fine-tuning values, not stored in routing_science.json",
        "13.723": "per-seed fine-tuning values, not stored in routing_science.json",
        "13.727": "per-seed fine-tuning values, not stored in routing_science.json",
        "11.805": "per-seed fine-tuning values, not stored in routing_science.json",
        "10.777": "per-seed fine-tuning values, not stored in routing_science.json",
        "10.642": "per-seed fine-tuning values, not stored in routing_science.json",
        "10.362": "per-seed fine-tuning values, not stored in routing_science.json",
        "12.529": "per-seed fine-tuning values, not stored in routing_science.json",
        "12.681": "per-seed fine-tuning values, not stored in routing_science.json",
        "12.415": "per-seed fine-tuning values, not stored in routing_science.json",
        "10.544": "per-seed fine-tuning values, not stored in routing_science.json",
        "11.115": "per-seed fine-tuning values, not stored in routing_science.json",
        "10.289": "per-seed fine-tuning values, not stored in routing_science.json",
        "12.955": "per-seed fine-tuning values, not stored in routing_science.json",
        "13.192": "per-seed fine-tuning values, not stored in routing_science.json",
        "13.299": "per-seed fine-tuning values, not stored in routing_science.json",
        "12.669": "per-seed fine-tuning values, not stored in routing_science.json",
        "12.688": "per-seed fine-tuning values, not stored in routing_science.json",
        "11.901": "per-seed fine-tuning values, not stored in routing_science.json",
        "11.331": "per-seed fine-tuning values, not stored in routing_science.json",
        "12.441": "per-seed fine-tuning values, not stored in routing_science.json",
        "10.711": "per-seed fine-tuning values, not stored in routing_science.json",
        "10.184": "per-seed fine-tuning values, not stored in routing_science.json",
        "2.2655": "per-seed losses, not stored in routing_science.json",
        "2.2591": "per-seed losses, not stored in routing_science.json",
        "2.4868": "per-seed losses, not stored in routing_science.json",
        "2.4811": "per-seed losses, not stored in routing_science.json",
        "2.4650": "per-seed losses, not stored in routing_science.json",
        "2.4564": "per-seed losses, not stored in routing_science.json",
        "-1.85": "the paper's number",
        "23.8": "the paper's number",
    },
    "vrp.rst": {
        "2510.21453": "arXiv id",
        "0.14": "software version (PyVRP 0.14 ILS)",
        "0.873": "the paper's CVRP50 gap of MoSES(CaDA), quoted as the claim",
    },
    "self_distillation.rst": {
        "2501.16226": "arXiv id",
        "0.2402": "a separate 40-seed rerun, not stored in the JSON",
        "0.0024": "a separate 40-seed rerun, not stored in the JSON",
        "0.1866": "a separate 40-seed rerun, not stored in the JSON",
        "0.2868": "the authors' notebook",
        "0.2943": "the authors' notebook",
        "1.83": "derived: 0-SD error / noiseless error",
        "1.35": "derived: 0-SD error / noiseless error",
        "0.0850": "closed-form noiseless error, not a JSON row",
        "-0.0585": "derived: differences of quoted errors",
        "-0.0106": "derived: differences of quoted errors",
        "-0.0260": "derived: differences of quoted errors",
        "-0.0015": "derived: differences of quoted errors",
        "0.2992": "the pre-fix optimiser result (superseded run)",
        "0.2709": "the pre-fix optimiser result (superseded run)",
        "0.244": "a side check with another grid, not stored",
        "0.2875": "the authors' notebook (Delta = 1 setting)",
        "0.3481": "the authors' notebook (Delta = 1 setting)",
        "0.2873": "the authors' notebook (Delta = 1 setting)",
        "0.3458": "the authors' notebook (Delta = 1 setting)",
        "0.2434": "the authors' notebook (Delta = 1 setting)",
        "0.2464": "the authors' notebook (Delta = 1 setting)",
        "63.8": "corpus statistic (sci_moe.data.newsgroups), not a benchmark row",
    },
    "spice.rst": {
        "298.15": "setup: temperature of the Boltzmann averages",
        "1.79": "arithmetic: ratio of the two parameter counts quoted in the table",
        "0.66": "a separate profile of the same batches, not stored",
        "1.5": "arithmetic: 5 % of the 30 ensemble-vs-single tests",
    },
    "tempering.rst": {
        "0.693": _GAUSS_TABLE,
        "1.04": _GAUSS_TABLE,
        "0.699": _GAUSS_TABLE,
        "0.63": _GAUSS_TABLE,
        "0.611": _GAUSS_TABLE,
        "2.66": _GAUSS_TABLE,
        "0.696": _GAUSS_TABLE,
        "0.46": _GAUSS_TABLE,
        "0.702": _GAUSS_TABLE,
        "1.7": "setup: proposal scale",
        "0.75": "setup: proposal scale",
        "10.6": "setup: barrier height",
        "0.9744": "exact populations by quadrature, not a JSON row",
        "0.0037": "exact populations by quadrature, not a JSON row",
        "6.34": _MB_TABLE,
        "53.3": _MB_TABLE,
        "2.82": _MB_TABLE,
        "17.0": _MB_TABLE,
        "0.5377": _MB_TABLE,
        "0.0660": _MB_TABLE,
        "7.07": _MB_TABLE,
        "42.8": _MB_TABLE,
        "1.74": _MB_TABLE,
        "10.9": _MB_TABLE,
        "0.6554": _MB_TABLE,
        "0.0510": _MB_TABLE,
        "5.77": _MB_TABLE,
        "21.5": _MB_TABLE,
        "0.9724": _MB_TABLE,
        "1.31": _MB_TABLE,
        "17.4": _MB_TABLE,
        "0.54": "prose range of per-chain values, not stored",
        "0.66": "prose range of per-chain values, not stored",
        "1.3": "derived: err/se of the ST+MALA/ST+BAOAB rows",
        "0.0211": "a separate timestep check, not in the JSON (the page says so)",
        "0.0228": "a separate timestep check, not in the JSON (the page says so)",
        "0.0018": "a separate timestep check, not in the JSON (the page says so)",
        "0.102": "visit fractions from the run log, not stored",
        "0.016": "prose range of the running population, not stored",
        "36.8": "reference trajectory length (shipped file)",
    },
}


def _bound() -> dict[str, set[str]]:
    """Numbers of each page covered by CLAIMS and DERIVED."""
    out: dict[str, set[str]] = {}
    for page, quoted, *_ in CLAIMS:
        out.setdefault(page, set()).update(m.group(0) for m in NUMBER.finditer(quoted))
    for page, quoted, *_ in DERIVED:
        out.setdefault(page, set()).add(quoted)
    return out


def unaccounted(page: pathlib.Path) -> list[str]:
    """``line: number`` of every number of ``page`` that nothing above accounts for."""
    text = page.read_text(encoding="utf-8")
    names = _cited_json(text)
    skip = set(NOT_FROM_JSON.get(page.name, {})) | _bound().get(page.name, set())
    return [
        f"{page.name}:{i}: {s}"
        for i, s in _prose_numbers(text)
        if s not in skip and not _matches_any(s, names)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_number_is_accounted_for(page):
    bad = unaccounted(page)
    assert not bad, (
        "numbers on the results page agree with no row of the JSON it cites; fix the number, "
        "or bind it in CLAIMS/DERIVED, or list it in NOT_FROM_JSON with a reason:\n"
        + "\n".join(bad)
    )


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c[0]}:{c[3]}")
def test_claims_match_their_row(claim):
    page, quoted, name, case, metrics = claim
    assert quoted in (DOCS / "results" / page).read_text(encoding="utf-8"), (page, quoted)
    numbers = [m.group(0) for m in NUMBER.finditer(quoted)]
    assert len(numbers) == len(metrics), (quoted, metrics)
    rows = {r["metric"]: r["value"] for r in _rows(name) if r["case"] == case}
    for q, metric in zip(numbers, metrics, strict=True):
        if metric is not None:
            assert metric in rows, f"{name} has no row ({case!r}, {metric!r})"
            assert _agrees(q, rows[metric]), (
                f"{page}: {q} but {name} {case} {metric} = {rows[metric]}"
            )


@pytest.mark.parametrize("item", DERIVED, ids=lambda d: f"{d[0]}:{d[3]}:{d[4]}:{d[5]}")
def test_derived_numbers(item):
    page, quoted, name, prefix, metric, stat = item
    assert quoted in (DOCS / "results" / page).read_text(encoding="utf-8"), (page, quoted)
    vals = [
        r["value"] for r in _rows(name) if r["case"].startswith(prefix) and r["metric"] == metric
    ]
    assert len(vals) >= 2, f"{name}: fewer than two {prefix}* rows of {metric}"
    got = float(np.mean(vals)) if stat == "mean" else float(np.std(vals))
    assert _agrees(quoted, got), f"{page}: {quoted} but the {stat} of {prefix}* {metric} is {got}"


def test_not_from_json_entries_still_appear():
    """A listed exemption whose number left the page is stale: remove it."""
    for page, entries in NOT_FROM_JSON.items():
        text = (DOCS / "results" / page).read_text(encoding="utf-8")
        for quoted in entries:
            assert quoted in text, f"{page}: {quoted!r} no longer on the page; drop it here"


def test_results_pages_cite_their_json():
    for page in PAGES:
        assert _cited_json(page.read_text(encoding="utf-8")), f"{page.name} cites no JSON file"
