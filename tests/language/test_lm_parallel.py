"""The LM on two gloo processes: data parallelism, and expert parallelism composed with it.

One launch of two spawned processes runs, on the same per-rank windows: plain data
parallelism; expert parallelism (experts sharded over both ranks, the engine's
``grad_sync`` = ``expert_data_parallel_sync``); and the expert-parallel run interrupted
after 2 steps and resumed from its per-rank checkpoints.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sci_moe.language import MoELMConfig, TrainConfig, run_training, text_corpus

STEPS = 4


def _setup():
    corpus = text_corpus("The cat sat on the mat, and the dog ran in the sun. " * 60)
    model = MoELMConfig(
        d_model=16,
        n_layers=2,
        n_heads=2,
        seq_len=8,
        d_hidden=16,
        num_experts=4,
        top_k=2,
        moe={"selection_bias": True, "default_moe": True, "orthogonality_coef": 0.01},
    )
    train = TrainConfig(
        steps=STEPS,
        batch_size=4,
        optimizer="sgd",  # a wrong gradient scale shows in the weights (Adam would hide it)
        lr=0.5,
        warmup=0.25,
        eval_every=2,
        eval_batches=1,
        bias_balancing=1e-2,
        progress=False,
    )
    return corpus, model, train


def _worker(rank: int, world: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    corpus, mcfg, tcfg = _setup()
    dp = run_training(mcfg, tcfg, corpus=corpus)
    ep_cfg = dataclasses.replace(tcfg, expert_parallel=True)
    ep = run_training(mcfg, ep_cfg, f"{out}/a", corpus=corpus)
    part = run_training(mcfg, ep_cfg, f"{out}/b", corpus=corpus, stop_after=2)
    resumed = run_training(mcfg, ep_cfg, f"{out}/b", True, corpus=corpus)
    try:  # another run in a folder of expert-parallel checkpoints is refused on every rank
        run_training(mcfg, ep_cfg, f"{out}/b", corpus=corpus)
        refused = None
    except ValueError as err:
        refused = str(err)
    result = {
        "dp": dp.model.state_dict(),
        "ep": ep.full_state_dict(),
        "resumed": resumed.full_state_dict(),
        "ep_local": ep.model.state_dict(),
        "val_loss": ep.history["val_loss"],
        "dp_val_loss": dp.history["val_loss"],
        "part_step": part.result.step,
        "resumed_from": resumed.result.resumed_from,
        "refused": refused,
    }
    torch.save(result, f"{out}/rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)  # skip finalisation: gloo's threads occasionally abort it


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm_parallel")
    ctx = mp.start_processes(
        _worker, args=(2, _free_port(), str(out)), nprocs=2, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + 180
    try:
        while not ctx.join(timeout=1.0):  # re-raises a worker's exception
            if time.monotonic() > deadline:
                raise TimeoutError("the two LM training processes hung")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
    return out, [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(2)]


def test_data_parallel_replicas_stay_identical(ranks):
    _, (r0, r1) = ranks
    assert r0["dp"].keys() == r1["dp"].keys()
    for k in r0["dp"]:  # weights, selection biases and Default MoE's EMA
        assert torch.equal(r0["dp"][k], r1["dp"][k]), k


def test_expert_parallel_trains_like_data_parallel(ranks):
    _, (r0, r1) = ranks
    assert r0["val_loss"][-1] < r0["val_loss"][0]
    assert r0["ep"].keys() == r0["dp"].keys()
    for k in r0["dp"]:
        torch.testing.assert_close(r0["ep"][k], r0["dp"][k], rtol=1e-5, atol=1e-6, msg=k)
    torch.testing.assert_close(r0["val_loss"], r0["dp_val_loss"], rtol=1e-5, atol=1e-6)
    # each rank holds half of every expert bank, the rest is replicated
    local0, local1 = r0["ep_local"], r1["ep_local"]
    for k in local0:
        if ".experts." in k:
            assert local0[k].shape[0] == r0["ep"][k].shape[0] // 2
            assert not torch.equal(local0[k], local1[k]), k
        else:
            assert torch.equal(local0[k], local1[k]), k


def test_expert_parallel_resume_is_exact(ranks):
    out, (r0, r1) = ranks
    assert r0["part_step"] == 2 and r0["resumed_from"] == 2 and r1["resumed_from"] == 2
    for k in r0["ep"]:
        assert torch.equal(r0["resumed"][k], r0["ep"][k]), k
    assert (out / "b" / "checkpoint.pt").is_file()
    assert (out / "b" / "expert_rank1" / "checkpoint.pt").is_file()
    assert "expert-parallel" in r0["refused"] and "expert-parallel" in r1["refused"]
