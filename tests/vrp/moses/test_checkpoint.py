"""A trained MoSES policy saved and loaded gives the same rollouts; bad files are refused."""

import pytest
import torch

from sci_moe.vrp import generate_instances
from sci_moe.vrp.moses import MTVRPPolicy, PolicyConfig, load_policy, save_policy, train_moses


def test_policy_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    pol = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
    costs = train_moses(pol, (1, 1, 1), batch_size=2, num_customers=5, progress=False)
    assert set(costs) == {"backbone", "expert", "gated"} and pol.mode == "gated"
    path = save_policy(tmp_path / "m.pt", pol, steps=[1, 1, 1])
    back, meta = load_policy(path)
    assert meta == {"steps": [1, 1, 1]} and back.mode == "gated"
    ins = generate_instances(2, 6, ["VRPTW", "OVRPBL"], seed=1)
    pol.eval()
    with torch.no_grad():
        a = pol(ins, greedy=True)
        b = back(ins, greedy=True)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot load"):
        load_policy(tmp_path / "junk.pt")
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"not a sci_moe\.vrp policy checkpoint"):
        load_policy(tmp_path / "other.pt")
    with pytest.raises(ValueError, match="does not exist"):
        load_policy(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="steps must give"):
        train_moses(pol, (1, 1))


def test_policy_of_the_old_format_is_refused(tmp_path):
    torch.save({"format": "sci_moe.vrp.policy/1"}, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="retrain"):
        load_policy(tmp_path / "old.pt")
