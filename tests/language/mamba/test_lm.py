"""Mamba / RoM / hybrid stacks in the MoE language model, trained by its trainer."""

import pytest
import torch

from sci_moe.language import MoELMConfig, MoETransformerLM, TextCorpus, TrainConfig, train
from sci_moe.language.mamba import MambaBlock, RoMBlock


def _corpus():
    g = torch.Generator().manual_seed(0)
    text = torch.randint(0, 256, (4000,), generator=g, dtype=torch.uint8)
    return TextCorpus(train=text[:3500], val=text[3500:], sources={})


def test_hybrid_stack_builds_and_routes():
    cfg = MoELMConfig(
        d_model=16,
        n_layers=3,
        n_heads=2,
        seq_len=8,
        d_hidden=16,
        num_experts=2,
        top_k=1,
        layers="ram",
        mamba={"d_state": 4, "num_experts": 3, "top_k": 2},
    )
    model = MoETransformerLM(cfg)
    kinds = [type(b.attn) for b in model.blocks]
    assert kinds[0] is RoMBlock and kinds[2] is MambaBlock
    assert model.blocks[0].attn.config.num_experts == 3
    assert model.blocks[0].ffn is None and model.blocks[1].ffn is not None
    logits, aux, infos = model(torch.zeros(2, 8, dtype=torch.long))
    assert logits.shape == (2, 8, 256) and len(infos) == 1 and aux > 0


def test_no_positions_allows_longer_context():
    cfg = MoELMConfig(
        d_model=16,
        n_layers=1,
        n_heads=2,
        seq_len=8,
        layers="m",
        positions=False,
        mamba={"d_state": 4},
    )
    model = MoETransformerLM(cfg)
    assert model(torch.zeros(1, 32, dtype=torch.long))[0].shape == (1, 32, 256)
    assert MoETransformerLM(MoELMConfig(d_model=16, n_heads=2)).pos is not None


def test_trainer_resumes_a_rom_model_exactly(tmp_path):
    cfg = MoELMConfig(
        d_model=16,
        n_layers=2,
        n_heads=2,
        seq_len=16,
        layers="rr",
        positions=False,
        mamba={"d_state": 4, "num_experts": 2, "top_k": 1},
    )
    tc = TrainConfig(
        steps=4,
        batch_size=2,
        eval_batches=1,
        eval_every=2,
        warmup=0.25,
        progress=False,
    )
    corpus = _corpus()
    full, m_full = train(cfg, tc, tmp_path / "a", corpus=corpus, return_model=True)
    train(cfg, tc, tmp_path / "b", corpus=corpus, stop_after=2)
    resumed, m_res = train(cfg, tc, tmp_path / "b", resume=True, corpus=corpus, return_model=True)
    assert resumed["val_loss"] == full["val_loss"]
    for a, b in zip(m_full.state_dict().values(), m_res.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_bad_layer_patterns():
    with pytest.raises(ValueError, match="one letter"):
        MoELMConfig(n_layers=2, layers="ax")
    with pytest.raises(ValueError, match="one letter"):
        MoELMConfig(n_layers=2, layers="a")
    with pytest.raises(ValueError, match="top_k"):
        MoELMConfig(n_layers=1, layers="r", mamba={"num_experts": 2, "top_k": 3})
    with pytest.raises(ValueError, match="d_state"):
        MoELMConfig(n_layers=1, layers="m", mamba={"d_state": 0})


def _recurrent_model(layers="rmr", ffn=True):
    from sci_moe.language import MoELMConfig, MoETransformerLM

    torch.manual_seed(0)
    cfg = MoELMConfig(
        d_model=16,
        n_layers=len(layers),
        n_heads=2,
        seq_len=16,
        d_hidden=16,
        num_experts=2,
        top_k=1,
        layers=layers,
        positions=False,
        mamba={"d_state": 4, "num_experts": 3, "top_k": 2, "ffn": ffn},
    )
    return MoETransformerLM(cfg).eval()


def test_step_by_step_lm_equals_full_forward():
    from sci_moe.language.mamba import initial_states, lm_step

    model = _recurrent_model()
    idx = torch.randint(0, 256, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(idx)[0]
        logits, states = lm_step(model, idx[:, :4], initial_states(model, 2))  # prefill
        steps = [logits]
        for t in range(4, 11):
            logits, states = lm_step(model, idx[:, t : t + 1], states)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    sizes = {tuple(s.ssm.shape) for s in states}
    assert sizes == {(2, 32, 4)}  # constant-size state: d_inner x d_state per sequence


def test_recurrent_generate_greedy_matches_argmax_of_forward():
    from sci_moe.language.mamba import recurrent_generate

    model = _recurrent_model("rr", ffn=False)
    prompt = torch.tensor([[72, 101, 108]])
    out = recurrent_generate(model, prompt, 5, temperature=0.0)
    assert out.shape == (1, 8) and torch.equal(out[:, :3], prompt)
    with torch.no_grad():
        for t in range(3, 8):  # each greedy token is the argmax of the full forward
            assert out[0, t] == model(out[:, :t])[0][0, -1].argmax()
    g = torch.Generator().manual_seed(0)
    a = recurrent_generate(model, prompt, 4, generator=g)
    b = recurrent_generate(model, prompt, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)


def test_recurrent_generate_rejects_attention_and_positions():
    from sci_moe.language import MoELMConfig, MoETransformerLM
    from sci_moe.language.mamba import recurrent_generate

    prompt = torch.zeros(1, 2, dtype=torch.long)
    attn = MoETransformerLM(
        MoELMConfig(d_model=16, n_layers=2, n_heads=2, layers="am", positions=False,
                    mamba={"d_state": 4})
    )  # fmt: skip
    with pytest.raises(ValueError, match="KV cache"):
        recurrent_generate(attn, prompt, 2)
    pos = MoETransformerLM(
        MoELMConfig(d_model=16, n_layers=1, n_heads=2, layers="m", mamba={"d_state": 4})
    )
    with pytest.raises(ValueError, match="position table"):
        recurrent_generate(pos, prompt, 2)
    with pytest.raises(ValueError, match="prompt must have shape"):
        recurrent_generate(_recurrent_model("r", ffn=False), torch.zeros(1, 0).long(), 2)
