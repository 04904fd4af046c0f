"""Expert parallelism: 1, 2 and 4 spawned gloo processes vs the single-process MoE.

Each world size is launched once (a module-scoped fixture); every rank runs all cases
of that world size, writes the maximum errors to a JSON file in ``tmp_path`` and the
tests below check them. Each rank builds the same full layer (same seed), runs the
single-process reference on the concatenated tokens itself, then the expert-parallel
layer on its own token shard, and compares the output shard, the input-gradient shard,
the replicated gradients (router, shared experts; after ``sync_replicated_grads``) and
the all-gathered expert gradients. Expert parallelism is a dispatch strategy of the one
``MoE`` layer, so every layer option must give the single-process numbers:
``PARALLEL_COVERAGE`` maps each option of ``MoE``/``MoEConfig``/``RouterConfig``/
``MoE.from_modules`` to the case exercising it, and ``test_every_moe_option_is_covered``
fails when an option is added without a case here.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import json
import os
import socket
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from sci_moe.moe import (
    LoRAExperts,
    MLPExperts,
    MoE,
    MoEConfig,
    Router,
    RouterConfig,
    SharedExperts,
    slice_experts,
)
from sci_moe.moe.default_moe import DefaultOutputs
from sci_moe.moe.parallel import (
    ExpertParallel,
    all_to_all_rows,
    expert_parallel,
    full_state_dict,
    load_full_state_dict,
    sharded_state_names,
    sync_replicated_grads,
)

D, E = 8, 8
TOL = {"float64": 1e-10, "float32": 2e-5}  # max |a - b| <= TOL * max(1, max|b|)

# Token counts per rank; dead = experts never selected (selection bias -100).
_GLU = dict(d_hidden=12, num_shared_experts=1, shared_d_hidden=6, shared_gate=True)
CASES = {
    1: [
        dict(
            name="default_moe",
            kw=dict(default_moe=True, default_beta=0.5),
            dtype="float64",
            tokens=[9],
        ),
        dict(
            name="specialisation",
            kw=dict(orthogonality_coef=0.3, variance_coef=0.2, z_loss_coef=0.01),
            dtype="float64",
            tokens=[9],
            aux=True,
        ),
        dict(
            name="expert_choice",
            kw=dict(mode="expert_choice", capacity_factor=1.0),
            dtype="float64",
            tokens=[9],
        ),
        dict(name="lora", build="lora", dtype="float64", tokens=[6]),
    ],
    2: [
        dict(
            name="glu_shared_aux",
            kw=dict(_GLU, selection_bias=True),
            dtype="float64",
            tokens=[7, 5],
            aux=True,
        ),
        dict(
            name="glu_shared_aux",
            kw=dict(_GLU, selection_bias=True),
            dtype="float32",
            tokens=[7, 5],
            aux=True,
        ),
        dict(name="mlp_empty_expert", build="mlp", dtype="float64", tokens=[6, 9], dead=[5]),
        dict(name="mlp_empty_expert", build="mlp", dtype="float32", tokens=[6, 9], dead=[5]),
        dict(
            name="linear_top3",
            kw=dict(top_k=3, expert="linear"),
            dtype="float64",
            tokens=[4, 8],
        ),
        dict(
            name="adapter_router_opts",
            kw=dict(expert="adapter", activation="gelu", normalize=False, scaling=2.5, d_hidden=4),
            dtype="float64",
            tokens=[5, 7],
        ),
        dict(
            name="mlp_norm_eps",
            kw=dict(expert="mlp", norm_eps=0.5, score="sigmoid"),
            dtype="float64",
            tokens=[6, 3],
        ),
        dict(name="lora", build="lora", dtype="float64", tokens=[5, 6]),
        dict(
            name="glu_mean",
            kw=dict(_GLU, selection_bias=True),
            dtype="float64",
            tokens=[5, 5],
            reduction="mean",
        ),
        dict(
            name="glu_ddp",
            kw=dict(_GLU, selection_bias=True),
            dtype="float64",
            tokens=[6, 4],
            ddp=True,
        ),
        dict(
            name="default_moe",
            kw=dict(_GLU, default_moe=True, default_beta=0.5),
            dtype="float64",
            tokens=[7, 4],
        ),
        dict(
            name="default_scored",
            kw=dict(default_moe=True, default_scored=True),
            dtype="float32",
            tokens=[5, 8],
        ),
        dict(name="default_from_modules", build="default_modules", dtype="float64", tokens=[6, 6]),
        dict(
            name="specialisation",
            kw=dict(
                orthogonality_coef=0.3, variance_coef=0.2, z_loss_coef=0.01, load_balance_coef=0.1
            ),
            dtype="float64",
            tokens=[8, 5],
            aux=True,
        ),
        dict(
            name="specialisation_local_losses",
            kw=dict(orthogonality_coef=0.3),
            dtype="float64",
            tokens=[8, 5],
        ),
        dict(
            name="expert_choice",
            kw=dict(mode="expert_choice", capacity_factor=1.0),
            dtype="float64",
            tokens=[7, 5],
            aux=True,
        ),
        dict(
            name="capacity", kw=dict(capacity_factor=0.75, top_k=2), dtype="float64", tokens=[9, 5]
        ),
        dict(
            name="capacity", kw=dict(capacity_factor=0.75, top_k=2), dtype="float32", tokens=[9, 5]
        ),
        dict(
            name="ctor_dispatcher",
            kw=dict(_GLU, top_k=1),
            dtype="float64",
            tokens=[6, 2],
            api="ctor",
        ),
    ],
    4: [
        dict(
            name="glu_empty_rank",
            kw=dict(_GLU, selection_bias=True),
            dtype="float64",
            tokens=[5, 0, 6, 3],
            dead=[6, 7],
        ),
        dict(
            name="glu_empty_rank",
            kw=dict(_GLU, selection_bias=True),
            dtype="float32",
            tokens=[5, 0, 6, 3],
            dead=[6, 7],
        ),
        dict(
            name="mlp_no_input_grad",
            build="mlp",
            dtype="float64",
            tokens=[3, 4, 2, 5],
            dead=[6, 7],
            input_grad=False,
        ),
        dict(
            name="dense_linear",
            kw=dict(mode="dense", expert="linear", normalize=False),
            dtype="float64",
            tokens=[2, 3, 4, 1],
        ),
        dict(
            name="expert_choice_empty_rank",
            kw=dict(mode="expert_choice", capacity_factor=1.5),
            dtype="float64",
            tokens=[4, 0, 5, 3],
        ),
        # issue 27: group-limited routing (num_groups=2) on a rank without tokens
        dict(
            name="mlp_groups_empty_rank",
            build="mlp",
            dtype="float64",
            tokens=[4, 0, 5, 3],
            dead=[6, 7],
            aux=True,
        ),
    ],
}

# Every option of the MoE layer -> the case(s) above that exercise it in parallel, or
# "n/a: <why>" when no numerical difference is possible. Adding an option to MoE,
# MoEConfig, RouterConfig or MoE.from_modules without listing it here fails
# test_every_moe_option_is_covered.
PARALLEL_COVERAGE = {
    # MoEConfig
    "d_model": "glu_shared_aux",
    "num_experts": "glu_shared_aux",
    "top_k": "linear_top3",
    "d_hidden": "adapter_router_opts",
    "expert": "linear_top3 adapter_router_opts mlp_norm_eps glu_shared_aux",
    "activation": "adapter_router_opts",
    "num_shared_experts": "glu_shared_aux",
    "shared_d_hidden": "glu_shared_aux",
    "shared_gate": "glu_shared_aux",
    "load_balance_coef": "specialisation",
    "z_loss_coef": "specialisation",
    "global_batch_balance": "glu_shared_aux specialisation",
    "default_moe": "default_moe",
    "default_beta": "default_moe",
    "default_scored": "default_scored",
    "orthogonality_coef": "specialisation specialisation_local_losses",
    "variance_coef": "specialisation",
    "check_finite": "n/a: input validation before any numerics, shared by every dispatcher",
    "router": "adapter_router_opts",
    # RouterConfig
    "score": "mlp_norm_eps mlp_empty_expert",
    "mode": "dense_linear expert_choice",
    "normalize": "adapter_router_opts",
    "norm_eps": "mlp_norm_eps",
    "scaling": "adapter_router_opts",
    "selection_bias": "glu_shared_aux mlp_empty_expert",
    "bias_update_rate": "mlp_empty_expert glu_empty_rank",
    "num_groups": "mlp_empty_expert mlp_groups_empty_rank",
    "topk_groups": "mlp_empty_expert mlp_groups_empty_rank",
    "capacity_factor": "capacity expert_choice",
    "jitter": "n/a: training-mode random input noise, drawn per process",
    "noise_std": "n/a: training-mode random logit noise, drawn per process",
    "temperature": "n/a: mode='competence' only (no projection; not an MoE router)",
    "recalibration": "n/a: mode='competence' only (no projection; not an MoE router)",
    "init_std": "n/a: initial router weights only; every case copies one set to all ranks",
    # MoE.__init__ / MoE.from_modules
    "config": "glu_shared_aux",
    "dispatcher": "ctor_dispatcher",
    "shared": "mlp_empty_expert",
    "experts": "lora mlp_empty_expert",
    "default": "default_from_modules",
}


def _case_id(case):
    return f"{case['name']}-{case['dtype']}"


# -- worker side ---------------------------------------------------------------------


def _build(case: dict, dispatcher=None) -> MoE:
    kind = case.get("build", "moe")
    if kind == "moe":
        return MoE(d_model=D, num_experts=E, dispatcher=dispatcher, **case.get("kw", {}))
    if kind == "mlp":
        router = Router(
            d_model=D, num_experts=E, top_k=2, score="sigmoid", selection_bias=True, num_groups=2
        )
        bank = MLPExperts(E, D, 12, "gelu", bias=True)
        shared = SharedExperts(D, 8, kind="mlp", activation="gelu")
        return MoE.from_modules(router, bank, shared, dispatcher=dispatcher)
    if kind == "lora":  # nested frozen base layer: replicated, its term added once
        bank = LoRAExperts(nn.Linear(D, D), num_experts=E, rank=2)
        nn.init.normal_(bank.lora_b)
        return MoE.from_modules(
            Router(d_model=D, num_experts=E, top_k=2), bank, dispatcher=dispatcher
        )
    if kind == "default_modules":
        bank = MLPExperts(E, D, 6)
        return MoE.from_modules(
            Router(d_model=D, num_experts=E, top_k=2),
            bank,
            default=DefaultOutputs(E, D, beta=0.3),
            dispatcher=dispatcher,
        )
    raise AssertionError(kind)


def _randomise_biases(moe: MoE) -> None:
    with torch.no_grad():
        for name, p in moe.named_parameters():
            if "bias" in name:
                p.normal_()  # biases start at zero: make them matter
        if moe.default is not None:  # a non-zero EMA before the step
            moe.default.ema.normal_()


def _err(a, b):
    if a is None:
        a = torch.zeros_like(b)
    if b is None:
        b = torch.zeros_like(a)
    if a.numel() == 0:
        return [0.0, 0.0]
    return [(a.double() - b.double()).abs().max().item(), b.double().abs().max().item()]


def _make(case, dtype):
    torch.manual_seed(0)
    moe = _build(case)
    _randomise_biases(moe)
    moe = moe.to(dtype)
    with torch.no_grad():
        for e in case.get("dead", []):
            moe.router.expert_bias[e] = -100.0
    return moe


def _run_case(case, rank, world):
    dtype = getattr(torch, case["dtype"])
    moe = _make(case, dtype)
    api = case.get("api", "convert")
    # The parallel layer is made before the reference call (which updates Default MoE's EMA).
    if api == "ctor":
        torch.manual_seed(0)
        ep = _build(case, dispatcher=ExpertParallel())
        _randomise_biases(ep)
        ep = ep.to(dtype)
    else:
        ep = expert_parallel(moe)
    assert isinstance(ep.dispatcher, ExpertParallel)
    tokens = case["tokens"]
    gen = torch.Generator().manual_seed(1)
    x_full = torch.randn(sum(tokens), D, generator=gen, dtype=dtype)
    g_full = torch.randn(sum(tokens), D, generator=gen, dtype=dtype)
    lo, hi = sum(tokens[:rank]), sum(tokens[: rank + 1])
    aux = case.get("aux", False)
    reduction = case.get("reduction", "sum")
    input_grad = case.get("input_grad", True)

    # Single-process reference on the concatenated tokens (no collectives inside).
    moe.global_batch_balance = False
    params = [(n, p) for n, p in moe.named_parameters() if p.requires_grad]
    xr = x_full.clone().requires_grad_(input_grad)
    y_ref, info_ref = moe(xr, return_routing=True)
    loss = (y_ref * g_full).sum() + (info_ref.aux_loss if aux else 0.0)
    wrt = ([xr] if input_grad else []) + [p for _, p in params]
    grads = torch.autograd.grad(loss, wrt)
    gx_ref = grads[0] if input_grad else None
    ref = dict(zip([n for n, _ in params], grads[1 if input_grad else 0 :], strict=True))
    scale = 1.0 / world if reduction == "mean" or case.get("ddp") else 1.0

    ep.global_batch_balance = aux
    out = {}
    model = ep
    if case.get("ddp"):
        nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
            ep, sharded_state_names(ep)
        )
        model = nn.parallel.DistributedDataParallel(ep)
    xl = x_full[lo:hi].clone().requires_grad_(input_grad)
    t0 = time.perf_counter()
    if case.get("ddp"):
        y, info = model(xl), None
    else:
        y, info = model(xl, return_routing=True)
    loss = (y * g_full[lo:hi]).sum() + (info.aux_loss if aux else 0.0)
    loss.backward()
    sharded = {id(t) for t in ep.dispatcher.sharded_tensors(ep)}
    if case.get("ddp"):
        for p in ep.parameters():  # DDP averaged the rest
            if id(p) in sharded:
                p.grad /= world
    else:
        sync_replicated_grads(ep, reduction=reduction)
    out["_seconds"] = [time.perf_counter() - t0, 0.0]

    out["output"] = _err(y.detach(), y_ref.detach()[lo:hi])
    if input_grad:
        out["grad[input]"] = _err(xl.grad, gx_ref[lo:hi])
    if info is not None:
        for key, val in info_ref.losses.items():
            if aux:  # global-batch losses: every rank holds the single-process value
                out[f"loss[{key}]"] = _err(info.losses[key].detach(), val.detach())
        out["_loss_keys"] = [float(set(info.losses) != set(info_ref.losses)), 0.0]
    if moe.default is not None:
        out["default_ema"] = _err(ep.default.ema, moe.default.ema)
    for name, p in ep.named_parameters():
        if not p.requires_grad:
            continue
        g = p.grad
        if id(p) in sharded:
            g = torch.zeros_like(p) if g is None else g
            parts = [torch.empty_like(g) for _ in range(world)]
            dist.all_gather(parts, g.contiguous())
            g = torch.cat(parts)
        out[f"grad[{name}]"] = _err(g, ref[name] * scale)
    with torch.no_grad():  # inference path (no autograd function, no anchor)
        ep.eval(), moe.eval()
        out["no_grad_output"] = _err(ep(x_full[lo:hi]), moe(x_full).detach()[lo:hi])
        ep.train(), moe.train()
    if case.get("dead"):
        # the global load drives the replicated bias update
        ep.update_router_bias(info.routing)
        moe.update_router_bias(info_ref.routing)
        out["expert_bias"] = _err(ep.router.expert_bias, moe.router.expert_bias)
        out["_received_by_dead"] = [float(info_ref.routing.load[case["dead"]].sum()), 0.0]
    # checkpoints: gathered state dict == single-process state dict, and back
    full = full_state_dict(ep)
    # (the Default-MoE EMA is a sum over ranks: equal up to rounding, checked above)
    ok = set(full) == set(moe.state_dict()) and all(
        torch.equal(full[k], v) for k, v in moe.state_dict().items() if k != "default.ema"
    )
    other = expert_parallel(_make(dict(case, kw={**case.get("kw", {})}), dtype))
    load_full_state_dict(other, moe.state_dict())
    ok = ok and all(
        torch.equal(other.state_dict()[k], v)
        for k, v in ep.state_dict().items()
        if k != "default.ema"
    )
    out["_state_dict_roundtrip"] = [float(not ok), 0.0]
    return out


def _errors_raised():
    """User errors: messages of the ValueErrors, keyed by case (no collectives)."""
    msgs = {}
    cases = {
        "indivisible": lambda: expert_parallel(MoE(d_model=D, num_experts=3)),
        "indivisible_ctor": lambda: MoE(d_model=D, num_experts=3, dispatcher=ExpertParallel()),
        "wrong_bank": lambda: MoE.from_modules(
            Router(d_model=D, num_experts=E), MLPExperts(3, D, 4), dispatcher=ExpertParallel()
        ),
        "bad_splits": lambda: all_to_all_rows(torch.zeros(3, D), [1, 2], [1, 1]),
        "bad_slice": lambda: slice_experts(MLPExperts(E, D, 4), 4, 2),
    }
    for key, fn in cases.items():
        try:
            fn()
        except ValueError as exc:
            msgs[key] = str(exc)
        else:
            msgs[key] = None
    return msgs


def _worker(rank, world, port, out_dir):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    result = {_case_id(c): _run_case(c, rank, world) for c in CASES[world]}
    result["_errors"] = _errors_raised() if rank == 0 and world == 2 else {}
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    # Skip interpreter finalisation: gloo's threads occasionally abort it ("terminate
    # called without an active exception", ~1 run in 10 here; pytorch PR 179291).
    os._exit(0)


# -- parent side ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(world: int, out_dir, timeout: float = 120.0) -> list[dict]:
    ctx = mp.start_processes(
        _worker,
        args=(world, _free_port(), str(out_dir)),
        nprocs=world,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + timeout
    try:
        while not ctx.join(timeout=1.0):  # re-raises a worker's exception with its traceback
            if time.monotonic() > deadline:
                raise TimeoutError(f"expert-parallel workers (world {world}) hung")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
    results = []
    for r in range(world):
        with open(out_dir / f"rank{r}.json") as f:
            results.append(json.load(f))
    return results


def _check_case(world: int, case: dict, results: list[dict]) -> list[str]:
    """Failures of one case on every rank, as messages."""
    cid, tol, bad = _case_id(case), TOL[case["dtype"]], []
    for rank, res in enumerate(results):
        errs = res[cid]
        if errs["_state_dict_roundtrip"][0] != 0.0:
            bad.append(f"{cid} rank {rank}: full_state_dict round trip differs")
        if errs.get("_loss_keys", [0.0])[0] != 0.0:
            bad.append(f"{cid} rank {rank}: the parallel layer returned other losses")
        if case.get("dead") and errs["_received_by_dead"][0] != 0.0:
            bad.append(f"{cid}: the experts meant to stay empty were selected")
        names = [n for n in errs if not n.startswith("_")]
        if not any(n.startswith("grad[router") for n in names) or not any(
            n.startswith("grad[experts.") for n in names
        ):
            bad.append(f"{cid} rank {rank}: router or expert gradients were not compared")
        for name in names:
            err, scale = errs[name]
            if not err <= tol * max(1.0, scale):
                bad.append(
                    f"{cid} rank {rank}/{world}: {name} differs from the single-process "
                    f"layer by {err:.3e} (scale {scale:.3e})"
                )
    return bad


# One launch per world size (a test each, so pytest-xdist never launches one twice).
@pytest.mark.parametrize("world", sorted(CASES), ids=lambda w: f"world{w}")
def test_matches_single_process(world, tmp_path):
    """Outputs and all gradients equal the single-process layer's, in every case."""
    results = _launch(world, tmp_path)
    bad = [msg for case in CASES[world] for msg in _check_case(world, case, results)]
    assert not bad, "\n".join(bad)
    if world == 2:
        msgs = results[0]["_errors"]
        assert "not divisible" in msgs["indivisible"]
        assert "not divisible" in msgs["indivisible_ctor"]
        assert "slice_experts" in msgs["wrong_bank"]
        assert "input_splits" in msgs["bad_splits"]
        assert msgs["bad_slice"] is not None


