"""benchmarks/moe_layer/run.py --grid-peers (``_grid_peers.py``): transformers' grouped_mm
experts raced at every grid case besides the eager block, written in pieces, with verdicts."""

import json
import sys

import pytest

from tests.benchmarks.conftest import load_benchmark, refused

CASES = ["T=16,d=8,E=4,k=2,float32", "T=16,d=8,E=4,k=1,bfloat16"]
GROUPED, EAGER = "transformers grouped_mm", "transformers eager"


@pytest.fixture(scope="module")
def run():
    with load_benchmark("moe_layer/run.py", "moe_layer_run_grid_peers_under_test") as mod:
        yield mod


@pytest.fixture(scope="module")
def peers(run):
    return sys.modules["_grid_peers"]


def _argv(path, *extra):
    cases = [a for c in CASES for a in ("--case", c)]
    return ["--grid-peers", *cases, "--repeats", "2", "--json", str(path), *extra]


@pytest.fixture(scope="module")
def straight(run, tmp_path_factory):
    path = tmp_path_factory.mktemp("grid_peers") / "straight.json"
    assert run.main(_argv(path)) == 0
    return json.loads(path.read_text())


def _keys(doc):
    return {(r["case"], r["metric"], r["vs"]) for r in doc["rows"]}


def test_every_case_has_the_grouped_mm_ratio(straight):
    assert straight["complete"] and straight["machine"]["cases_not_run"] == []
    assert straight["machine"]["grouped_mm_not_run"] == {}
    for label in CASES:
        vs = {
            r["vs"][len(label) + 1 :]: r["ratio"]
            for r in straight["rows"]
            if r["case"] == f"{label} sci-moe" and r["vs"]
        }
        assert {GROUPED, EAGER, "dense"} <= set(vs)
        assert vs[GROUPED] > 0
        for who in ("sci-moe", GROUPED, EAGER):
            metrics = {r["metric"] for r in straight["rows"] if r["case"] == f"{label} {who}"}
            assert {"tokens_per_s repeat 0", "tokens_per_s repeat 1"} <= metrics
    claims = [v["claim"] for v in straight["verdicts"]]
    assert any(c.endswith("float32, every d") for c in claims)
    assert all("reading: " in v["why"] for v in straight["verdicts"])


def test_resume_gives_the_same_rows(run, straight, tmp_path, capsys):
    path = tmp_path / "pieces.json"
    assert run.main(_argv(path, "--stop-after", "1")) == 0
    first = json.loads(path.read_text())
    assert not first["complete"] and first["machine"]["cases_not_run"] == CASES[1:]
    assert run.main(_argv(path, "--resume")) == 0
    done = json.loads(path.read_text())
    assert done["complete"] and [len(p["cases"]) for p in done["machine"]["pieces"]] == [1, 1]
    kept = [r for r in done["rows"] if r["case"].startswith(CASES[0] + " ")]
    assert kept == [r for r in first["rows"] if r["case"].startswith(CASES[0] + " ")]
    assert _keys(done) == _keys(straight)
    assert run.main(["--verdicts-only", str(path)]) == 0  # the grid-peers rule, not hf-peers'
    assert json.loads(path.read_text())["verdicts"] == done["verdicts"]
    with refused(capsys, r"other settings \(repeats: \d+ -> 3\); pass the same"):
        run.main(_argv(path, "--resume", "--repeats", "3"))


def test_grouped_mm_that_cannot_run_is_recorded(run, peers, monkeypatch):
    lib = sys.modules["_moe_layer"]

    def fails(*args, **kwargs):
        raise RuntimeError("no kernel for this dtype")

    monkeypatch.setattr(lib, "peer_step", fails)
    case = lib.parse_label(CASES[0])
    times = lib.measure(case, seed=0, repeats=2, grouped_mm=True)
    assert GROUPED not in times
    assert "no kernel" in times["_notes"]["grouped_mm_not_run"]
    assert not [r for r in peers.case_rows(case, times) if r.vs and r.vs.endswith(GROUPED)]


def _doc(peers, sci, grouped):
    runs = {}
    for d, (s, g) in zip((64, 128), zip(sci, grouped, strict=True), strict=True):
        runs[f"T=256,d={d},E=8,k=2,float32"] = {
            "sci-moe": s,
            "dense": s,
            "transformers": s,
            GROUPED: g,
            "_paths": ["grouped_mm", "bmm"],
            "_notes": {},
        }
    rows = []
    for label, times in runs.items():
        rows += [r.__dict__ for r in peers.case_rows(peers.parse_label(label), times)]
    return {"runs": runs, "rows": rows}


def test_verdict_rule(peers):
    fast = _doc(peers, [[1.0, 1.1, 1.0], [2.0, 2.1, 2.0]], [[2.0, 2.1, 2.2], [4.0, 4.1, 4.3]])
    found = {v["claim"].rsplit(" ", 2)[-2:][-1]: v for v in peers.verdicts(fast)}
    assert found["d"]["verdict"] == "reproduced"  # "float32, every d": paired over 2 cases
    assert "reading: faster" in found["d"]["why"] and found["d"]["seeds"] == 2
    level = _doc(peers, [[1.0, 1.1, 1.0], [2.0, 2.1, 2.0]], [[1.01, 1.09, 1.0], [2.0, 2.1, 2.01]])
    tied = peers.verdicts(level)
    assert tied and all("reading: level" in v["why"] for v in tied)
    assert all(v["verdict"] == "not decided" and not v["decisive"] for v in tied)
    assert all(v["why"].startswith("a practical tie") for v in tied)


def test_estimate_counts_every_step(peers):
    label = "T=100,d=8,E=4,k=1,float32"
    rows = [
        {"case": f"{label} {who}", "metric": "tokens_per_s", "value": v}
        for who, v in (("sci-moe", 100.0), ("dense", 200.0), ("transformers", 50.0))
    ]
    got = peers.estimate_cpu_s({"rows": rows}, grouped_factor=1.0, repeats=3)
    assert got["grid_s"] == pytest.approx(4 * 3.5 + 3.0)
    assert got["grouped_mm_s"] == pytest.approx(4.0) and got["cases"] == 1


def test_plot_of_a_stored_run_measures_nothing(run, straight, tmp_path, capsys):
    path = tmp_path / "done.json"
    path.write_text(json.dumps(straight))
    before = path.read_text()
    png = tmp_path / "ratios.png"
    assert run.main(_argv(path, "--resume", "--plot", str(png))) == 0
    assert path.read_text() == before  # nothing left to measure: the JSON stays as it is
    out = capsys.readouterr().out
    assert png.stat().st_size > 0 and "0 to run" in out and "[1/" not in out


def test_grouped_ratios_are_the_rows_ratios(peers, straight):
    plot = sys.modules["_grid_peers_plot"]
    ratios = plot.grouped_ratios(straight)
    assert set(ratios) == set(CASES)
    for label, ratio in ratios.items():
        row = next(
            r
            for r in straight["rows"]
            if r["case"] == f"{label} sci-moe" and r["vs"] == f"{label} {GROUPED}"
        )
        assert ratio == row["ratio"]
