import pytest
import torch

from sci_moe.vrp import actions_to_routes, check_solution, generate_instances
from sci_moe.vrp.moses import (
    MoSESConfig,
    MTVRPPolicy,
    PolicyConfig,
    TrainConfig,
    augment,
    fit_moses,
    solve,
    train_stage,
)


def _tiny(rank=2):
    return MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=rank))


def _stage_cfg(**kw):
    return TrainConfig(
        **{
            "steps": 2,
            "batch_size": 3,
            "num_customers": 6,
            "seed": 1,
            "val_instances": 2,
            "progress": False,
            **kw,
        }
    )


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_three_stages_train_only_their_parameters():
    pol = _tiny()
    cfg = _stage_cfg()
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters()}
    train_stage(pol, "backbone", "CVRP", cfg)
    changed = {n for n, p in pol.named_parameters() if not torch.equal(p, frozen[n])}
    assert changed and not any("lora" in n or "router" in n for n in changed)
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters()}
    train_stage(pol, "expert", ["OVRP", "VRPB", "VRPL", "VRPTW"], cfg)
    changed = {n for n, p in pol.named_parameters() if not torch.equal(p, frozen[n])}
    assert changed and all("experts" in n or "expert_gate" in n for n in changed)
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters()}
    res = train_stage(pol, "gated", ["VRPTW", "OVRPB"], cfg)
    changed = {n for n, p in pol.named_parameters() if not torch.equal(p, frozen[n])}
    assert changed and all("router" in n or "residual" in n for n in changed)
    assert res.step == 2 and res.reason == "completed"
    assert [e["step"] for e in res.evals] == [2] and res.evals[0]["val_cost"] > 0
    with pytest.raises(ValueError, match="nothing to train"):
        train_stage(_tiny(rank=0), "expert", "OVRP", cfg)


def test_training_is_reproducible():
    cfg = _stage_cfg(steps=2, batch_size=2, num_customers=5, seed=3)
    torch.manual_seed(0)
    pol_a = _tiny()
    a = train_stage(pol_a, "backbone", "CVRP", cfg)
    torch.manual_seed(0)
    pol_b = _tiny()
    b = train_stage(pol_b, "backbone", "CVRP", cfg)
    assert a.evals == b.evals and _same(_weights(pol_a), _weights(pol_b))


def test_config_refuses_bad_values():
    with pytest.raises(ValueError, match="num_customers must be an integer >= 1"):
        TrainConfig(num_customers=0)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="variants: unknown VRP variant 'XVRP'"):
        MoSESConfig(variants=("CVRP", "XVRP"))
    with pytest.raises(ValueError, match="num_heads must divide d_model=16"):
        MoSESConfig(d_model=16, num_heads=3)
    with pytest.raises(ValueError, match="gate_steps must be an integer >= 0"):
        MoSESConfig(gate_steps=-1)
    with pytest.raises(ValueError, match="rank must be an integer >= 1"):
        MoSESConfig(rank=0)


def _moses_cfg(**kw):
    return MoSESConfig(
        **{
            "steps": 3,
            "expert_steps": 2,
            "gate_steps": 2,
            "batch_size": 2,
            "num_customers": 5,
            "d_model": 8,
            "num_heads": 2,
            "num_layers": 1,
            "rank": 2,
            "eval_every": 2,
            "val_instances": 2,
            "variants": ("CVRP", "VRPTW", "OVRPL"),
            "progress": False,
            **kw,
        }
    )


