"""Data-parallel training on the engine: 2 gloo processes (each global batch split over
them, gradients averaged) reach the same parameters as one process on the same global
batches; only rank 0 writes."""

from __future__ import annotations

import socket

import torch
import torch.multiprocessing as mp

from sci_moe.molecules.spice import build_model, fit
from sci_moe.molecules.spice.train import RESULTS_NAME, TrainConfig
from sci_moe.train import CHECKPOINT_NAME, init_distributed
from tests.molecules.spice.test_spice_model import FA, FB, random_graph

OPTS = dict(n_targets=2, atom_dim=FA, bond_dim=FB, hidden=8, num_layers=1, num_rbf=4)
CFG = dict(epochs=2, batch_size=4, lr=1e-2, warmup_epochs=0, patience=0, progress=False)


def _data():
    graphs = [random_graph(5, 2, seed=s) for s in range(10)]
    return graphs[:8], graphs[8:]


def _train(out_dir):
    torch.manual_seed(0)
    model = build_model("deepsets", **OPTS)
    train, val = _data()
    fit(model, train, val, config=TrainConfig(**CFG), out_dir=out_dir)
    return model.state_dict()


def _worker(rank: int, world: int, port: int, out_dir: str, result: str) -> None:
    import os

    torch.set_num_threads(1)
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world)
    )
    ctx = init_distributed()
    assert ctx.backend == "gloo" and ctx.world_size == world
    state = _train(out_dir if rank == 0 else f"{out_dir}_rank{rank}")
    torch.save(state, f"{result}.{rank}")
    torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_match_one_process(tmp_path):
    ref = _train(None)
    out = tmp_path / "ddp"
    result = str(tmp_path / "state")
    mp.spawn(_worker, args=(2, _free_port(), str(out), result), nprocs=2, join=True)
    for rank in range(2):
        got = torch.load(f"{result}.{rank}", weights_only=True)
        for name, p in ref.items():
            torch.testing.assert_close(got[name], p, atol=1e-5, rtol=1e-4, msg=name)
    assert (out / CHECKPOINT_NAME).exists() and (out / RESULTS_NAME).exists()
    rank1 = tmp_path / "ddp_rank1"
    assert not (rank1 / CHECKPOINT_NAME).exists() and not (rank1 / RESULTS_NAME).exists()
