"""``benchmarks/energy_diffusion/vs_scoremd.py``, the same-host ScoreMD comparison:
arguments, child processes (built in its helper
``benchmarks/energy_diffusion/_energy_diffusion.py``) and row shapes (no JAX, no network:
the ScoreMD side is a stand-in script)."""

from __future__ import annotations

import argparse
import sys

import pytest

from tests.benchmarks.conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def eds():
    with load_benchmark(
        "energy_diffusion/vs_scoremd.py", "bench_energy_diffusion_vs_scoremd"
    ) as mod:
        yield mod


@pytest.fixture(scope="module")
def helper():
    with load_benchmark(
        "energy_diffusion/_energy_diffusion.py", "bench_energy_diffusion_helper"
    ) as mod:
        yield mod


@pytest.fixture(scope="module")
def driver():
    with load_benchmark("energy_diffusion/scoremd_driver.py", "bench_scoremd_driver") as mod:
        yield mod


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "src" / "scoremd").mkdir(parents=True)
    return tmp_path


def test_scoremd_args_come_in_pairs(eds, checkout):
    with pytest.raises(SystemExit, match="both --scoremd-src and --scoremd-python"):
        eds.main(["--scoremd-src", str(checkout)])
    with pytest.raises(SystemExit, match="both"):
        eds.main(["--scoremd-python", sys.executable])


def test_scoremd_args_checked(eds, checkout, tmp_path):
    with pytest.raises(SystemExit, match="no src/scoremd"):
        eds.main(["--scoremd-src", str(tmp_path / "none"), "--scoremd-python", sys.executable])
    not_exe = tmp_path / "python"
    not_exe.write_text("")
    with pytest.raises(SystemExit, match="not an executable"):
        eds.main(["--scoremd-src", str(checkout), "--scoremd-python", str(not_exe)])
    base = ["--scoremd-src", str(checkout), "--scoremd-python", sys.executable]
    with pytest.raises(SystemExit, match="--epochs must be >= 2"):
        eds.main([*base, "--epochs", "1"])
    with pytest.raises(SystemExit, match="--frames"):
        eds.main([*base, "--frames", "10"])


def test_thread_list(eds):
    assert eds._parse_threads("1,2") == [1, 2]
    for bad in ("", "0", "one", "1,-2"):
        with pytest.raises(SystemExit):
            eds._parse_threads(bad)


def test_contestant_commands_share_threads_and_recipe(helper, checkout):
    args = argparse.Namespace(
        epochs=3, frames=1280, seed=1, scoremd_src=checkout, scoremd_python=sys.executable
    )
    cmd, env = helper.contestant_cmd("scoremd", "fp", 1, args)
    assert cmd[:2] == [sys.executable, str(BENCH / "energy_diffusion" / "scoremd_driver.py")]
    assert cmd[cmd.index("--variant") + 1] == "fp" and cmd[cmd.index("--src") + 1] == str(checkout)
    assert "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
    assert "XLA_FLAGS" not in helper.contestant_cmd("scoremd", "fp", 2, args)[1]
    assert "multi_thread_eigen=false" in env["XLA_FLAGS"]
    assert env["OMP_NUM_THREADS"] == "1"
    ours, env2 = helper.contestant_cmd("ours", "fp", 2, args)
    # our side re-runs the comparison script itself, not the helper that builds the command
    assert ours[:2] == [sys.executable, str(BENCH / "energy_diffusion" / "vs_scoremd.py")]
    assert ours[ours.index("--child-ours") + 1] == "fp"
    assert ours[ours.index("--threads") + 1] == "2" and env2["OMP_NUM_THREADS"] == "2"
    assert "--cpp-wrapper" not in ours
    assert "--cpp-wrapper" in helper.contestant_cmd("ours_cpp_wrapper", "fp", 2, args)[0]
    for flag in ("--epochs", "--frames", "--seed"):  # the same recipe on both sides
        assert cmd[cmd.index(flag) + 1] == ours[ours.index(flag) + 1]
    with pytest.raises(ValueError):
        helper.contestant_cmd("other", "fp", 1, args)


