"""benchmarks/moe_layer/_hf_peers.py: transformers' grouped_mm / batched_mm / eager experts
agree with sci-moe (ffn != d too) before timing, the rows and the verdict rule."""

import json

import pytest

from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def peers():
    with load_benchmark("moe_layer/_hf_peers.py", "moe_layer_hf_peers_under_test") as mod:
        yield mod


@pytest.fixture(scope="module")
def run():
    with load_benchmark("moe_layer/run.py", "moe_layer_run_hf_peers_under_test") as mod:
        yield mod


def test_every_peer_agrees_with_sci_moe_at_ffn_not_d(peers):
    case = peers.PeerCase(T=24, d=16, ffn=40, E=4, k=2)
    steps, gaps = peers.build(case, seed=0)
    assert set(steps) == {"sci-moe", *peers.PEERS.values()}
    for got in gaps.values():
        assert set(got) == {"output", *peers._GRADS}
        assert max(got.values()) < 1e-3


def test_batched_mm_left_out_above_its_memory_cap(peers):
    big = peers.PeerCase(T=2048, d=1024, ffn=2048, E=8, k=2)
    assert peers.PEERS["batched_mm"] not in big.peers()
    assert all(peers.PEERS["batched_mm"] in c.peers() for c in peers.GRID)


def _doc(peers, sci, base, repeats=6):
    label = "T=8,d=4,ffn=8,E=2,k=1"
    rows = []
    for who, vals in (("sci-moe", sci), (peers.BASELINE, base)):
        for r, v in enumerate(vals):
            rows.append(
                {"case": f"{label} {who}", "metric": f"tokens_per_s repeat {r}", "value": v}
            )
    return {"machine": {"repeats": repeats, "shapes": [label]}, "rows": rows}


def test_verdict_rule(peers):
    faster = peers.verdicts(
        _doc(peers, [11, 12, 11.5, 12.2, 11.8, 12.1], [10, 10.4, 10, 10.2, 9.9, 10])
    )
    assert faster[0]["verdict"] == "reproduced" and faster[0]["seeds"] == 6
    slower = peers.verdicts(
        _doc(peers, [9, 9.2, 9.1, 8.9, 9.3, 9.0], [10, 10.4, 10, 10.2, 9.9, 10])
    )
    assert slower[0]["verdict"] == "contradicted"


def test_quick_run_writes_rows_and_verdicts(run, tmp_path):
    path = tmp_path / "peers.json"
    argv = ["--hf-peers", "--quick", "--repeats", "2", "--json", str(path)]
    assert run.main(argv) == 0
    doc = json.loads(path.read_text())
    shapes = doc["machine"]["shapes"]
    assert len(doc["verdicts"]) == len(shapes)
    for label in shapes:
        ratios = [r for r in doc["rows"] if r["case"] == f"{label} sci-moe" and r.get("vs")]
        assert {r["vs"][len(label) + 1 :] for r in ratios} == {
            "transformers grouped_mm",
            "transformers batched_mm",
            "transformers eager",
        }
    before = doc["verdicts"]
    assert run.main(["--verdicts-only", str(path)]) == 0
    assert json.loads(path.read_text())["verdicts"] == before
