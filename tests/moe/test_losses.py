import torch

from sci_moe.moe import Routing, load_balancing_loss, router_z_loss


def _routing(indices, probs):
    E = probs.shape[1]
    return Routing(indices, torch.ones(indices.shape), probs.log(), probs, E)


def test_uniform_routing_gives_one():
    T, E, k = 8, 4, 2
    indices = torch.tensor([[t % E, (t + 1) % E] for t in range(T)])
    probs = torch.full((T, E), 1.0 / E)
    torch.testing.assert_close(load_balancing_loss(_routing(indices, probs)), torch.tensor(1.0))
    assert indices.shape[1] == k


def test_collapse_gives_num_experts():
    T, E = 6, 5
    probs = torch.zeros(T, E)
    probs[:, 0] = 1.0
    indices = torch.zeros(T, 1, dtype=torch.long)
    r = Routing(indices, torch.ones(T, 1), torch.zeros(T, E), probs, E)
    torch.testing.assert_close(load_balancing_loss(r), torch.tensor(float(E)))


def test_load_balance_gradient_goes_to_probs_only():
    logits = torch.randn(10, 4, requires_grad=True)
    probs = logits.softmax(-1)
    r = Routing(probs.topk(2, -1).indices, torch.ones(10, 2), logits, probs, 4)
    load_balancing_loss(r).backward()
    assert logits.grad.abs().sum() > 0


def test_z_loss_formula():
    logits = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
    r = Routing(
        torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1), logits, logits.softmax(-1), 2
    )
    expected = (torch.logsumexp(logits, -1) ** 2).mean()
    torch.testing.assert_close(router_z_loss(r), expected)


def test_global_batch_single_process_group(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        logits = torch.randn(12, 4, requires_grad=True)
        probs = logits.softmax(-1)
        r = Routing(probs.topk(2, -1).indices, torch.ones(12, 2), logits, probs, 4)
        a = load_balancing_loss(r, global_batch=True)
        b = load_balancing_loss(r)
        torch.testing.assert_close(a, b)
        a.backward()
        assert logits.grad is not None
    finally:
        dist.destroy_process_group()