def test_run_child_parses_and_fails_loudly(helper, tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text(
        "print('noise')\n"
        "print('@@scoremd-result ' + __import__('json').dumps("
        "{'epoch_seconds': [3.0, 1.0, 1.2], 'steps_per_epoch': 100}))\n"
    )
    res = helper.run_child([sys.executable, str(ok)], {}, None, timeout=60)
    assert res["epoch_seconds"] == [3.0, 1.0, 1.2]
    assert res["wall_s"] > 0 and res["cpu_s"] >= 0
    summ = helper.summary(res)
    assert summ["ms"] == pytest.approx(11.0)  # median of the epochs after the first
    assert summ["compile_s"] == pytest.approx(1.9)
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(3)\n")
    with pytest.raises(SystemExit, match="exit 3"):
        helper.run_child([sys.executable, str(bad)], {}, None, timeout=60)
    silent = tmp_path / "silent.py"
    silent.write_text("print('no result')\n")
    with pytest.raises(SystemExit, match="failed"):
        helper.run_child([sys.executable, str(silent)], {}, None, timeout=60)


def _s(ms, compile_s=2.0, cpw=1.0):
    return {"ms": ms, "compile_s": compile_s, "cpu_per_wall": cpw}


def test_same_host_rows(eds):
    rounds = {
        "t1/ours/plain": [_s(1.0), _s(2.0), _s(4.0)],
        "t1/scoremd/plain": [_s(3.0, 3.0), _s(1.0, 3.0), _s(2.0, 3.0)],
        "t1/ours_cpp_wrapper/plain": [_s(0.5), _s(1.0), _s(2.0)],
        "t1/ours/fp": [_s(6.0)],
        "t1/scoremd/fp": [_s(4.0)],
    }
    rows = eds._same_host_rows(rounds)
    assert all(r.unit and r.metric and isinstance(r.value, float) for r in rows)
    assert all((r.vs is None) == (r.ratio is None) for r in rows)
    by = {(r.case, r.metric): r for r in rows}
    ours = by[("t1/ours/plain", "ms_per_step")]
    assert ours.value == 2.0 and ours.vs == "t1/scoremd/plain"
    # the median of the per-round ratios (3, 0.5, 0.5), not the ratio of the medians (1)
    assert ours.ratio == 0.5
    assert by[("t1/scoremd/plain", "ms_per_step")].value == 2.0
    cpp = by[("t1/ours_cpp_wrapper/plain", "ms_per_step")]
    assert cpp.vs == "t1/ours/plain" and cpp.ratio == 2.0  # ours ms / cpp ms: 2, 2, 2
    full = by[("t1/ours/plain", "full_run_s")]
    assert full.value == pytest.approx(2.0 + 2.0 * eds.FULL_RUN_STEPS / 1e3, abs=0.1)
    assert full.ratio == pytest.approx(
        (3.0 + 2.0 * eds.FULL_RUN_STEPS / 1e3) / full.value, abs=1e-3
    )
    assert by[("t1/ours/fp", "ms_per_step")].ratio == pytest.approx(4.0 / 6.0, abs=1e-3)
    assert ("t1/ours_cpp_wrapper/fp", "ms_per_step") not in by
    assert [r.case for r in rows].index("t1/ours/plain") < [r.case for r in rows].index(
        "t1/ours/fp"
    )
    with pytest.raises(ValueError, match="both ours and scoremd"):
        eds._same_host_rows({"t1/ours/plain": [_s(1.0)]})


def test_driver_checks_its_arguments(driver, tmp_path):
    with pytest.raises(SystemExit, match="no src/scoremd"):
        driver.main(["--src", str(tmp_path)])
    (tmp_path / "src" / "scoremd").mkdir(parents=True)
    with pytest.raises(SystemExit, match="--epochs"):
        driver.main(["--src", str(tmp_path), "--epochs", "0"])


def test_driver_stubs_only_what_is_missing(driver):
    finder = driver._StubFinder(("sci_moe_absent_pkg",))
    sys.meta_path.append(finder)
    try:
        from sci_moe_absent_pkg.sub import thing  # noqa: F401  (a stand-in)

        assert finder.used == {"sci_moe_absent_pkg"}
        assert finder.find_spec("json") is None
    finally:
        sys.meta_path.remove(finder)
        for name in [m for m in sys.modules if m.startswith("sci_moe_absent_pkg")]:
            del sys.modules[name]