def test_moses_exact_resume_across_stages(tmp_path):
    """Interrupted inside stage 2, then at the end of stage 2, resumed each time in a
    fresh policy: bitwise the weights of the uninterrupted run."""
    cfg = _moses_cfg()
    ref, summary = fit_moses(cfg, tmp_path / "a")
    assert summary["finished"] and summary["step"] == 7
    assert set(summary["phases"]) == {"backbone", "expert", "gated"}
    out = tmp_path / "b"
    _, s1 = fit_moses(cfg, out, stop_after=4)  # 3 steps of stage 1, 1 of stage 2
    assert s1["reason"] == "interrupted" and not s1["finished"] and s1["step"] == 4
    _, s2 = fit_moses(cfg, out, resume=True, stop_after=1)  # the last step of stage 2
    assert s2["reason"] == "interrupted" and set(s2["phases"]) == {"backbone", "expert"}
    assert (out / "expert" / "checkpoint.pt").exists()
    assert not (out / "gated").exists()
    got, s3 = fit_moses(cfg, out, resume=True)
    assert s3["finished"] and s3["phases"]["gated"]["resumed_from"] is None
    assert s3["phases"]["expert"]["resumed_from"] == 2
    assert got.mode == ref.mode == "gated"
    assert _same(_weights(got), _weights(ref))
    assert s3["phases"]["gated"]["evals"] == summary["phases"]["gated"]["evals"]
    with pytest.raises(ValueError, match="other settings"):
        fit_moses(_moses_cfg(lr=0.5), out, resume=True)


def test_augment_keeps_distances_and_solve_is_feasible():
    ins = generate_instances(3, 7, ["VRPBLTW", "OVRPL", "CVRP"], seed=2, dtype=torch.float64)
    aug = augment(ins, 8)
    d = aug.distances().view(8, 3, 8, 8)
    torch.testing.assert_close(d, ins.distances().expand(8, -1, -1, -1))
    pol = _tiny().double()
    pol.mode = "gated"
    cost, acts = solve(pol, ins)
    for b in range(3):
        assert check_solution(ins, b, actions_to_routes(acts[b])) == []
    _, _, c1 = pol(ins, greedy=True)
    assert (cost <= c1.min(1).values + 1e-12).all()
    with pytest.raises(ValueError, match="k must be"):
        augment(ins, 9)


def test_batched_rollouts_equal_one_instance_at_a_time(float_dtype):
    # The decoder attends per instance over its rollouts (keys computed once per instance):
    # a batch must give every instance exactly what it gets alone, in every mode.
    torch.manual_seed(0)
    pol = _tiny()
    for p in pol.parameters():
        p.data += 0.1 * torch.randn_like(p)
    ins = generate_instances(4, 7, ["CVRP", "OVRPL", "VRPBTW", "OVRPBLTW"], seed=2)
    ins = ins.to(float_dtype)
    tol = {"rtol": 1e-4, "atol": 1e-4} if float_dtype == torch.float32 else {}
    for mode in ("backbone", "expert", "gated"):
        pol.mode = mode
        with torch.no_grad():
            acts, logp, cost = pol(ins, greedy=True)
            for b in range(4):
                a1, l1, c1 = pol(ins.index(slice(b, b + 1)), greedy=True)
                assert torch.equal(acts[b, :, : a1.shape[2]], a1[0])
                torch.testing.assert_close(logp[b], l1[0], **tol)
                torch.testing.assert_close(cost[b], c1[0], **tol)


def test_node_features_tell_open_and_limited_instances_apart():
    from sci_moe.vrp.moses import node_features

    a = generate_instances(2, 5, ["CVRP", "OVRPL"], seed=0)
    f = node_features(a)
    assert f.shape == (2, 6, 10)
    assert torch.equal(f[0, :, 8], torch.zeros(6)) and torch.equal(f[1, :, 8], torch.ones(6))
    assert torch.equal(f[0, :, 9], torch.zeros(6))  # no limit
    lim = float(a.distance_limit[1])
    torch.testing.assert_close(f[1, :, 9], torch.full((6,), 1 / max(lim, 1.0)))


