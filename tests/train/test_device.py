"""The run's device: names checked, CUDA refused clearly where there is none, batches moved."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest
import torch
from torch import nn

from sci_moe._util import check_device_name, module_device, resolve_device, to_device
from sci_moe.train import RESUMABLE_CHANGES, ShuffledBatches, TrainConfig, Trainer

from ._toy import make, weights

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")


class Pair(NamedTuple):
    a: torch.Tensor
    label: str


@dataclasses.dataclass(frozen=True)
class Item:
    x: torch.Tensor
    n: int


@pytest.mark.parametrize("name", ["cpu", "cuda", "cuda:0", "cuda:12"])
def test_device_names_accepted(name):
    assert check_device_name(name) == name
    assert TrainConfig(device=name).device == name  # spelling only: readable on any machine


@pytest.mark.parametrize("name", ["tpu", "CUDA", "cuda:", "cuda:x", "cuda0", "", 0])
def test_device_names_refused_with_the_valid_ones(name):
    with pytest.raises(ValueError, match="'cpu', 'cuda' or 'cuda:N'"):
        check_device_name(name)
    with pytest.raises(ValueError, match="device must be"):
        TrainConfig(device=name)


def test_the_default_is_the_process_groups_device():
    """``None``: the GPU of a NCCL process group, else the CPU (no GPU use by surprise)."""
    assert TrainConfig().device is None
    assert make(steps=2).device == torch.device("cpu")


def test_device_may_change_on_resume_like_threads():
    assert {"device", "threads"} <= RESUMABLE_CHANGES
    assert "device" not in TrainConfig().resume_signature()


@NO_CUDA
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_cuda_without_a_gpu_is_refused_with_what_to_do(name):
    with pytest.raises(ValueError, match=r"--device='cuda.*no CUDA device.*use --device=cpu"):
        resolve_device(name, what="--device")
    with pytest.raises(ValueError, match="no CUDA device"):
        make(steps=2, device=name)


def test_to_device_walks_containers_and_keeps_their_types():
    t = torch.arange(3.0)
    batch = {
        "x": t,
        "list": [t, 2],
        "pair": Pair(t, "a"),
        "item": Item(t, 5),
        "tuple": (t, "s", None),
        "array": [1.5, "text"],
    }
    out = to_device(batch, "cpu")
    assert out is not batch and set(out) == set(batch)
    assert isinstance(out["pair"], Pair) and out["pair"].label == "a"
    assert isinstance(out["item"], Item) and out["item"].n == 5
    assert out["tuple"][1:] == ("s", None) and out["list"][1] == 2
    assert torch.equal(out["x"], t) and torch.equal(out["item"].x, t)
    assert batch["list"] == [t, 2]  # the input is left as it was


def test_to_device_moves_objects_with_a_to_method():
    torch_geometric = pytest.importorskip("torch_geometric")
    g = torch_geometric.data.Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]))
    out = to_device([g], torch.device("cpu"))
    assert torch.equal(out[0].x, g.x) and out[0].num_nodes == 3


def test_to_device_lets_a_packed_sequence_move_itself():
    """A PackedSequence is a named tuple whose lengths must stay on the CPU: its own ``to``."""
    from torch.nn.utils.rnn import pack_sequence

    packed = pack_sequence([torch.ones(3, 2), torch.ones(2, 2)])
    out = to_device({"x": packed}, "cpu")["x"]
    assert type(out) is type(packed) and torch.equal(out.data, packed.data)
    assert out.batch_sizes.device.type == "cpu"


def test_module_device():
    assert module_device(nn.Linear(2, 2)) == torch.device("cpu")
    assert module_device(nn.Identity()) == torch.device("cpu")
    m = nn.Module()
    m.register_buffer("b", torch.zeros(1))
    assert module_device(m) == torch.device("cpu")


def test_explicit_cpu_is_the_default_bit_for_bit():
    a, b = make(steps=12), make(steps=12, device="cpu")
    a.fit()
    b.fit()
    assert a.device == b.device == torch.device("cpu")
    wa, wb = weights(a), weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_checkpoint_without_a_device_field_resumes(tmp_path):
    """Runs written before ``device`` existed (the field counts as its default there)."""
    from sci_moe._util import load_latest, save_verified

    t = make(steps=10, out_dir=tmp_path, checkpoint_every=1, restore_best=False)
    t.fit(stop_after=4)
    path = tmp_path / "checkpoint.pt"
    state, _, _ = load_latest(path, what="checkpoint")
    del state["config"]["device"]
    save_verified(path, state)
    r = make(steps=10, out_dir=tmp_path, checkpoint_every=1, restore_best=False)
    r.fit(resume=True)
    u = make(steps=10, restore_best=False)
    u.fit()
    wr, wu = weights(r), weights(u)
    assert all(torch.equal(wr[k], wu[k]) for k in wr)


def _cuda_trainer(steps: int, out_dir=None, device: str = "cuda", **kw) -> Trainer:
    cfg = TrainConfig(
        steps=steps, batch_size=8, lr=0.02, eval_every=5, progress=False, device=device, **kw
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    y = torch.sin(x.sum(1, keepdim=True))
    model = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
    data = ShuffledBatches(64, cfg.batch_size, lambda i: {"x": x[i], "y": [y[i]]}, seed=0)
    seen = []

    def loss(m, b):
        seen.append((b["x"].device.type, b["y"][0].device.type))
        return nn.functional.mse_loss(m(b["x"]), b["y"][0])

    def evaluate(m):
        dev = module_device(m)
        return {"val_loss": float(nn.functional.mse_loss(m(x.to(dev)), y.to(dev)))}

    t = Trainer(model, loss, data, cfg, evaluate=evaluate, out_dir=out_dir, name="cuda")
    t.seen = seen
    return t


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda_moves_the_model_and_every_batch():
    t = _cuda_trainer(60)
    res = t.fit()
    assert module_device(t.model).type == "cuda"
    assert set(t.seen) == {("cuda", "cuda")}
    assert res.best_metric < t.evals[0]["val_loss"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cpu_run_resumes_on_cuda(tmp_path):
    a = _cuda_trainer(20, tmp_path, device="cpu", checkpoint_every=1)
    a.fit(stop_after=10)
    b = _cuda_trainer(20, tmp_path, device="cuda", checkpoint_every=1)
    b.fit(resume=True)
    assert b.step == 20 and module_device(b.model).type == "cuda"
    c = _cuda_trainer(20, device="cpu")
    c.fit()
    for k, v in c.model.state_dict().items():  # same arithmetic, other rounding
        torch.testing.assert_close(b.model.state_dict()[k].cpu(), v, rtol=1e-3, atol=1e-4)


def test_run_device_is_the_engines_rule():
    from sci_moe.train import DistributedContext, run_device

    assert run_device(None, DistributedContext()) == torch.device("cpu")
    assert run_device("cpu", DistributedContext()) == torch.device("cpu")
    nccl = DistributedContext(rank=1, world_size=2, backend="nccl", local_rank=1)
    assert run_device(None, nccl) == torch.device("cuda", 1)
    assert run_device("cuda", nccl) == run_device("cuda:0", nccl) == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"NCCL.*device='cpu'.*--device cuda"):
        run_device("cpu", nccl)
    gloo = DistributedContext(rank=0, world_size=2, backend="gloo")
    assert run_device(None, gloo) == run_device("cpu", gloo) == torch.device("cpu")
