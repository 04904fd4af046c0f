import pytest
import torch
from torch import nn

from sci_moe.language.mxd import capture, mlp_site, next_token_ce, splice


def test_llama_hooks_capture_exactly_the_mlp(tiny_llama, windows):
    site = mlp_site(tiny_llama, 1)
    block = tiny_llama.model.layers[1]
    seen = {}
    h = block.post_attention_layernorm.register_forward_hook(
        lambda m, a, o: seen.setdefault("norm_out", o.detach())
    )
    with capture(site) as store:
        tiny_llama(input_ids=windows.ids[:2])
    h.remove()
    # the MLP input is the post-attention RMSNorm's output, the output is mlp(input)
    assert torch.equal(store["input"], seen["norm_out"])
    assert torch.equal(store["output"], block.mlp(store["input"]))
    assert store["input"].shape == (2, windows.context_len, 16)


def test_bert_hooks_capture_exactly_the_mlp(tiny_bert, windows):
    site = mlp_site(tiny_bert, -1)
    assert site.layer == 1 and site.architecture == "bert"
    block = tiny_bert.encoder.layer[1]
    with capture(site) as store:
        tiny_bert(input_ids=windows.ids[:2])
    expected = block.output.dense(block.intermediate(store["input"]))
    assert torch.equal(store["output"], expected)
    assert torch.equal(site.mlp(store["input"]), expected)


def test_splicing_the_original_mlp_back_changes_nothing(tiny_llama, tiny_bert, windows):
    site = mlp_site(tiny_llama, 2)
    base = next_token_ce(tiny_llama, windows.ids, batch_size=3)
    with splice(site, site.mlp):
        again = next_token_ce(tiny_llama, windows.ids, batch_size=3)
    assert again - base == 0.0
    bsite = mlp_site(tiny_bert, 0)
    ref = tiny_bert(input_ids=windows.ids).last_hidden_state
    with splice(bsite, bsite.mlp):
        out = tiny_bert(input_ids=windows.ids).last_hidden_state
    assert torch.equal(out, ref)
    # restored afterwards, and a real replacement does change the loss
    assert isinstance(tiny_bert.encoder.layer[0].output.dense, nn.Linear)
    with splice(site, lambda x: torch.zeros_like(x)):
        assert next_token_ce(tiny_llama, windows.ids) != base
    assert next_token_ce(tiny_llama, windows.ids, batch_size=3) == base


def test_bad_sites(tiny_llama):
    with pytest.raises(ValueError, match="out of range: this model has 3 blocks"):
        mlp_site(tiny_llama, 3)
    with pytest.raises(ValueError, match="integer"):
        mlp_site(tiny_llama, 1.0)
    with pytest.raises(ValueError, match="no transformer blocks"):
        mlp_site(nn.Linear(2, 2), 0)
    tiny_llama.model.layers[0].mlp = nn.Identity()
    with pytest.raises(ValueError, match="no 'mlp' module"):
        mlp_site(tiny_llama, 0)
    site = mlp_site(tiny_llama, 1)
    with splice(site, lambda x: x[:, :3]), pytest.raises(ValueError, match="returned shape"):
        tiny_llama(input_ids=torch.zeros(1, 4, dtype=torch.long))
