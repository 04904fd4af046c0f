"""Time a list of matrix products as one ``jax.jit`` program (XLA on the CPU).

Runs under a Python that has JAX (the ScoreMD venv of
``benchmarks/energy_diffusion/vs_scoremd.py``), never under sci-moe's venv: it imports
neither torch nor sci_moe. Its counterpart on our side is
``benchmarks/energy_diffusion/anatomy.py``, which records the products of one compiled
training step with ``torch.profiler`` and hands their shapes here.

``--gemms JSON``: a list of ``{"op": "mm" | "addmm", "m": M, "k": K, "n": N, "count": c}``.
The program computes every product ``count`` times on distinct float32 inputs (so XLA can
neither share nor hoist them) and returns all the results; ``addmm`` adds a bias of
shape ``(N,)``. Timed per call (``block_until_ready``) after a warm-up, best and median
of ``--repeats`` x ``--calls``. Prints one line ``@@scoremd-result {json}``. Threads are
the caller's business (``XLA_FLAGS``, ``taskset``).
"""

from __future__ import annotations

import argparse
import json
import os
import time

RESULT_MARK = "@@scoremd-result "
OPS = ("mm", "addmm")


def _check(gemms: list) -> None:
    if not isinstance(gemms, list) or not gemms:
        raise SystemExit("--gemms must be a non-empty JSON list of products")
    for g in gemms:
        if not isinstance(g, dict) or g.get("op") not in OPS:
            raise SystemExit(f"--gemms: each product needs op in {OPS}, got {g!r}")
        if any(not isinstance(g.get(k), int) or g[k] < 1 for k in ("m", "k", "n", "count")):
            raise SystemExit(f"--gemms: m, k, n and count must be positive ints, got {g!r}")


def run(gemms: list[dict], repeats: int, calls: int, seed: int) -> dict:
    """Microseconds per call of one jitted program holding every product of ``gemms``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(seed)
    inputs = []
    for g in gemms:
        for _ in range(g["count"]):
            a = rng.standard_normal((g["m"], g["k"]), dtype=np.float32)
            b = rng.standard_normal((g["k"], g["n"]), dtype=np.float32)
            c = rng.standard_normal((g["n"],), dtype=np.float32) if g["op"] == "addmm" else None
            inputs.append((jnp.asarray(a), jnp.asarray(b), None if c is None else jnp.asarray(c)))

    @jax.jit
    def program(xs):
        return [a @ b if c is None else a @ b + c for a, b, c in xs]

    jax.block_until_ready(program(inputs))
    per_call = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(program(inputs))
        per_call.append(1e6 * (time.perf_counter() - t0) / calls)
    per_call.sort()
    return {
        "us_per_call": per_call,
        "best_us": per_call[0],
        "median_us": per_call[len(per_call) // 2],
        "n_products": len(inputs),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gemms", required=True, help="JSON list of products (see the docstring)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--calls", type=int, default=500, help="calls per repeat")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        gemms = json.loads(args.gemms)
    except json.JSONDecodeError as e:
        raise SystemExit(f"--gemms is not JSON: {e}") from None
    _check(gemms)
    if args.repeats < 1 or args.calls < 1:
        raise SystemExit("--repeats and --calls must be >= 1")
    print(RESULT_MARK + json.dumps(run(gemms, args.repeats, args.calls, args.seed)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
