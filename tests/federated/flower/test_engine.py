"""FlowerEngine in process (a scripted grid): clients that drop out, fail, go silent and come
back under a new node id; the server's result equals the simulator's with the same clients
missing, bit for bit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("flwr", reason="flwr is not installed (pip install 'sci-moe[federated]')")

from sci_moe.federated import RoundPlan, Server, Simulator
from sci_moe.federated.fedlease import FedLEASE
from sci_moe.federated.flower import FlowerEngine, client_message
from tests.federated.fedlease._tiny import tiny_clients
from tests.federated.fedlease.test_flow import _states_equal

PLAN = RoundPlan(rounds=2, warmup_epochs=1, local_epochs=1, seed=0)


def stand_in(record, node, message_type, group):
    """What the engine reads of a message (a Flower ``Message`` needs a running app)."""
    meta = SimpleNamespace(
        dst_node_id=node, message_id=f"{group}-{node}", message_type=message_type
    )
    return SimpleNamespace(
        metadata=meta, content=SimpleNamespace(config_records={"sci_moe": record})
    )


class ScriptedGrid:
    """A grid whose nodes answer with the package's client code in this process.

    ``nodes``: node id -> (client, behaviour) with behaviour ``"ok"``, ``"error"`` (the
    node answers with a Flower error), ``"silent"`` (no reply before the timeout) or
    ``"unavailable"`` (the SuperLink answers with an error of its own).
    """

    def __init__(self, nodes):
        self.nodes = nodes
        self.hellos = 0

    def get_node_ids(self):
        return list(self.nodes)

    def send_and_receive(self, messages, *, timeout=None):
        replies = []
        for msg in messages:
            node = msg.metadata.dst_node_id
            client, behaviour = self.nodes[node]
            record = msg.content.config_records["sci_moe"]
            kind = "hello" if record.get("kind") == "hello" else "round"
            self.hellos += kind == "hello"
            meta = SimpleNamespace(src_node_id=node, reply_to_message_id=msg.metadata.message_id)
            if behaviour == "silent" and kind != "hello":
                continue
            if behaviour == "unavailable" and kind != "hello":  # the SuperLink answers
                meta.src_node_id = 1
                err = SimpleNamespace(code=5, reason="node unavailable")
                replies.append(SimpleNamespace(metadata=meta, error=err, has_error=lambda: True))
                continue
            if behaviour == "error" and kind != "hello":
                err = SimpleNamespace(code=0, reason="ClientApp raised an exception")
                replies.append(SimpleNamespace(metadata=meta, error=err, has_error=lambda: True))
                continue
            out = client_message(client, kind, record.get("payload"))
            content = SimpleNamespace(config_records={"sci_moe": out})
            replies.append(SimpleNamespace(metadata=meta, content=content, has_error=lambda: False))
        return replies


def test_drop_out_error_silence_and_rejoin_match_the_simulator():
    torch.set_num_threads(1)
    spec, clients = tiny_clients(4, 2, n=12, seed=0)
    grid = ScriptedGrid({100 + c.client_id: (c, "ok") for c in clients})
    engine = FlowerEngine(grid, 4, round_timeout=5.0, join_timeout=5.0, make_message=stand_in)
    assert engine.wait_for_clients(4) == [0, 1, 2, 3]
    server = Server(FedLEASE(spec, 4, PLAN, max_clusters=2))
    server.step(engine)  # round 0: everyone
    del grid.nodes[101]  # client 1's node leaves
    grid.nodes[102] = (clients[2], "error")  # client 2's app fails
    grid.nodes[100] = (clients[0], "unavailable")  # the SuperLink lost client 0's node
    server.step(engine)
    grid.nodes[201] = (clients[1], "ok")  # client 1 comes back as a new node
    grid.nodes[102] = (clients[2], "ok")
    grid.nodes[100] = (clients[0], "ok")
    grid.nodes[103] = (clients[3], "silent")  # client 3 does not answer in time
    server.step(engine)
    h = server.history
    assert [e["updates"] for e in h] == [[0, 1, 2, 3], [3], [0, 1, 2]]
    assert h[1]["excluded"][1] == "no reply (not connected: no SuperNode holds this client)"
    assert "ClientApp raised an exception" in h[1]["excluded"][2]
    assert "node unavailable" in h[1]["excluded"][0]
    assert "round timeout (5.0 s)" in h[2]["excluded"][3]
    assert engine.nodes == {0: 100, 1: 201, 2: 102, 3: 103}
    assert grid.hellos == 5  # four at the start, one for the node that came back

    # the same rounds in the simulator with the same clients missing
    faults = {0: {1: "drop"}, 1: {1: "drop"}, 2: {1: "drop"}, 3: {2: "drop"}}
    _, sim_clients = tiny_clients(4, 2, n=12, seed=0, faults=faults)
    sim = Server(FedLEASE(spec, 4, PLAN, max_clusters=2))
    sim.run(Simulator(sim_clients))
    assert _states_equal(server.strategy.state_dict(), sim.strategy.state_dict())
    assert [e["updates"] for e in sim.history] == [e["updates"] for e in h]
    assert [e["loss"] for e in sim.history] == [e["loss"] for e in h]
    assert [e["bytes_down"] for e in sim.history] == [e["bytes_down"] for e in h]


def test_engine_rejects_bad_settings_and_too_few_clients():
    _, clients = tiny_clients(3, 2, n=8, seed=0)
    grid = ScriptedGrid({7: (clients[0], "ok")})
    with pytest.raises(ValueError, match="num_clients"):
        FlowerEngine(grid, 0)
    with pytest.raises(ValueError, match="round_timeout"):
        FlowerEngine(grid, 3, round_timeout=0.0)
    ticks = iter(range(100))
    engine = FlowerEngine(
        grid,
        3,
        join_timeout=3.0,
        clock=lambda: float(next(ticks)),
        sleep=lambda s: None,
        make_message=stand_in,
    )
    with pytest.raises(ValueError, match="only 1 of the 2 clients"):
        engine.wait_for_clients(2)
    with pytest.raises(ValueError, match="min_clients"):
        engine.wait_for_clients(4)
