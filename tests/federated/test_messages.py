"""FedAvg and the messages of sci_moe.federated (no model needed)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.federated import check_update, decode_message, encode_message, fedavg


def test_fedavg_sample_weights():
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor(0.0)}
    b = {"w": torch.tensor([3.0, 6.0]), "b": torch.tensor(4.0)}
    out = fedavg([a, b], [30, 10])
    torch.testing.assert_close(out["w"], torch.tensor([1.5, 3.0]))
    torch.testing.assert_close(out["b"], torch.tensor(1.0))
    assert torch.equal(fedavg([a], [7])["w"], a["w"])
    with pytest.raises(ValueError, match="positive integers"):
        fedavg([a, b], [1, 0])
    with pytest.raises(ValueError, match="one sample count"):
        fedavg([a, b], [1])


def test_messages_round_trip_and_checks():
    like = {"x.lora_b": torch.zeros(3, 2)}
    up = {
        "kind": "update",
        "client": 1,
        "n": 5,
        "expert": {"x.lora_b": torch.ones(3, 2)},
        "router": None,
        "choice": 0,
        "loss": 0.5,
    }
    back = decode_message(encode_message(up))
    assert check_update(back, 1, like, None) is None
    assert "from client" in check_update(back, 2, like, None)
    bad = dict(up, expert={"x.lora_b": torch.full((3, 2), float("nan"))})
    assert "non-finite" in check_update(bad, 1, like, None)
    bad = dict(up, expert={"x.lora_b": torch.ones(3, 1)})
    assert "shape" in check_update(bad, 1, like, None)
    bad = dict(up, expert={})
    assert "keys differ" in check_update(bad, 1, like, None)
    assert "dropped out" in check_update({"kind": "dropped", "client": 1}, 1, like, None)
    assert "choice" in check_update(dict(up, choice=3), 1, like, None, num_choices=2)
    with pytest.raises(ValueError, match="undecodable"):
        decode_message(b"not a message")