def test_size_curriculum_and_extra_evaluation(tmp_path):
    from sci_moe.vrp.moses.train import _stream

    cfg = _stage_cfg(num_customers=9, min_customers=5, batch_size=2, steps=6)
    sizes = {_stream(["CVRP"], cfg).get(s, 0, 1).data[0].num_customers for s in range(40)}
    assert sizes <= set(range(5, 10)) and len(sizes) > 2
    torch.manual_seed(0)
    pol = _tiny()
    seen = []

    def extra(policy):
        seen.append(policy.training)
        return {"curve": 1.5}

    res = train_stage(pol, "backbone", "CVRP", cfg, out_dir=tmp_path / "a", extra_eval=extra)
    assert [e["curve"] for e in res.evals] == [1.5] and seen == [False]
    torch.manual_seed(0)
    pol2 = _tiny()
    part = train_stage(pol2, "backbone", "CVRP", cfg, out_dir=tmp_path / "b", stop_after=3)
    assert part.reason == "interrupted"
    train_stage(pol2, "backbone", "CVRP", cfg, out_dir=tmp_path / "b", resume=True)
    assert _same(_weights(pol), _weights(pol2))
    with pytest.raises(ValueError, match="min_customers must be at most"):
        _stage_cfg(num_customers=5, min_customers=6)


def test_explicit_cpu_device_equals_the_default():
    """Validation instances and solve's instances are moved to the policy's device: on
    the CPU nothing changes."""
    runs = []
    for device in (None, "cpu"):
        torch.manual_seed(0)
        pol = _tiny()
        res = train_stage(pol, "backbone", "CVRP", _stage_cfg(device=device))
        runs.append((pol, res))
    (pa, ra), (pb, rb) = runs
    assert ra.evals == rb.evals and _same(_weights(pa), _weights(pb))
    ins = generate_instances(2, 6, "VRPTW", seed=5)
    cost, actions = solve(pa, ins)
    assert cost.device.type == actions.device.type == "cpu" and cost.shape == (2,)


_NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@_NEEDS_CUDA
@pytest.mark.parametrize("stage", ["backbone", "expert"])
def test_stage_on_cuda_matches_the_cpu(stage):
    """Fresh instances (drawn on the CPU, moved by the engine), the rollouts' action draws
    (the CPU generator) and the validation instances on the GPU; close to the CPU run."""
    variants = "CVRP" if stage == "backbone" else ["OVRP", "VRPB", "VRPL", "VRPTW"]
    runs = []
    for device in ("cuda", "cpu"):
        torch.manual_seed(0)
        pol = _tiny()
        res = train_stage(pol, stage, variants, _stage_cfg(device=device))
        runs.append((pol, res))
    (pg, rg), (pc, rc) = runs
    assert next(pg.parameters()).device.type == "cuda"
    # loose: a greedy decoding may break a near-tie the other way
    assert rg.evals[0]["val_cost"] == pytest.approx(rc.evals[0]["val_cost"], rel=0.05)
    wc = _weights(pc)
    for k, v in _weights(pg).items():
        torch.testing.assert_close(v.cpu(), wc[k], rtol=1e-2, atol=1e-4)


@pytest.mark.gpu
@_NEEDS_CUDA
def test_solve_with_a_policy_on_cuda_answers_on_the_instances_device():
    torch.manual_seed(0)
    pol = _tiny()
    ins = generate_instances(3, 6, ["CVRP", "VRPTW", "OVRPBL"], seed=2)
    cost_c, act_c = solve(pol, ins)
    pol.cuda()
    cost_g, act_g = solve(pol, ins)  # CPU instances, GPU policy
    assert cost_g.device.type == act_g.device.type == "cpu"
    assert torch.equal(act_g, act_c) and torch.allclose(cost_g, cost_c, rtol=1e-5)
    cost_d, _ = solve(pol, ins.to(device="cuda"))  # GPU instances: GPU answers
    assert cost_d.device.type == "cuda" and torch.allclose(cost_d.cpu(), cost_c, rtol=1e-5)


@pytest.mark.gpu
@_NEEDS_CUDA
def test_fit_moses_on_cuda_three_stages():
    cfg = MoSESConfig(
        steps=2,
        expert_steps=1,
        gate_steps=1,
        num_customers=5,
        batch_size=2,
        d_model=8,
        num_heads=2,
        num_layers=1,
        rank=2,
        val_instances=2,
        progress=False,
        device="cuda",
    )
    policy, summary = fit_moses(cfg)
    assert summary["finished"] and next(policy.parameters()).device.type == "cuda"
    assert policy.mode == "gated"
