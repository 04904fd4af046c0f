"""benchmarks/moe_cap/run.py at toy sizes: peak probes, decoding with recorded routing, the
dense / sparse / top-k utilisations and the verdict rules (issue 47)."""

import math

import numpy as np
import pytest
import torch

from sci_moe.moe.cap import Hardware, ModelSpec, MoELayerSpec, cap_metrics, flops_per_token
from tests.benchmarks.conftest import load_benchmark

TINY = {
    "layers": 2,
    "mixtral": {"hidden": 32, "ffn": 48, "heads": 4, "kv_heads": 2},
    "qwen": {"hidden": 32, "ffn": 16, "shared_ffn": 48, "heads": 4, "kv_heads": 4},
    "scimoe": {"hidden": 32, "ffn": 24, "experts": 8, "top_k": 2},
    "vocab": 64,
}
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def cap():
    with load_benchmark("moe_cap/run.py", "moe_cap_under_test") as mod:
        yield mod


def test_peak_probes_report_positive_rates_and_the_best_round_counts(cap):
    r = cap.measure_peaks(CPU, 1 << 14, {"float32": (16, 32)}, reps=1)
    assert set(r) == {"triad", "copy", "read", "gemv", "bandwidth", "flops_float32"}
    assert all(v > 0 and math.isfinite(v) for v in r.values())
    assert r["bandwidth"] == max(r["triad"], r["copy"], r["read"], r["gemv"])
    lower = {k: v / 2 for k, v in r.items()}
    hw = cap.hardware_from_rounds([lower, r], "toy")
    assert hw.peak_bandwidth == r["bandwidth"] and hw.flops_for("float32") == r["flops_float32"]


@pytest.mark.parametrize("kind", ["Mixtral", "Qwen1.5-MoE"])
def test_transformers_decode_records_the_routing(cap, kind):
    pytest.importorskip("transformers")
    model, spec = cap.build_model(kind, TINY, 0, CPU)
    moe = spec.moe_layers[0]
    assert spec.num_moe_layers == TINY["layers"]
    # the spec counts the model's weights (norms and biases aside)
    n = sum(p.numel() for p in model.parameters())
    assert 0 < n - spec.total_params < 0.05 * n
    run = cap.decode_hf(model, batch=3, ctx=5, steps=2, warmup=1, seed=0)
    assert run["latency"].shape == (2,) and np.all(run["latency"] > 0)
    assert run["activated"].shape == (2, TINY["layers"])
    assert np.all(run["activated"] >= moe.top_k)
    assert np.all(run["activated"] <= min(moe.num_experts, 3 * moe.top_k))
    bf16, fid = cap.fidelity(model, kind, 5, 0)
    assert next(bf16.parameters()).dtype == torch.bfloat16
    assert 0.5 < fid["fidelity"] <= 1.0 and 0.0 <= fid["top1_agreement"] <= 1.0


def test_scimoe_decode_records_the_routing(cap):
    model, spec = cap.build_model("sci-moe", TINY, 0, CPU)
    assert spec.moe_layers[0].num_experts == 8 and spec.attention is None
    run = cap.decode_scimoe(model, batch=1, steps=3, warmup=1, seed=0)
    assert run["latency"].shape == (3,)
    np.testing.assert_array_equal(run["activated"], np.full((3, TINY["layers"]), 2.0))
    run = cap.decode_scimoe(model, batch=64, steps=1, warmup=0, seed=0)
    assert np.all(run["activated"] > 2)


def _spec():
    moe = MoELayerSpec(num_experts=8, top_k=2, expert_params=300, router_params=40)
    return ModelSpec("toy", 2, 10, None, (moe, moe), dense_params=100, dtype="float32")


def test_dense_topk_and_sparse_utilisations(cap):
    spec = _spec()
    hw = Hardware("toy", {"float32": 1e6}, 1e5)
    kw = dict(batch=4, ctx=0, latency=0.01, dtype="float32", lm_head=False)
    u = cap.utilisation(spec, hw, activated=np.array([5.0, 3.0]), **kw)
    # Eq. 4 bytes: 100 dense + (5 + 3) * 300 routed, 4 bytes each, in 0.01 s
    assert u["s_mbu"] == pytest.approx((100 + 8 * 300) * 4 / 0.01 / 1e5)
    assert u["dense_mbu"] == pytest.approx((100 + 16 * 300) * 4 / 0.01 / 1e5)
    assert u["topk_mbu"] == pytest.approx((100 + 4 * 300) * 4 / 0.01 / 1e5)
    assert u["activated_fraction"] == pytest.approx(8 / 16)
    # dense FLOPs: every expert for every token
    f_sparse = flops_per_token(spec, 0)
    f_dense = cap.dense_flops_per_token(spec, 0, False)
    assert f_dense - f_sparse == pytest.approx(2 * 2 * (8 - 2) * 300)
    assert u["dense_mfu"] / u["s_mfu"] == pytest.approx(f_dense / f_sparse)
    rep = cap_metrics(spec, hw, batch_size=4, seq_len=0, tpot=0.01, activated=[5, 3])
    assert u["s_mfu"] == pytest.approx(rep.s_mfu)
    # every expert touched: the sparse and dense bandwidths agree
    u = cap.utilisation(spec, hw, activated=np.array([8.0, 8.0]), **kw)
    assert u["s_mbu"] == pytest.approx(u["dense_mbu"])


