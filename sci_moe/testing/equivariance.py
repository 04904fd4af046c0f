"""Check that a function or module commutes with rotations, translations, permutations.

:func:`assert_equivariant` applies random group elements :math:`g` to the inputs and
checks :math:`f(g \\cdot x) = g \\cdot f(x)` for every output, one kind of transformation
at a time (proper rotations, reflections, translations, permutations), and says which
output failed under which transformation by how much. How a group element acts on each
input and output is given by a *spec*:

``None``
    Not acted on: an input passed through unchanged (e.g. an ``edge_index``), an output
    that must be invariant.
``"cartesian_vectors"``
    Cartesian vectors on the last axis (size 3): :math:`x \\mapsto x R^\\top`.
``"cartesian_points"``
    Positions: rotated like vectors and, when ``translation=True``, shifted.
an e3nn irreps string or ``e3nn.o3.Irreps`` (e.g. ``"8x0e + 8x1o"``)
    Features on the last axis, acted on by ``Irreps.D_from_matrix(R)`` (needs e3nn, which
    is imported only then); in e3nn 0.6 the ``1o`` block of ``D_from_matrix(R)`` is ``R``
    itself, so Cartesian ``xyz`` vectors are ``1o``.
a callable ``action(x, R, t)``
    Any other action: ``R`` the ``(3, 3)`` orthogonal matrix, ``t`` the ``(3,)``
    translation (``None`` unless translations are being tested);
    :func:`cartesian_action` builds one for vectors on another axis, e.g. ``(P, 3, F)``.

Random rotations are Haar-distributed (QR of a seeded Gaussian matrix, Mezzadri 2007),
so a check is reproducible for a fixed ``seed``; the same idea as e3nn's
``e3nn.util.test.assert_equivariant``, without requiring e3nn for Cartesian data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["assert_equivariant", "cartesian_action", "equivariance_error", "random_rotation"]

_TOL = {torch.float16: 1e-2, torch.bfloat16: 1e-2, torch.float32: 1e-4, torch.float64: 1e-9}


def random_rotation(
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    device=None,
    reflect: bool = False,
) -> torch.Tensor:
    """A Haar-random rotation matrix (``det = +1``; ``-1`` with ``reflect=True``).

    Returns
    -------
    Tensor, shape (3, 3)
    """
    a = torch.randn(3, 3, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r))  # uniform over O(3)
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    if reflect:
        q = -q
    return q.to(dtype=dtype or torch.get_default_dtype(), device=device)


def cartesian_action(axis: int = -1, translate: bool = False) -> Callable:
    """Action on Cartesian vectors stored along ``axis`` (size 3), optionally translated.

    E.g. ``cartesian_action(axis=-2)`` for PaiNN-style vector features ``(P, 3, F)``.
    """

    def act(x: torch.Tensor, rotation: torch.Tensor, translation: torch.Tensor | None):
        if x.shape[axis] != 3:
            raise ValueError(
                f"a Cartesian action needs size 3 along axis {axis}, got shape {tuple(x.shape)}"
            )
        y = torch.movedim(x, axis, -1) @ rotation.T.to(x.dtype)
        if translate and translation is not None:
            y = y + translation.to(x.dtype)
        return torch.movedim(y, -1, axis)

    return act


def _action(spec) -> Callable | None:
    if spec is None:
        return None
    if callable(spec) and not isinstance(spec, str):
        if hasattr(spec, "D_from_matrix"):  # an e3nn Irreps object
            return _irreps_action(spec)
        return spec
    if spec == "cartesian_vectors":
        return cartesian_action(-1)
    if spec == "cartesian_points":
        return cartesian_action(-1, translate=True)
    if isinstance(spec, str) or hasattr(spec, "D_from_matrix"):
        return _irreps_action(spec)
    raise ValueError(
        f"unknown equivariance spec {spec!r}: use None, 'cartesian_vectors', "
        "'cartesian_points', an e3nn irreps string or a callable action(x, R, t)"
    )


def _irreps_action(spec) -> Callable:
    try:
        from e3nn import o3
    except ImportError:  # pragma: no cover - e3nn is a test dependency
        raise ValueError(
            f"irreps spec {spec!r} needs e3nn (pip install e3nn); for Cartesian data use "
            "'cartesian_vectors' / 'cartesian_points'"
        ) from None
    irreps = o3.Irreps(spec)

    def act(x: torch.Tensor, rotation: torch.Tensor, translation: torch.Tensor | None):
        if x.shape[-1] != irreps.dim:
            raise ValueError(
                f"irreps {irreps} have dimension {irreps.dim}, but the tensor's last axis "
                f"has {x.shape[-1]} (shape {tuple(x.shape)})"
            )
        d = irreps.D_from_matrix(rotation.to(torch.float64)).to(x.dtype).to(x.device)
        return x @ d.T

    return act


def _as_list(x) -> tuple[list, bool]:
    if isinstance(x, (list, tuple)):
        return list(x), True
    return [x], False


def _specs(specs, n: int, what: str) -> list:
    if specs is None:
        return [None] * n
    if isinstance(specs, (list, tuple)) and not hasattr(
        specs, "D_from_matrix"
    ):  # Irreps is a tuple
        if len(specs) != n:
            raise ValueError(f"{what} has {len(specs)} entries for {n} tensors: give one each")
        return list(specs)
    if n != 1:
        raise ValueError(f"{what} is a single spec for {n} tensors: give a list, one each")
    return [specs]


def _permute(x, spec, perm: torch.Tensor, inverse: torch.Tensor):
    if spec is None or not isinstance(x, torch.Tensor):
        return x
    if spec == "index":  # values are indices of permuted items: old j -> new inverse[j]
        return inverse.to(x.device)[x]
    return torch.index_select(x, int(spec), perm.to(x.device))


def _reference_dtype(inputs) -> tuple[torch.dtype, Any]:
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.dtype, x.device
    return torch.get_default_dtype(), None


def _call(fn, inputs) -> list:
    out = fn(*inputs)
    outs, _ = _as_list(out)
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outs]


def equivariance_error(
    fn: Callable,
    inputs,
    irreps_in=None,
    irreps_out=None,
    *,
    translation: bool = False,
    reflection: bool = False,
    permute_in: Sequence | None = None,
    permute_out: Sequence | None = None,
    n_trials: int = 3,
    seed: int = 0,
) -> list[dict]:
    """The largest deviation from equivariance per transformation and output.

    Parameters as :func:`assert_equivariant`.

    Returns
    -------
    list of dict
        One ``{"transformation": str, "output": int, "error": float, "scale": float}``
        per transformation tried and output: ``error`` is
        :math:`\\max |f(g x) - g f(x)|` and ``scale`` :math:`\\max |g f(x)|`.
    """
    inputs, _ = _as_list(inputs)
    spec_in = _specs(irreps_in, len(inputs), "irreps_in")
    act_in = [_action(s) for s in spec_in]
    base = _call(fn, inputs)
    spec_out = _specs(irreps_out, len(base), "irreps_out")
    act_out = [_action(s) for s in spec_out]
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    if (permute_in is None) != (permute_out is None):
        raise ValueError("give both permute_in and permute_out (or neither)")
    dtype, device = _reference_dtype(inputs)
    gen = torch.Generator().manual_seed(int(seed))
    zero = torch.zeros(3, dtype=dtype, device=device)
    eye = torch.eye(3, dtype=dtype, device=device)

    transforms = []
    for k in range(n_trials):
        transforms.append((f"rotation {k}", random_rotation(gen, dtype, device), None, None))
        if reflection:
            r = random_rotation(gen, dtype, device, reflect=True)
            transforms.append((f"rotation-reflection {k}", r, None, None))
        if translation:
            t = torch.randn(3, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device)
            transforms.append((f"translation {k}", eye, t, None))
        if permute_in is not None:
            p_in = _specs(permute_in, len(inputs), "permute_in")
            n = next(
                (
                    x.shape[int(s)]
                    for x, s in zip(inputs, p_in, strict=True)
                    if s not in (None, "index") and isinstance(x, torch.Tensor)
                ),
                None,
            )
            if n is None:
                raise ValueError("permute_in needs at least one input with a permuted axis")
            transforms.append((f"permutation {k}", eye, zero, torch.randperm(n, generator=gen)))

    results = []
    for name, rot, t, perm in transforms:
        if perm is None:
            x = [x if a is None else a(x, rot, t) for x, a in zip(inputs, act_in, strict=True)]
            want = [y if a is None else a(y, rot, t) for y, a in zip(base, act_out, strict=True)]
        else:
            inv = torch.empty_like(perm)
            inv[perm] = torch.arange(perm.numel())
            p_in = _specs(permute_in, len(inputs), "permute_in")
            p_out = _specs(permute_out, len(base), "permute_out")
            x = [_permute(x, s, perm, inv) for x, s in zip(inputs, p_in, strict=True)]
            want = [_permute(y, s, perm, inv) for y, s in zip(base, p_out, strict=True)]
        got = _call(fn, x)
        if len(got) != len(want):
            raise ValueError(f"fn returned {len(got)} outputs under {name}, {len(want)} before")
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if not isinstance(w, torch.Tensor):
                continue
            if g.shape != w.shape:
                raise AssertionError(
                    f"output {i} changed shape under {name}: {tuple(w.shape)} -> {tuple(g.shape)}"
                )
            diff = (g.to(w.dtype) - w).abs()
            err = float(diff.max()) if diff.numel() else 0.0
            scale = float(w.abs().max()) if w.numel() else 0.0
            results.append({"transformation": name, "output": i, "error": err, "scale": scale})
    return results


def assert_equivariant(
    fn: Callable,
    inputs,
    irreps_in=None,
    irreps_out=None,
    *,
    translation: bool = False,
    reflection: bool = False,
    permute_in: Sequence | None = None,
    permute_out: Sequence | None = None,
    n_trials: int = 3,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
) -> float:
    """Assert :math:`f(g \\cdot x) = g \\cdot f(x)` under random rotations (and more).

    Parameters
    ----------
    fn : callable
        ``fn(*inputs)`` returning a tensor or a tuple/list of tensors (a module works).
    inputs : Tensor or sequence
        The arguments (tensors, or anything else passed through unchanged).
    irreps_in, irreps_out : spec or sequence of specs, optional
        How a rotation acts on each input / output (see the module docs); ``None``
        everywhere means "nothing rotates, everything must be invariant".
    translation : bool
        Also test random translations (of ``"cartesian_points"`` and callable specs).
    reflection : bool
        Also test improper rotations (``det R = -1``; O(3) instead of SO(3)).
    permute_in, permute_out : sequence, optional
        Also test random permutations of one item axis: per input / output ``None``
        (not permuted), an ``int`` axis to permute, or ``"index"`` for a tensor whose
        *values* index the permuted items (e.g. an ``edge_index``).
    n_trials : int
        Random elements of each kind.
    atol, rtol : float, optional
        Pass when ``error <= atol + rtol * scale`` (default by dtype of the first floating
        input: 1e-4 in float32, 1e-9 in float64).
    seed : int
        Seed of the random group elements.

    Returns
    -------
    float
        The largest error found (for logging).

    Raises
    ------
    AssertionError
        Naming each output and transformation that failed, with error and tolerance.

    Examples
    --------
    >>> import torch
    >>> from sci_moe.testing import assert_equivariant
    >>> x = torch.randn(5, 3, dtype=torch.float64)
    >>> err = assert_equivariant(torch.linalg.cross, (x, x.flip(0)),
    ...     ["cartesian_vectors"] * 2, "cartesian_vectors")
    >>> err < 1e-9
    True
    """
    inputs_list, _ = _as_list(inputs)
    dtype, _ = _reference_dtype(inputs_list)
    tol = _TOL.get(dtype, 1e-4)
    atol = tol if atol is None else float(atol)
    rtol = tol if rtol is None else float(rtol)
    results = equivariance_error(
        fn,
        inputs_list,
        irreps_in,
        irreps_out,
        translation=translation,
        reflection=reflection,
        permute_in=permute_in,
        permute_out=permute_out,
        n_trials=n_trials,
        seed=seed,
    )
    bad = [r for r in results if not r["error"] <= atol + rtol * r["scale"]]
    if bad:
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        lines = [
            f"  output {r['output']} under {r['transformation']}: max |f(g x) - g f(x)| = "
            f"{r['error']:.3g} > {atol + rtol * r['scale']:.3g} (atol {atol:g} + rtol {rtol:g}"
            f" * max |g f(x)| {r['scale']:.3g})"
            for r in bad
        ]
        raise AssertionError(
            f"{name} is not equivariant ({len(bad)} of {len(results)} checks failed, "
            f"seed {seed}):\n" + "\n".join(lines)
        )
    return max((r["error"] for r in results), default=0.0)
