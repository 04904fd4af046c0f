"""benchmarks/fingerprints/run.py: the flatness rule, the stratified pool, the word rate and
the verdict rule re-derived from the stored JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("fingerprints/run.py", "fingerprints_run") as mod:
        yield mod


def _curve(values):
    return [[50 * (i + 1), v] for i, v in enumerate(values)]


def test_flat_rule(bench):
    assert bench.flat(_curve([0.5, 0.7, 0.8, 0.80, 0.801]))  # 0.1 % better over the last 20 %
    assert not bench.flat(_curve([0.5, 0.6, 0.7, 0.8, 0.9]))
    assert bench.flat(_curve([9.0, 5.0, 4.0, 3.0, 3.01]), higher_is_better=False)
    assert not bench.flat(_curve([9.0, 5.0, 4.0, 3.5, 3.0]), higher_is_better=False)
    assert not bench.flat(_curve([1.0, 1.0, 1.0, 1.0]))  # fewer than five evaluations


@pytest.mark.parametrize("name", ["fingerprints.json", "fingerprints_quick.json"])
def test_stored_convergence_rows_follow_the_rule(bench, name):
    doc = json.loads((BENCH / "fingerprints" / "results" / name).read_text())
    assert bench.rejudge(json.loads(json.dumps(doc))) == doc


def test_stratified_pool_takes_the_shares(bench):
    from sci_moe.language.provenance import SequenceSet

    groups = [f"news:{i}" for i in range(20)] + [f"T{i}" for i in range(20)]
    groups += [f"newsgroups:{i}" for i in range(20)]
    groups = groups * 2
    labels = np.repeat([0, 1], 60)
    data = SequenceSet(tuple("x" for _ in groups), labels, tuple(groups), ("a", "b"))
    idx = bench.stratified_pool(data, 20, [0.5, 0.25, 0.25], seed=0)
    assert idx.size == 40 and np.unique(idx).size == 40
    src = [bench.document_source(data.groups[i]) for i in idx if labels[i] == 0]
    assert src.count("wiki") == 10 and src.count("news") == 5 and src.count("newsgroups") == 5


def test_word_rate(bench):
    vocab = {"the", "river", "city"}
    assert bench.word_rate(["The river, the city."], vocab) == 1.0
    assert bench.word_rate(["the xqzt"], vocab) == 0.5
    assert bench.word_rate(["1 2 ."], vocab) == 0.0


def test_stored_verdicts_follow_the_rule(bench):
    path = BENCH / "fingerprints" / "results" / "fingerprints_quick.json"
    doc = json.loads(path.read_text())
    again = bench.verdicts(doc)
    assert [v["verdict"] for v in again] == [v["verdict"] for v in doc["verdicts"]]
    assert len(again) == 9 and not any(v["decisive"] for v in again)  # quick: not converged
