"""``benchmarks/md/run.py``'s first-contact rows (issue 40): time to first step and the
default-settings sampling rate, quiet and beside a busy process, each against OpenMM."""

from __future__ import annotations

import json
import os

import pytest

from tests.benchmarks.conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("md/run.py", "md_bench") as mod:
        yield mod


def test_user_env_has_no_thread_settings(bench, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OPENMM_CPU_THREADS", "1")
    env = bench._user_env()
    assert "OMP_NUM_THREADS" not in env and "OPENMM_CPU_THREADS" not in env
    assert env["PATH"] == os.environ["PATH"]


def test_busy_process_runs_only_inside_the_block(bench):
    with bench.BusyProcess() as busy:
        assert busy.proc.poll() is None
    assert busy.proc.poll() is not None


def test_first_step_of_sci_moe_md_run(bench, tmp_path):
    seconds = bench.first_step_sci_moe(tmp_path / "o")
    assert seconds > 0
    assert (tmp_path / "o" / "log.csv").read_text().count("\n") >= 2


def test_stored_run_holds_the_rows_against_openmm():
    rows = json.loads((BENCH / "md" / "results" / "md_first_contact.json").read_text())["rows"]
    by_metric = {}
    for r in rows:
        by_metric.setdefault(r["metric"], []).append(r)
    first = [r for r in by_metric["time to first step"] if r["vs"]]
    assert first and first[0]["vs"].startswith("openmm script")
    rates = [r for r in by_metric["ns/day (all walkers)"] if r["case"].startswith("sci-moe")]
    assert {r["vs"] for r in rates} == {
        "openmm amber CPU, default threads",
        "openmm amber CPU, default threads + busy process",
    }
    assert all(r["ratio"] == pytest.approx(r["value"] / _value(rows, r["vs"])) for r in rates)


def _value(rows, case):
    return next(r["value"] for r in rows if r["case"] == case and r["metric"] == "ns/day")
