"""MoE-CAP metrics (sci_moe.moe.cap): hand-computed S-MBU/S-MFU, specs, recorder, radar."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from torch import nn

from sci_moe.moe import MoE, Routing
from sci_moe.moe.cap import (
    AttentionSpec,
    CapRecorder,
    Hardware,
    ModelSpec,
    activated_counts,
    bytes_per_param,
    cap_metrics,
    cap_radar,
    expected_activated,
    flops_per_token,
    get_hardware,
    load_model,
    measure_cpu,
    s_mbu,
    s_mfu,
    used_experts,
)

REL = 1e-9


def rel_close(a, b, rel=REL):
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


# --------------------------------------------------------------------------------------
# Mixtral-8x7B on one H100 SXM, bf16, decoding: hand computation of Eqs. 4 and 5.
# --------------------------------------------------------------------------------------

# Workload: B = 32 sequences, each with L = 1024 tokens of context, TPOT = 40 ms.
# Activated experts (as if read from the routers): all 8 in layers 0-15, 7 in 16-31.
BATCH, CONTEXT, TPOT = 32, 1024, 0.040
ACTIVATED = [8] * 16 + [7] * 16


def test_mixtral_h100_matches_hand_computation():
    # Mixtral-8x7B config.json: hidden 4096, 32 layers, 32 heads, 8 KV heads (head_dim
    # 4096 / 32 = 128), intermediate 14336 (SwiGLU experts: gate, up, down), 8 experts,
    # top-2, vocab 32000. bf16 = 2 bytes. H100 SXM: 989e12 FLOP/s bf16 dense, 3.35e12 B/s.
    d, n_layer, n_h, n_kv, d_h, d_ff, E, k = 4096, 32, 32, 8, 128, 14336, 8, 2
    nbytes = 2
    F_peak, B_peak = 989e12, 3.35e12

    # Attention parameters per layer: q (d x n_h d_h) + k, v (d x n_kv d_h each) + o.
    S_attn = d * n_h * d_h + 2 * d * n_kv * d_h + n_h * d_h * d
    assert S_attn == 16_777_216 + 8_388_608 + 16_777_216 == 41_943_040
    # One SwiGLU expert: 3 matrices of d x d_ff.
    S_expert = 3 * d * d_ff
    assert S_expert == 176_160_768
    # Router per layer: d x E.
    N_router_layer = d * E
    assert N_router_layer == 32_768

    # ---- S-MBU (Eq. 4) ----
    # S_activated = n_layer S_attn + sum_l sum_i 1[l, i] S_expert (parameters)
    assert sum(ACTIVATED) == 16 * 8 + 16 * 7 == 240
    S_activated_params = n_layer * S_attn + sum(ACTIVATED) * S_expert
    assert S_activated_params == 1_342_177_280 + 42_278_584_320 == 43_620_761_600
    S_activated = S_activated_params * nbytes
    assert S_activated == 87_241_523_200  # bytes
    # KV cache: 2 (K and V) x n_layer x n_kv x d_h x L x B x bytes
    S_KV = 2 * n_layer * n_kv * d_h * CONTEXT * BATCH * nbytes
    assert S_KV == 4_294_967_296  # bytes (4 GiB)
    achieved_bw = (S_activated + S_KV) / TPOT
    assert achieved_bw == pytest.approx(91_536_490_496 / 0.040)  # 2.2884 TB/s
    smbu_hand = achieved_bw / B_peak
    assert smbu_hand == pytest.approx(0.683108138, abs=1e-9)

    # ---- S-MFU (Eq. 5) ----
    # T_token = B / TPOT (one token per sequence per decoding step)
    T_token = BATCH / TPOT
    assert T_token == pytest.approx(800.0)
    # F_attn = n_layer (2 S_attn + 4 n_h d_h L): projections + QK^T and AV scores
    F_attn = n_layer * (2 * S_attn + 4 * n_h * d_h * CONTEXT)
    assert F_attn == 32 * (83_886_080 + 16_777_216) == 3_221_225_472
    # 2 N_router, N_router summed over the 32 MoE layers
    assert 2 * n_layer * N_router_layer == 2_097_152
    # 2 k_expert N_expert, k_expert = top-2 + 0 shared, N_expert summed over layers
    assert 2 * k * n_layer * S_expert == 22_548_578_304
    SF_token = F_attn + 2 * n_layer * N_router_layer + 2 * k * n_layer * S_expert
    assert SF_token == 25_771_900_928  # FLOPs per token
    smfu_hand = T_token * SF_token / F_peak
    assert smfu_hand == pytest.approx(0.0208468359, abs=1e-10)

    # ---- the library ----
    spec = load_model("mixtral-8x7b")
    rep = cap_metrics(
        spec, "h100", batch_size=BATCH, seq_len=CONTEXT, tpot=TPOT, activated=ACTIVATED
    )
    assert rel_close(rep.s_mbu, smbu_hand)
    assert rel_close(rep.s_mfu, smfu_hand)
    assert rel_close(rep.activated_bytes, S_activated)
    assert rel_close(rep.kv_bytes, S_KV)
    assert rel_close(rep.flops_per_token, SF_token)
    assert rel_close(rep.throughput, 800.0)
    # the thin wrappers and the throughput form give the same numbers
    kw = {"batch_size": BATCH, "seq_len": CONTEXT, "activated": ACTIVATED}
    assert rel_close(s_mbu(spec, "h100", tpot=TPOT, **kw), smbu_hand)
    assert rel_close(s_mfu(spec, "h100", throughput=800.0, **kw), smfu_hand)


def test_per_layer_once_variant_differs_as_documented():
    spec = load_model("mixtral-8x7b")
    kw = {"batch_size": BATCH, "seq_len": CONTEXT, "tpot": TPOT, "activated": ACTIVATED}
    paper = cap_metrics(spec, "h100", **kw)
    code = cap_metrics(spec, "h100", expert_count="per_layer_once", **kw)
    # S-MBU: n_moe * mean_l(a_l) * S_expert == sum_l a_l S_expert when all MoE layers
    # have the same expert size -> identical.
    assert rel_close(code.s_mbu, paper.s_mbu)
    # S-MFU: the MoE-CAP code counts S_expert once per MoE layer (not k = 2 times) and
    # no router FLOPs: S-F_token = F_attn + 2 n_layer S_expert.
    SF_code = 3_221_225_472 + 2 * 32 * 176_160_768
    assert SF_code == 14_495_514_624
    assert rel_close(code.flops_per_token, SF_code)
    assert rel_close(code.s_mfu, 800 * SF_code / 989e12)
    assert code.s_mfu < paper.s_mfu
    # The per-layer average matters when expert sizes differ between layers.
    spec2 = ModelSpec(
        "two sizes",
        num_layers=2,
        hidden_size=4,
        attention=None,
        moe_layers=(_layer(4, 2, 10), _layer(4, 2, 30)),
        dtype="float32",
    )
    hw = Hardware("unit", {"float32": 1.0}, 1.0)
    a = cap_metrics(spec2, hw, batch_size=1, seq_len=0, tpot=1.0, activated=[4, 2])
    b = cap_metrics(
        spec2,
        hw,
        batch_size=1,
        seq_len=0,
        tpot=1.0,
        activated=[4, 2],
        expert_count="per_layer_once",
    )
    assert a.activated_bytes == 4 * (4 * 10 + 2 * 30)  # per layer
    assert b.activated_bytes == 4 * (2 * 3.0 * 20.0)  # n_moe * mean(a) * mean(S_expert)


def _layer(E, k, size):
    from sci_moe.moe.cap import MoELayerSpec

    return MoELayerSpec(num_experts=E, top_k=k, expert_params=size, router_params=4 * E)


# --------------------------------------------------------------------------------------
# Model descriptions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [  # published sizes (billions): model cards / papers
        ("mixtral-8x7b", 46.7, 12.9),
        ("qwen3-30b-a3b", 30.5, 3.3),
        ("deepseek-v3", 671.0, 37.0),
        ("olmoe-1b-7b", 6.9, 1.3),
    ],
)
def test_shipped_configs_reproduce_published_sizes(name, total, active):
    spec = load_model(name)
    assert spec.total_params / 1e9 == pytest.approx(total, rel=0.01)
    assert spec.active_params / 1e9 == pytest.approx(active, rel=0.03)
    assert spec.dtype == "bfloat16"
    assert "Transcribed" in spec.note


def test_config_layer_layouts():
    ds = load_model("deepseek-v3")
    assert ds.num_layers == 61 and ds.num_moe_layers == 61 - 3  # first_k_dense_replace
    assert ds.attention.is_mla and ds.attention.kv_elements() == 512 + 64
    assert ds.moe_layers[0].k_expert == 8 + 1  # one shared expert
    assert ds.dense_params == 3 * 3 * 7168 * 18432
    qw = load_model("qwen3-30b-a3b")
    assert qw.attention.head_dim == 128 != 2048 // 32  # explicit head_dim
    assert qw.attention.kv_elements() == 2 * 4 * 128
    olmoe = load_model("olmoe-1b-7b")
    assert olmoe.moe_layers[0].expert_params == 3 * 2048 * 1024


def test_from_config_dict_file_and_options(tmp_path):
    cfg = {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 256,
        "moe_intermediate_size": 32,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "shared_expert_intermediate_size": 64,
        "mlp_only_layers": [0],
        "decoder_sparse_step": 1,
        "vocab_size": 100,
        "torch_dtype": "float16",
    }
    spec = ModelSpec.from_config(cfg, name="toy")
    assert spec.num_moe_layers == 3 and spec.dense_params == 3 * 64 * 256
    m = spec.moe_layers[0]
    assert (m.expert_params, m.shared_params, m.router_params) == (3 * 64 * 32, 3 * 64 * 64, 512)
    assert spec.attention.params() == 2 * 64 * 64 + 2 * 64 * 2 * 16
    assert spec.dtype == "float16"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"text_config": cfg, "model_type": "wrapper"}))
    assert load_model(path) == dataclasses.replace(spec, name="wrapper")
    mlp = ModelSpec.from_config(cfg, ffn_matrices=2)
    assert mlp.moe_layers[0].expert_params == 2 * 64 * 32
    dense = ModelSpec.from_config({k: cfg[k] for k in list(cfg)[:5]})
    assert dense.num_moe_layers == 0 and dense.dense_params == 4 * 3 * 64 * 256


def test_config_errors_say_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="num_hidden_layers"):
        ModelSpec.from_config({"hidden_size": 8})
    with pytest.raises(ValueError, match="num_experts_per_tok"):
        ModelSpec.from_config({"hidden_size": 8, "num_hidden_layers": 1, "num_experts": 4})
    with pytest.raises(ValueError, match="unknown model"):
        load_model("mixtral-9x9b")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_model(bad)
    with pytest.raises(ValueError, match="not a file"):
        load_model(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="multiple"):
        AttentionSpec(64, num_heads=4, num_kv_heads=3, head_dim=16)


def test_from_module_counts_expert_banks():
    d, E, h = 16, 8, 24
    model = nn.Sequential(
        nn.Embedding(50, d),
        MoE(d_model=d, num_experts=E, top_k=2, d_hidden=h),
        nn.Linear(d, d),
        MoE(d_model=d, num_experts=E, top_k=3, d_hidden=h, num_shared_experts=2),
    )
    spec = ModelSpec.from_module(model, name="toy")
    assert spec.num_moe_layers == 2 and spec.num_layers == 2 and spec.attention is None
    first, second = spec.moe_layers
    assert first.expert_params == 3 * d * h  # GLU: gate, up, down
    assert first.router_params == d * E
    assert (second.top_k, second.num_shared_experts, second.shared_params) == (3, 2, 3 * d * 2 * h)
    assert spec.dense_params == d * d + d  # the Linear; the embedding is not counted
    assert spec.dtype == "float32"


# --------------------------------------------------------------------------------------
# Activated experts
# --------------------------------------------------------------------------------------


def test_used_experts_from_a_real_routing():
    moe = MoE(d_model=8, num_experts=8, top_k=2)
    x = torch.randn(3, 8)
    _, info = moe(x, return_routing=True)
    used = used_experts(info.routing)
    expected = set(info.routing.indices.flatten().tolist())
    assert used.dtype == torch.bool and used.shape == (8,)
    assert set(torch.nonzero(used).flatten().tolist()) == expected
    # an expert counts once however many tokens use it: 2 <= count <= 6 here
    assert 2 <= int(used.sum()) <= 6
    # one token -> exactly top_k experts
    _, one = moe(x[:1], return_routing=True)
    assert int(used_experts(one.routing).sum()) == 2
    # dropped slots (index E) do not count
    r = Routing(
        torch.tensor([[0, 8], [0, 3]]), torch.ones(2, 2), torch.zeros(2, 8), torch.zeros(2, 8), 8
    )
    assert torch.nonzero(used_experts(r)).flatten().tolist() == [0, 3]


def test_activated_counts_forms():
    spec = load_model("mixtral-8x7b")
    assert np.all(activated_counts(spec, "all") == 8)
    assert np.allclose(activated_counts(spec, 5.5), 5.5)
    mask = np.zeros((32, 8))
    mask[:, :3] = 1
    mask[0, 7] = 12  # token counts work too: > 0 means used
    counts = activated_counts(spec, torch.tensor(mask))
    assert counts[0] == 4 and np.all(counts[1:] == 3)
    with pytest.raises(ValueError, match="between 0"):
        activated_counts(spec, 9)
    with pytest.raises(ValueError, match="one count per MoE layer"):
        activated_counts(spec, [1, 2, 3])
    with pytest.raises(ValueError, match="uniform"):
        activated_counts(spec, "most")


def test_expected_activated_uniform_routing():
    assert expected_activated(8, 2, 1) == pytest.approx(2.0)
    assert expected_activated(8, 2, 0) == 0.0
    assert expected_activated(8, 2, 3) == pytest.approx(8 * (1 - 0.75**3))  # 4.625
    assert expected_activated(8, 2, 10_000) == pytest.approx(8.0)
    # Monte Carlo: 3 tokens each picking 2 distinct experts of 8 at random
    g = torch.Generator().manual_seed(0)
    picks = torch.rand(20_000, 3, 8, generator=g).argsort(-1)[..., :2]
    used = torch.zeros(20_000, 8, dtype=torch.bool)
    used.scatter_(1, picks.reshape(20_000, -1), True)
    assert used.sum(1).float().mean().item() == pytest.approx(4.625, abs=0.03)


# --------------------------------------------------------------------------------------
# Recorder
# --------------------------------------------------------------------------------------


class _Tiny(nn.Module):
    def __init__(self, d=16, E=8):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.moe1 = MoE(d_model=d, num_experts=E, top_k=2, d_hidden=16)
        self.moe2 = MoE(d_model=d, num_experts=E, top_k=1, d_hidden=16)

    def forward(self, x):
        h = self.inp(x)
        h = h + self.moe1(h)
        # moe2 reuses a routing computed by its own router, passed as routing=
        r = self.moe2.route(h)
        return h + self.moe2(h, routing=r)


def test_recorder_on_a_tiny_model():
    torch.manual_seed(0)
    model = _Tiny()
    # 3 tokens per pass: at most 6 (top-2) and 3 (top-1) of the 8 experts can be used
    xs = [torch.randn(1, 3, 16) for _ in range(3)]
    with CapRecorder(model) as rec, torch.no_grad():
        for x in xs:
            model(x)
    assert len(rec.steps) == 3
    # the same passes by hand, reading the routings
    with torch.no_grad():
        for step, x in zip(rec.steps, xs, strict=True):
            h = model.inp(x)
            y1, info1 = model.moe1(h, return_routing=True)
            h = h + y1
            info2 = model.moe2.route(h)
            exp = [
                set(info1.routing.indices.flatten().tolist()),
                set(info2.indices.flatten().tolist()),
            ]
            assert step.tokens == 3
            for counts, used in zip(step.counts, exp, strict=True):
                assert set(np.flatnonzero(counts).tolist()) == used
            assert step.activated().tolist() == [len(exp[0]), len(exp[1])]
            assert int(step.counts[0].sum()) == 3 * 2 and int(step.counts[1].sum()) == 3
            assert step.latency > 0
    # hooks are removed on exit
    with torch.no_grad():
        model(xs[0])
    assert len(rec.steps) == 3

    hw = Hardware("unit", {"float32": 1e12}, 1e11)
    rep = rec.report(hw)
    spec = rec.spec
    lat = rec.latencies().mean()
    act = rec.activated().mean(0)
    params = spec.dense_params + sum(
        a * m.expert_params + m.shared_params for a, m in zip(act, spec.moe_layers, strict=True)
    )
    assert rel_close(rep.s_mbu, params * 4 / lat / 1e11)
    sf = 2 * spec.dense_params + sum(
        2 * m.router_params + 2 * m.top_k * m.expert_params for m in spec.moe_layers
    )
    assert rel_close(rep.s_mfu, 3 / lat * sf / 1e12)
    assert rep.activated_mode == "recorded" and rep.steps == 3 and rep.kv_bytes == 0
    assert rec.report(hw, skip=1).steps == 2


def test_recorder_model_is_a_layer_and_errors():
    layer = MoE(d_model=8, num_experts=4, top_k=2)
    with CapRecorder(layer) as rec:
        layer(torch.randn(6, 8), return_routing=True)
    assert len(rec.steps) == 1 and rec.steps[0].tokens == 6
    with pytest.raises(ValueError, match=r"no sci_moe\.moe\.MoE"):
        CapRecorder(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="no forward pass"):
        CapRecorder(layer).report("h100")
    with pytest.raises(ValueError, match="does not match"):
        CapRecorder(layer, spec=load_model("mixtral-8x7b"))


@pytest.mark.gpu
def test_recorder_on_cuda_synchronises_and_counts():
    model = _Tiny().cuda()
    x = torch.randn(2, 3, 16, device="cuda")
    with CapRecorder(model) as rec, torch.no_grad():
        model(x)
        model(x)
    assert len(rec.steps) == 2 and all(s.latency > 0 and s.tokens == 6 for s in rec.steps)
    assert rec.activated().shape == (2, 2)
    assert rec.report("h200", skip=1).s_mbu > 0


# --------------------------------------------------------------------------------------
# Hardware, dtypes, validation
# --------------------------------------------------------------------------------------


def test_datasheet_peaks_are_dense(tmp_path):
    h100 = get_hardware("H100")
    assert h100.flops_for("bf16") == 989e12 and h100.peak_bandwidth == 3.35e12
    assert get_hardware("a100").flops_for(torch.bfloat16) == 312e12
    assert get_hardware("a100").peak_bandwidth == 2.039e12
    h200 = get_hardware("h200")
    assert h200.flops_for("bfloat16") == 989e12 and h200.peak_bandwidth == 4.8e12
    with pytest.raises(ValueError, match="no peak for"):
        get_hardware("a100").flops_for("fp8")
    path = tmp_path / "hw.json"
    path.write_text(json.dumps({"name": "x", "peak_flops": {"bf16": 1e12}, "peak_bandwidth": 1e9}))
    assert get_hardware(path).flops_for("bfloat16") == 1e12
    with pytest.raises(ValueError, match="unknown hardware"):
        get_hardware("tpu-v9")


def test_cpu_probe_is_short_and_positive():
    hw = measure_cpu(max_seconds=0.2)
    assert hw.flops_for("float32") > 1e8 and hw.flops_for("bfloat16") > 1e7
    assert hw.peak_bandwidth > 1e8


def test_bytes_per_param_and_validation():
    assert [bytes_per_param(t) for t in ("fp32", torch.bfloat16, "float8_e4m3fn", "int4")] == [
        4,
        2,
        1,
        0.5,
    ]
    spec = load_model("olmoe-1b-7b")
    kw = {"batch_size": 1, "seq_len": 10}
    with pytest.raises(ValueError, match="exactly one of tpot"):
        cap_metrics(spec, "h100", **kw)
    with pytest.raises(ValueError, match="exactly one of tpot"):
        cap_metrics(spec, "h100", tpot=1.0, throughput=1.0, **kw)
    with pytest.raises(ValueError, match="expert_count"):
        cap_metrics(spec, "h100", tpot=1.0, expert_count="once", **kw)
    with pytest.raises(ValueError, match="batch_size"):
        cap_metrics(spec, "h100", tpot=1.0, batch_size=0, seq_len=1)
    with pytest.raises(ValueError, match="unknown number format"):
        cap_metrics(spec, "h100", tpot=1.0, dtype="float7", **kw)
    # fp8 weights halve the bytes; S-MFU is taken against the fp8 peak (1979 vs 989 TF)
    bf = cap_metrics(spec, "h100", tpot=0.01, activated="all", **kw)
    f8 = cap_metrics(spec, "h100", tpot=0.01, activated="all", dtype="fp8", kv_dtype="bf16", **kw)
    assert rel_close(f8.activated_bytes, bf.activated_bytes / 2)
    assert rel_close(f8.s_mfu, bf.s_mfu * 989 / 1979)
    # lm_head adds V d parameters and 2 V d FLOPs
    lm = cap_metrics(spec, "h100", tpot=0.01, activated="all", lm_head=True, **kw)
    assert rel_close(lm.activated_bytes - bf.activated_bytes, 2 * 50304 * 2048)
    assert rel_close(
        flops_per_token(spec, 10, lm_head=True) - flops_per_token(spec, 10), 2 * 50304 * 2048
    )


# --------------------------------------------------------------------------------------
# Radar
# --------------------------------------------------------------------------------------


def test_cap_radar_png(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [
        {"name": "SGLang", "cost": 8000, "accuracy": 0.91, "performance": 0.06},
        {"name": "K-Transformers", "cost": 4000, "accuracy": 0.83, "performance": 0.09},
        {"name": "MoE-Infinity", "cost": 4000, "accuracy": 0.91, "performance": 0.14},
    ]
    fig = cap_radar(systems, tmp_path / "radar.png", title="CAP")
    plt.close(fig)
    assert (tmp_path / "radar.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="has no 'accuracy'"):
        cap_radar([{"name": "a", "cost": 1, "performance": 1}])
    with pytest.raises(ValueError, match="at least 3 axes"):
        cap_radar(systems, axes=())