def test_summarise_takes_medians_and_per_step_maxima(cap):
    spec = _spec()
    hw = Hardware("toy", {"float32": 1e6}, 1e5)
    run = {"latency": np.array([0.01, 0.02, 0.04]), "activated": np.full((3, 2), 2.0)}
    s = cap.summarise(spec, hw, run, batch=1, ctx=0, dtype="float32", lm_head=False)
    assert s["tpot_ms"] == pytest.approx(20.0) and s["tpot_min_ms"] == pytest.approx(10.0)
    assert s["s_mbu_max"] == pytest.approx(2 * s["s_mbu"])  # fastest step vs median
    assert s["activated_uniform"] == pytest.approx(2 / 8)


def _doc(cap, s_mbu_grid=0.5, dense_mbu=2.0):
    """Rows of a fake run: every seed cell and the seed-0 grid."""
    seeds = [0, 1, 2]
    machine = {
        "seeds": seeds,
        "contexts": [64],
        "batches": [1, 8, 256],
        "seed_batches": [1, 8, 256],
        "bf16_native": False,
        "models": {"sci-moe": {"experts": 16, "top_k": 2}},
    }
    rows = []
    rng = np.random.default_rng(0)
    for kind in cap.MODELS:
        ctx = 0 if kind == "sci-moe" else 64
        for dtype in cap.DTYPES:
            for b in (1, 8, 256):
                for seed in [None, *seeds]:
                    v = {
                        "tpot_ms": 10.0,
                        "activated_fraction": 1.0 if b == 256 else 0.7,
                        "s_mbu": 0.3,
                        "s_mbu_max": 0.4 + 0.01 * rng.random(),
                        "s_mfu": 0.3,
                        "s_mfu_max": 0.5 + 0.01 * rng.random(),
                        "dense_mbu": dense_mbu,
                        "dense_mbu_max": dense_mbu + 0.01 * rng.random(),
                        "dense_mfu_max": 2.0 + 0.01 * rng.random(),
                        "topk_mbu": 0.1,
                    }
                    if seed is None and b == 8:
                        v["s_mbu_max"] = s_mbu_grid
                    case = cap.cell_case(kind, dtype, b, ctx, seed)
                    rows += [{"case": case, "metric": k, "value": x} for k, x in v.items()]
        for dtype in cap.DTYPES:
            rows.append({"case": f"{kind} {dtype}", "metric": "weights_gb", "value": 1.0})
        rows.append({"case": f"{kind} bfloat16", "metric": "fidelity", "value": 0.99})
    return {"machine": machine, "rows": rows}


def test_verdict_rules(cap):
    out = cap.verdicts(_doc(cap))
    assert len(out) == 7
    got = [v["verdict"] for v in out]
    assert got[:6] == ["reproduced"] * 6 and got[6] == "not decided"
    assert all(v["seeds"] == 3 for v in out[:6])
    # one grid cell above 100 %: the S-MBU bound is contradicted, not decisive
    out = cap.verdicts(_doc(cap, s_mbu_grid=1.2))
    assert out[0]["verdict"] == "contradicted" and not out[0]["decisive"]
    # dense MBU below the peak at batch 1: the overstatement claim is contradicted
    out = cap.verdicts(_doc(cap, dense_mbu=0.5))
    assert out[2]["verdict"] == "contradicted"


def test_plots_are_named_after_the_json(cap, tmp_path):
    from pathlib import Path

    assert cap.plot_stem(tmp_path / "moe_cap_xeon.json", quick=False) == "moe_cap_xeon"
    assert cap.plot_stem(Path("moe_cap.json"), quick=True) == "moe_cap"
    assert cap.plot_stem(None, quick=False) == "moe_cap"
    assert cap.plot_stem(None, quick=True) == "moe_cap_quick"