def test_every_moe_option_is_covered():
    """Fails when an MoE option is added without a parallel case that exercises it."""
    options = {f.name for f in dataclasses.fields(MoEConfig)}
    options |= {f.name for f in dataclasses.fields(RouterConfig)}
    for fn in (MoE.__init__, MoE.from_modules):
        sig = inspect.signature(fn)
        options |= {
            n
            for n, p in sig.parameters.items()
            if n not in ("self", "cls") and p.kind is not p.VAR_KEYWORD
        }
    missing = sorted(options - set(PARALLEL_COVERAGE))
    assert not missing, (
        f"MoE options {missing} have no expert-parallel case: add one to CASES in "
        "tests/moe/test_parallel.py and list it in PARALLEL_COVERAGE"
    )
    names = {c["name"] for cases in CASES.values() for c in cases}
    stale = sorted(set(PARALLEL_COVERAGE) - options)
    assert not stale, f"PARALLEL_COVERAGE lists options MoE no longer has: {stale}"
    for option, where in PARALLEL_COVERAGE.items():
        if where.startswith("n/a:"):
            continue
        unknown = [w for w in where.split() if w not in names]
        assert not unknown, f"{option}: unknown case(s) {unknown}"


def test_needs_initialised_process_group():
    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    with pytest.raises(ValueError, match="init_process_group"):
        expert_parallel(MoE(d_model=D, num_experts=E))
    with pytest.raises(ValueError, match="init_process_group"):
        MoE(d_model=D, num_experts=E, dispatcher=ExpertParallel())


def test_slice_experts_keeps_weights_and_class():
    moe = MoE(d_model=D, num_experts=E, expert="mlp")
    local = slice_experts(moe.experts, 2, 6)
    assert type(local) is type(moe.experts) and local.num_experts == 4
    torch.testing.assert_close(local.up, moe.experts.up[2:6], rtol=0, atol=0)
    assert local.up.data_ptr() != moe.experts.up.data_ptr()
    x = torch.randn(3, D)
    torch.testing.assert_close(local.forward_expert(1, x), moe.experts.forward_expert(3, x))
