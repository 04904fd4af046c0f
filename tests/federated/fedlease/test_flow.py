"""FedLEASE and its baselines: rounds, faults, checkpoints (Flower: tests/federated/flower)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from sci_moe.federated import RoundPlan, Server, Simulator, TrainConfig
from sci_moe.federated.fedlease import IFCA, FedIT, FedLEASE, LocalLoRA
from tests.federated.fedlease._tiny import tiny_clients

PLAN = RoundPlan(rounds=2, warmup_epochs=2, local_epochs=1, seed=0)


def _states_equal(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_states_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_states_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


@pytest.fixture(scope="module")
def setup():
    return tiny_clients(6, 2, n=16, seed=0)


def test_fedlease_rounds_and_routing(setup):
    spec, clients = setup
    strat = FedLEASE(spec, 6, PLAN, max_clusters=4)
    server = Server(strat)
    server.run(Simulator(clients))
    assert server.done and len(server.history) == 3
    assert strat.num_experts == len(set(strat.labels)) >= 2
    # every round message carries all experts down and one expert + router up
    assert server.history[1]["bytes_down"] > server.history[0]["bytes_down"]
    metrics = server.evaluate(Simulator(clients))
    assert sorted(metrics) == list(range(6))
    for m in metrics.values():
        assert 0.0 <= m["accuracy"] <= 1.0
        for used in m["experts_used"].values():
            assert 1.0 <= used <= strat.num_experts


@pytest.mark.parametrize("kind", ["fedit", "local", "ifca"])
def test_baselines_run(setup, kind):
    spec, clients = setup
    strat = {"fedit": FedIT, "local": LocalLoRA}.get(kind)
    strat = strat(spec, 6, PLAN) if strat else IFCA(spec, 6, PLAN, num_clusters=2)
    server = Server(strat)
    server.run(Simulator(clients))
    metrics = server.evaluate(Simulator(clients))
    assert len(metrics) == 6
    if kind == "ifca":
        assert len(strat.labels) == 6 and set(strat.labels) <= {0, 1}
    if kind == "fedit":  # one shared model: every client evaluates the same parameters
        assert len(server.history[-1]["updates"]) == 6


def test_dropout_and_bad_updates_are_excluded(setup, caplog):
    spec, _ = setup
    faults = {1: {1: "drop"}, 2: {1: "nan"}, 3: {2: "malformed"}}
    _, clients = tiny_clients(6, 2, n=16, seed=0, faults=faults)
    strat = FedLEASE(spec, 6, PLAN, max_clusters=4)
    server = Server(strat)
    with caplog.at_level(logging.WARNING, logger="sci_moe.federated"):
        server.run(Simulator(clients))
    h = server.history
    assert "dropped out" in h[1]["excluded"][1]
    assert "non-finite" in h[1]["excluded"][2]
    assert "shape" in h[2]["excluded"][3]
    assert h[1]["updates"] == [0, 3, 4, 5] and h[2]["updates"] == [0, 1, 2, 4, 5]
    assert "client 2 excluded" in caplog.text
    for expert in strat.experts:
        assert all(torch.isfinite(t).all() for t in expert.values())
    # nothing lost: round 1's experts are the FedAvg of exactly the surviving updates
    _, clean = tiny_clients(6, 2, n=16, seed=0)
    ref = Server(FedLEASE(spec, 6, PLAN, max_clusters=4))
    ref.run(Simulator(clean), until=1)
    msgs = ref.strategy.messages(1)
    replies = {c: clean[c].handle(msgs[c]) for c in (0, 3, 4, 5)}
    ref.strategy.aggregate(1, replies)
    faulty = Server(FedLEASE(spec, 6, PLAN, max_clusters=4))
    faulty.run(Simulator(clients), until=2)
    assert _states_equal(ref.strategy.state_dict(), faulty.strategy.state_dict())


def test_checkpoint_resume_is_bit_identical(setup, tmp_path):
    spec, clients = setup
    straight = Server(FedLEASE(spec, 6, PLAN, max_clusters=4))
    straight.run(Simulator(clients))
    ckpt = tmp_path / "server.pt"
    first = Server(FedLEASE(spec, 6, PLAN, max_clusters=4), checkpoint=ckpt)
    first.run(Simulator(clients), until=2)
    resumed = Server.resume(FedLEASE(spec, 6, PLAN, max_clusters=4), ckpt)
    assert resumed.round == 2
    resumed.run(Simulator(clients))
    assert _states_equal(straight.state_dict(), resumed.state_dict())
    with pytest.raises(ValueError, match="strategy"):
        Server.resume(FedIT(spec, 6, PLAN), ckpt)


def test_fixed_labels_and_sgd(setup):
    spec, clients = setup
    strat = FedLEASE(spec, 6, RoundPlan(rounds=1, warmup_epochs=1), fixed_labels=[0, 1] * 3)
    Server(strat).run(Simulator(clients), until=1)
    assert strat.labels == [0, 1] * 3 and strat.num_experts == 2
    # expert c starts as the plain mean of its members' warm-up states (Eq. 3)
    mean0 = (
        strat.local[0]["query.lora_b"]
        + strat.local[2]["query.lora_b"]
        + strat.local[4]["query.lora_b"]
    ) / 3
    torch.testing.assert_close(strat.experts[0]["query.lora_b"], mean0)
    with pytest.raises(ValueError, match="fixed_labels"):
        FedLEASE(spec, 6, PLAN, fixed_labels=[0, 2, 0, 2, 0, 2])
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="lbfgs")
    c = clients[0]
    sgd = type(c)(0, c.data, spec, TrainConfig(lr=0.1, optimizer="sgd"))
    reply = sgd.handle(FedIT(spec, 6, PLAN).messages(0)[0])
    assert reply["kind"] == "update" and reply["loss"] > 0


def test_bad_configs():
    spec, _ = tiny_clients(3, 1, n=4)
    with pytest.raises(ValueError, match="rounds"):
        RoundPlan(rounds=0)
    with pytest.raises(ValueError, match="max_clusters"):
        FedLEASE(spec, 4, PLAN, max_clusters=1)
    with pytest.raises(ValueError, match="num_clusters"):
        IFCA(spec, 4, PLAN, num_clusters=5)
    with pytest.raises(ValueError, match="num_clients"):
        FedIT(spec, 1, PLAN)


def _on(clients, device):
    """The same clients with their local training on ``device`` (``None``: the default)."""
    return [
        dataclasses.replace(c, train=dataclasses.replace(c.train, device=device)) for c in clients
    ]


def _run(spec, clients, kind):
    n = len(clients)
    if kind == "fedlease":
        strat = FedLEASE(spec, n, PLAN, max_clusters=4)
    else:
        strat = IFCA(spec, n, PLAN, num_clusters=2)
    server = Server(strat)
    server.run(Simulator(clients))
    return server, server.evaluate(Simulator(clients))


def _devices(obj) -> set[str]:
    if isinstance(obj, torch.Tensor):
        return {obj.device.type}
    if isinstance(obj, dict):
        return set().union(*(_devices(v) for v in obj.values()))
    if isinstance(obj, (list, tuple)):
        return set().union(*(_devices(v) for v in obj))
    return set()


@pytest.mark.parametrize("kind", ["fedlease", "ifca"])
def test_explicit_cpu_device_equals_the_default(setup, kind):
    """Frozen inputs and labels on the model's device, states sent back on the CPU: on the
    CPU nothing changes (bit for bit)."""
    spec, clients = setup
    a, ma = _run(spec, clients, kind)
    b, mb = _run(spec, _on(clients, "cpu"), kind)
    assert _states_equal(a.strategy.state_dict(), b.strategy.state_dict())
    assert a.history == b.history and ma == mb
    assert _devices(b.strategy.state_dict()) == {"cpu"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["fedlease", "ifca"])
def test_clients_on_cuda_match_the_cpu(setup, kind):
    """Local rounds (frozen inputs, labels, the expert-gradient masks), IFCA's selection
    and the evaluation on the GPU; the server aggregates and clusters CPU states."""
    spec, clients = setup
    g, mg = _run(spec, _on(clients, "cuda"), kind)
    c, mc = _run(spec, clients, kind)
    assert all(not h["excluded"] for h in g.history), g.history
    assert _devices(g.strategy.state_dict()) == {"cpu"}
    assert g.strategy.labels == c.strategy.labels
    # Loose: Adam's normalised steps magnify last-bit differences of the GPU's paths over
    # the rounds (a run on a simulated GPU device, its math on the CPU, already moved one
    # element of 32 by 6e-3, 3 %); the device checks above and below are exact.
    for ea, eb in zip(g.strategy.experts, c.strategy.experts, strict=True):
        for k in eb:
            torch.testing.assert_close(ea[k], eb[k], rtol=5e-2, atol=1e-2)
    assert sorted(mg) == sorted(mc)
    for i in mc:
        assert abs(mg[i]["accuracy"] - mc[i]["accuracy"]) <= 0.15
    reply = _on(clients, "cuda")[0].handle(g.strategy.messages(PLAN.rounds)[0])
    assert reply["kind"] == "update" and _devices(reply["expert"]) == {"cpu"}
