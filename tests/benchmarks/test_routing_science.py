"""benchmarks/routing_science/run.py: the flatness rule, the router-gradient measurement,
the resumable pieces and the verdict rule of part (a) on a made-up JSON."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from .conftest import load_benchmark, refused


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("routing_science/run.py", "routing_science_run") as mod:
        yield mod


def test_flat_rule(bench):
    steps = [0, 20, 40, 60, 80, 100]
    assert bench.flat(steps, [5.0, 3.0, 2.5, 2.2, 2.0, 1.995])  # 0.25 % in the last 20 %
    assert not bench.flat(steps, [5.0, 3.0, 2.5, 2.2, 2.0, 1.9])  # 5 % better: not flat
    assert bench.flat(steps, [5.0, 3.0, 2.5, 2.2, 2.0, 2.1])  # no new best: flat
    assert not bench.flat([0], [5.0])


def test_tokens_to(bench):
    assert bench.tokens_to([0, 100, 200], [10.0, 5.0, 2.0], 10.0) == 0.0
    assert bench.tokens_to([0, 100, 200], [10.0, 5.0, 2.0], 5.0) == pytest.approx(100.0)
    assert bench.tokens_to([0, 100, 200], [10.0, 5.0, 2.0], 1.0) is None


def _model(bench, default: bool):
    from sci_moe.language import MoELMConfig, MoETransformerLM

    torch.manual_seed(0)
    moe = {"load_balance_coef": 0.01}
    if default:
        moe.update(default_moe=True, default_beta=0.9)
    cfg = MoELMConfig(
        d_model=16,
        n_layers=2,
        n_heads=2,
        seq_len=8,
        d_hidden=16,
        num_experts=4,
        top_k=2,
        dense_first_layer=True,
        moe=moe,
    )
    return MoETransformerLM(cfg)


def test_router_gradient_sparse_vs_dense(bench):
    # seed 0 has a token whose selected entries are 9e-7 and whose rounding is 1e-11
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (4, 8), generator=gen)
    y = torch.randint(0, 256, (4, 8), generator=gen)
    top = bench.router_gradient(_model(bench, False), x, y)
    # renormalised top-2 of 4: only the two selected logits of a token get a gradient
    assert top["density"] <= 0.5 + 1e-9
    assert top["unselected_share"] < 1e-10  # float32 rounding only
    model = _model(bench, True)
    ema = [m.default.ema.clone() for m in model.moe_layers()]
    dense = bench.router_gradient(model, x, y)
    assert dense["density"] > 0.9  # the EMA term reaches every expert's logit
    assert dense["unselected_share"] > 0.0
    assert len(dense["layers"][0]["expert_norms"]) == 4
    # the measurement leaves the EMA and the gradients as they were
    for m, e in zip(model.moe_layers(), ema, strict=True):
        assert torch.equal(m.default.ema, e)
    assert all(q.grad is None for q in model.parameters())


def test_pieces_stop_and_resume(bench, tmp_path):
    path = tmp_path / "x.state.json"
    pieces = bench.Pieces({}, float("inf"), path)
    assert pieces.get("a/1", lambda: {"a/1": 1, "b/1": 2}) == 1
    late = bench.Pieces(dict(pieces.state), 0.0, path)
    assert late.get("b/1", lambda: pytest.fail("recomputed")) == 2  # stored: no compute
    with pytest.raises(bench.Stop):
        late.get("a/2", lambda: {"a/2": 3})
    assert path.is_file()


def test_resume_refuses_a_state_of_another_plan(bench, monkeypatch, tmp_path, capsys):
    path = tmp_path / "rs.json"
    plan = json.loads(json.dumps(dict(bench.plan(True), seed0=0)))
    stored = dict(plan, seeds=plan["seeds"] + 1)
    path.with_suffix(".state.json").write_text(json.dumps({"plan": stored}))
    argv = ["run.py", "--quick", "--json", str(path), "--resume"]
    monkeypatch.setattr(sys, "argv", argv)
    with refused(capsys, r"rs.state.json was written with another plan \(seeds: "):
        bench.main()  # nothing trained: the check comes first


def _doc(top, default, dens_top, dens_default, converged=1.0):
    seeds = list(range(len(top)))
    rows = [{"case": "8c2", "metric": "target_ppl", "value": max(top + default)}]
    for m, ppl, dens in (("top-k", top, dens_top), ("default", default, dens_default)):
        case = f"8c2/{m}"
        for metric, vals in (
            ("val_ppl", ppl),
            ("tokens_to_target", [1000 * v for v in ppl]),
            ("router_grad_density", dens),
        ):
            rows.append({"case": case, "metric": metric, "value": sum(vals) / len(vals)})
            rows += [
                {"case": case, "metric": f"{metric} seed {s}", "value": v}
                for s, v in zip(seeds, vals, strict=True)
            ]
        rows.append({"case": case, "metric": "converged", "value": converged})
        rows.append({"case": case, "metric": "step_time", "value": 20.0})
    rows.append({"case": "8c2/default", "metric": "val_ppl p_sign", "value": 0.03})
    return {"machine": {"seeds": seeds, "ft_seeds": seeds[:3]}, "rows": rows}


def test_verdicts_part_a(bench):
    top = [7.0 + 0.01 * i for i in range(12)]
    better = [t - 0.1 - 0.001 * i for i, t in enumerate(top)]
    doc = _doc(top, better, [0.25] * 12, [0.99 + 0.0001 * i for i in range(12)])
    v = {e["claim"]: e for e in bench.verdicts(doc)}
    ppl = v["Default MoE lowers the final perplexity (8c2)"]
    assert ppl["verdict"] == "reproduced" and ppl["decisive"] and ppl["converged"]
    assert "sign test p = 0.03" in ppl["why"] and "t-test" in ppl["why"]
    assert v["Default MoE gives the router a dense gradient (8c2)"]["verdict"] == "reproduced"
    assert v["Default MoE costs little training-step time (8c2)"]["verdict"] == "not decided"
    # not flat: the same numbers are reproduced but not decisive
    v = {e["claim"]: e for e in bench.verdicts(_doc(top, better, [0.25] * 12, [1.0] * 12, 0.5))}
    assert not v["Default MoE lowers the final perplexity (8c2)"]["decisive"]
    # worse per seed: contradicted
    worse = [t + 0.1 + 0.001 * i for i, t in enumerate(top)]
    v = {e["claim"]: e for e in bench.verdicts(_doc(top, worse, [0.25] * 12, [1.0] * 12))}
    assert v["Default MoE lowers the final perplexity (8c2)"]["verdict"] == "contradicted"


def test_flat_probe_tail_gain():
    with load_benchmark("routing_science/flat_probe.py", "routing_science_flat_probe") as probe:
        steps = [0, 20, 40, 60, 80, 100]
        assert probe.tail_gain(steps, [5.0, 3.0, 2.5, 2.2, 2.0, 1.9]) == pytest.approx(5.0)
        assert probe.tail_gain(steps, [5.0, 3.0, 2.5, 2.2, 2.0, 2.1]) == pytest.approx(-5.0)
        assert probe.FLAT_RULE.startswith("validation loss")
