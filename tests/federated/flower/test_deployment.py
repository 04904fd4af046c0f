"""FedLEASE on a real Flower deployment on loopback (TLS): one SuperLink, four SuperNodes.

Each SuperNode holds one client's file only. The first ``flwr run`` starts with client 3's
node down (its round-0 update is missing, the round goes on with the others, the server
records why) and stops after round 0; then client 3's node joins and a second ``flwr run``
resumes from the server's checkpoint to the end and evaluates. The result must equal the
in-process simulator's, with client 3 dropping out of round 0, bit for bit: every expert,
router and cluster label, every round's updates, loss and byte counts, every test metric.
Timeouts are for start-up only (generous); nothing depends on how fast the machine is.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("flwr", reason="flwr is not installed (pip install 'sci-moe[federated]')")

from sci_moe.federated import RoundPlan, Server, Simulator
from sci_moe.federated.fedlease import FedLEASE
from sci_moe.federated.flower import save_client, save_strategy, write_app
from tests.federated.fedlease._tiny import tiny_clients
from tests.federated.fedlease.test_flow import _states_equal
from tests.federated.flower._deploy import Deployment

PLAN = RoundPlan(rounds=2, warmup_epochs=1, local_epochs=1, seed=1)
#: Seconds one ``flwr run`` may take (a loaded 2-core machine takes about two minutes).
RUN_TIMEOUT = 900.0


@pytest.fixture
def deployment(tmp_path):
    d = Deployment(tmp_path, tls=True)
    try:
        yield d
    finally:
        d.close()


def _strategy(spec):
    return FedLEASE(spec, 4, PLAN, max_clusters=2)


@pytest.mark.slow  # about 1-4 minutes: Flower polls every 3 s, each app process imports torch
def test_flower_rounds_equal_the_simulator_with_a_dropped_client(deployment, tmp_path):
    spec, clients = tiny_clients(4, 2, n=12, seed=1)
    save_strategy(_strategy(spec), tmp_path / "strategy.pt")
    for c in clients:
        save_client(c, tmp_path / f"client{c.client_id}.pt")
    app = write_app(tmp_path / "app", strategy_file=str(tmp_path / "strategy.pt"))
    out = tmp_path / "out"

    deployment.start_superlink()
    for c in range(3):
        deployment.start_supernode(f"node{c}", tmp_path / f"client{c}.pt")
    # no round timeout (a slow machine must not drop a client); start-up waits are generous
    patience = {"round-timeout": 0.0, "join-timeout": 600.0}
    first = deployment.run(app, out, RUN_TIMEOUT, **patience, **{"min-clients": 3, "stop-after": 1})
    assert not first["finished"] and len(first["history"]) == 1
    deployment.start_supernode("node3", tmp_path / "client3.pt")
    res = deployment.run(app, out, RUN_TIMEOUT, **patience, **{"min-clients": 4, "resume": True})
    assert res["finished"] and sorted(res["nodes"]) == ["0", "1", "2", "3"]

    h = res["history"]
    assert [e["updates"] for e in h] == [[0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3]]
    assert h[0]["excluded"] == {"3": "no reply (not connected: no SuperNode holds this client)"}
    flower = Server.resume(_strategy(spec), out / "checkpoint.pt")

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _, sim_clients = tiny_clients(4, 2, n=12, seed=1, faults={3: {0: "drop"}})
        sim = Server(_strategy(spec))
        sim.run(Simulator(sim_clients))
        metrics = sim.evaluate(Simulator(sim_clients))
    finally:
        torch.set_num_threads(threads)
    assert _states_equal(flower.strategy.state_dict(), sim.strategy.state_dict())
    assert flower.strategy.num_experts == 2
    for key in ("updates", "loss", "bytes_down"):
        assert [e[key] for e in h] == [e[key] for e in sim.history], key
    # round 0's simulated drop-out still sends a (tiny) reply; rounds 1-2 match exactly
    assert [e["bytes_up"] for e in h[1:]] == [e["bytes_up"] for e in sim.history[1:]]
    assert res["metrics"] == {str(c): m for c, m in metrics.items()}
