"""``energy_diffusion/run.py --paper-budget`` at toy size: convergence recorded per case,
``--max-hours`` pieces that resume to the uninterrupted result, and verdicts that are
decisive only for converged runs of enough seeds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import load_benchmark

#: the metrics of a case that do not depend on wall time
SCORES = ("iid_js_box", "iid_js_scoremd", "md_js_box", "md_pmf", "train_last_gain", "steps")


@pytest.fixture
def ed():
    with load_benchmark("energy_diffusion/run.py", "ed_paper_under_test") as mod:
        yield mod


def _paper(ed):
    import _energy_diffusion_paper

    return _energy_diffusion_paper


def test_flatness_is_the_house_rule_over_the_last_stage(ed):
    paper = _paper(ed)
    flat_tail = [2.0, 1.5, 1.2, 1.1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    decaying = list(np.linspace(2.0, 1.0, 10))  # best head 11/9 (epoch 8), best tail 1
    assert paper.last_stage_flatness(flat_tail) == {"train_last_gain": 0.0, "train_flat": 1.0}
    got = paper.last_stage_flatness(decaying)
    assert got["train_last_gain"] == pytest.approx((11 / 9 - 1) / (11 / 9))
    assert got["train_flat"] == 0.0
    few = paper.last_stage_flatness([2.0, 1.0])  # too few epochs to judge: not flat
    assert np.isnan(few["train_last_gain"]) and few["train_flat"] == 0.0
    # a time mixture: only the last stage's epochs count, its FP term weighted as trained
    history = [
        {"stage": s, "loss": v} for s, curve in enumerate([decaying, flat_tail]) for v in curve
    ]
    assert paper._last_stage_loss(history) == flat_tail
    stages = paper.mueller_brown_stages("both", 12, fp_weight=paper.PAPER["fp_weight"])
    n = stages[-1].epochs
    stored = {"variant": "both", "curve_dsm": [5.0] * (12 - n) + [1.0] * n, "curve_fp": [2.0] * 12}
    loss = paper._stored_last_stage_loss(stored, 12)
    assert loss == pytest.approx([1.0 + 2.0 * paper.PAPER["fp_weight"]] * n)
    plain = {"variant": "plain", "curve_dsm": [3.0] * 12, "curve_fp": [7.0] * 12}
    assert paper._stored_last_stage_loss(plain, 12) == [3.0] * 12


def _doc(flat_cases=(), seeds=5):
    """Per-seed JS values as the paper reports them: plain MD far from i.i.d., FP MD close."""
    rng = np.random.default_rng(0)
    rows = []
    for s in range(1, seeds + 1):
        for v, md in (("plain", 0.10), ("fp", 0.018)):
            case = f"mb_paper/{v}/seed{s}"
            rows += [
                {"case": case, "metric": "md_js_scoremd", "value": md + 1e-3 * rng.random()},
                {"case": case, "metric": "iid_js_scoremd", "value": 0.015 + 1e-3 * rng.random()},
                {"case": case, "metric": "train_flat", "value": float(case in flat_cases)},
            ]
    rows += [
        {"case": f"mb_paper/{v}", "metric": "md_js_scoremd", "value": 0.0} for v in ("plain", "fp")
    ]
    return {"machine": {}, "rows": rows}


def _all_cases(seeds=5):
    return {f"mb_paper/{v}/seed{s}" for s in range(1, seeds + 1) for v in ("plain", "fp")}


def test_verdicts_are_decisive_only_when_every_case_is_flat(ed):
    import _ed_verdicts

    flat = _ed_verdicts.verdicts(_doc(_all_cases()))
    assert [v["verdict"] for v in flat] == ["reproduced"] * 3
    assert all(v["decisive"] and v["converged"] for v in flat), flat
    one_not_flat = _all_cases() - {"mb_paper/fp/seed3"}
    partly = _ed_verdicts.verdicts(_doc(one_not_flat))
    assert [v["verdict"] for v in partly] == ["reproduced"] * 3
    assert not any(v["decisive"] or v["converged"] for v in partly), partly
    few = _ed_verdicts.verdicts(_doc(_all_cases(3), seeds=3))
    assert not any(v["decisive"] for v in few), few
    assert all(v["converged"] for v in few)


def _argv(tmp_path, work, name, *extra):
    return [
        "run.py",
        "--paper-budget",
        "--quick",
        "--eager",
        "--threads",
        "1",
        "--paper-seeds",
        "1",
        "--variants",
        "plain",
        "--work-dir",
        str(work),
        "--json",
        str(tmp_path / name),
        *extra,
    ]


def _prepare(work):
    """A work folder with its data and a stand-in speed record (the speed race is not what
    is tested here, and compiling its third path would take minutes)."""
    from sci_moe.data.toy import muller_brown_samples

    work.mkdir()
    data = muller_brown_samples(4000, n_walkers=20, seed=1, progress=False)
    ref = muller_brown_samples(4000, n_walkers=20, seed=2, progress=False)
    np.savez(work / "data.npz", data=data, ref=ref)
    speed = {f"{v}/{p}": 1.0 for v in ("plain", "fp") for p in ("reference", "fast", "compiled")}
    (work / "speed.json").write_text(json.dumps(speed))


def _scores(path):
    doc = json.loads(path.read_text())
    val = {(r["case"], r["metric"]): r["value"] for r in doc["rows"]}
    return doc, {m: val.get(("mb_paper/plain/seed1", m)) for m in SCORES}


def test_max_hours_stops_and_the_same_command_continues(ed, tmp_path, monkeypatch):
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    _prepare(whole)
    _prepare(pieces)
    monkeypatch.setattr("sys.argv", _argv(tmp_path, whole, "whole.json"))
    ed.main()
    ref_doc, ref = _scores(tmp_path / "whole.json")
    assert ref_doc["machine"]["complete"] is True
    assert ref["steps"] > 0 and ref["train_last_gain"] is not None

    monkeypatch.setattr("sys.argv", _argv(tmp_path, pieces, "pieces.json", "--max-hours", "1e-9"))
    ed.main()
    partial, got = _scores(tmp_path / "pieces.json")
    assert partial["machine"]["complete"] is False
    assert got["steps"] is None  # the case is not done

    # a training stopped inside the case (as a budget spent mid-stage stops it; here after
    # its first epoch): the case is not done, its checkpoint is kept, and the same command
    # continues it to the uninterrupted result
    paper = _paper(ed)
    train = paper.train
    with monkeypatch.context() as m:
        m.setattr(paper, "train", lambda *a, **k: train(*a, max_epochs=1, **k))
        m.setattr("sys.argv", _argv(tmp_path, pieces, "pieces.json"))
        ed.main()
    partial, got = _scores(tmp_path / "pieces.json")
    assert partial["machine"]["complete"] is False and got["steps"] is None
    assert (pieces / "plain_s1" / "stage1").is_dir()
    assert not (pieces / "plain_s1" / "result.json").exists()

    monkeypatch.setattr("sys.argv", _argv(tmp_path, pieces, "pieces.json"))
    ed.main()
    doc, got = _scores(tmp_path / "pieces.json")
    assert doc["machine"]["complete"] is True
    assert got == ref

    # --paper-replot draws the curves from the finished cases, trains nothing and leaves
    # the JSON alone; a case not finished is named and refused (exit code 2)
    before = (tmp_path / "pieces.json").read_text()
    plots = tmp_path / "img"
    monkeypatch.setattr(
        "sys.argv", _argv(tmp_path, pieces, "pieces.json", "--paper-replot", "--plots", str(plots))
    )
    ed.main()
    assert (plots / "energy_diffusion_mb_paper_curves.png").is_file()
    assert (tmp_path / "pieces.json").read_text() == before
    argv = _argv(tmp_path, pieces, "pieces.json", "--paper-replot", "--plots", str(plots))
    argv[argv.index("--paper-seeds") + 1] = "1,2"
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit) as exc:
        ed.main()
    assert exc.value.code == 2
