"""Triton kernels of the selective scan (forward and backward) and their launchers.

Imports triton; use it through :mod:`.scan_kernel`. One program owns a
``(BLOCK_D channels) x (d_state)`` tile of the state of one sequence and walks the
sequence step by step, keeping ``h`` in registers (float32):

.. math::

    \\Delta_t = \\mathrm{softplus}(\\delta_t + b), \\quad
    h_t = e^{\\Delta_t A} h_{t-1} + \\Delta_t u_t B_t, \\quad
    y_t = (C_t^\\top h_t + D u_t)\\, \\mathrm{silu}(z_t).

The grid is ``(batch, ceil(d_inner / BLOCK_D))``: parallel over sequences and channel
blocks, sequential in time (what the recurrence needs; ``mamba_ssm``'s CUDA kernel
does the same per thread block). With gradients requested the forward stores every
``h_t`` (float32, ``(batch, length, d_inner, d_state)``, less than the torch scan
keeps for autograd); the backward walks the sequence in reverse with the adjoint

.. math::

    g_t = \\bar g_t + e^{\\Delta_{t+1} A} g_{t+1}, \\qquad
    \\bar g_t = \\partial \\ell / \\partial y^{pre}_t \\, C_t,

and writes per-step gradients of ``u, delta, z`` directly, while the gradients of the
shared ``B, C`` (summed over channels) and of ``A, D, b`` (summed over time and batch)
are written as per-program partial sums and reduced afterwards in torch: deterministic,
no atomics.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["FORCE_BLOCK_D", "scan_backward", "scan_forward"]

#: Tests set this (> 0) to force the channel block (small blocks exercise several programs).
FORCE_BLOCK_D = 0


@triton.jit
def _softplus(x):
    # log(1 + e^x), stable for large |x| (torch's threshold is 20)
    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))


@triton.jit
def _scan_fwd_kernel(
    u_ptr,
    delta_ptr,
    a_ptr,
    b_ptr,
    c_ptr,
    d_ptr,
    z_ptr,
    bias_ptr,
    h0_ptr,
    y_ptr,
    hlast_ptr,
    hs_ptr,
    D_INNER,
    N_STATE,
    L,
    s_ub,
    s_ud,
    s_ul,
    s_db,
    s_dd,
    s_dl,
    s_zb,
    s_zd,
    s_zl,
    s_bb,
    s_bn,
    s_bl,
    s_cb,
    s_cn,
    s_cl,
    HAS_Z: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    STORE_STATES: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid_b = tl.program_id(0).to(tl.int64)
    pid_d = tl.program_id(1)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    md = offs_d < D_INNER
    mn = offs_n < N_STATE
    m2 = md[:, None] & mn[None, :]
    dn = offs_d[:, None] * N_STATE + offs_n[None, :]  # (d, n) index in a contiguous tile

    A = tl.load(a_ptr + dn, mask=m2, other=0.0).to(tl.float32)
    Dv = tl.load(d_ptr + offs_d, mask=md, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + offs_d, mask=md, other=0.0).to(tl.float32)
    h = tl.load(h0_ptr + pid_b * D_INNER * N_STATE + dn, mask=m2, other=0.0).to(tl.float32)

    u_base = u_ptr + pid_b * s_ub + offs_d * s_ud
    dl_base = delta_ptr + pid_b * s_db + offs_d * s_dd
    z_base = z_ptr + pid_b * s_zb + offs_d * s_zd
    b_base = b_ptr + pid_b * s_bb + offs_n * s_bn
    c_base = c_ptr + pid_b * s_cb + offs_n * s_cn
    y_base = y_ptr + pid_b * D_INNER * L + offs_d * L
    hs_base = hs_ptr + pid_b * L * D_INNER * N_STATE + dn
    for t in range(0, L):
        u = tl.load(u_base + t * s_ul, mask=md, other=0.0).to(tl.float32)
        dl = tl.load(dl_base + t * s_dl, mask=md, other=0.0).to(tl.float32) + bias
        if SOFTPLUS:
            dl = _softplus(dl)
        Bt = tl.load(b_base + t * s_bl, mask=mn, other=0.0).to(tl.float32)
        Ct = tl.load(c_base + t * s_cl, mask=mn, other=0.0).to(tl.float32)
        h = tl.exp(dl[:, None] * A) * h + (dl * u)[:, None] * Bt[None, :]
        if STORE_STATES:
            tl.store(hs_base + t * D_INNER * N_STATE, h, mask=m2)
        y = tl.sum(h * Ct[None, :], axis=1) + Dv * u
        if HAS_Z:
            z = tl.load(z_base + t * s_zl, mask=md, other=0.0).to(tl.float32)
            y = y * z * tl.sigmoid(z)
        tl.store(y_base + t, y.to(y_ptr.dtype.element_ty), mask=md)
    tl.store(hlast_ptr + pid_b * D_INNER * N_STATE + dn, h, mask=m2)


@triton.jit
def _scan_bwd_kernel(
    u_ptr,
    delta_ptr,
    a_ptr,
    b_ptr,
    c_ptr,
    d_ptr,
    z_ptr,
    bias_ptr,
    h0_ptr,
    hs_ptr,
    dy_ptr,
    dhlast_ptr,
    du_ptr,
    ddelta_ptr,
    dz_ptr,
    dh0_ptr,
    da_part_ptr,
    dd_part_ptr,
    dbias_part_ptr,
    db_part_ptr,
    dc_part_ptr,
    D_INNER,
    N_STATE,
    L,
    NUM_DB,
    s_ub,
    s_ud,
    s_ul,
    s_db,
    s_dd,
    s_dl,
    s_zb,
    s_zd,
    s_zl,
    s_bb,
    s_bn,
    s_bl,
    s_cb,
    s_cn,
    s_cl,
    s_yb,
    s_yd,
    s_yl,
    HAS_Z: tl.constexpr,
    SOFTPLUS: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid_b = tl.program_id(0).to(tl.int64)
    pid_d = tl.program_id(1)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    md = offs_d < D_INNER
    mn = offs_n < N_STATE
    m2 = md[:, None] & mn[None, :]
    dn = offs_d[:, None] * N_STATE + offs_n[None, :]
    tile = D_INNER * N_STATE

    A = tl.load(a_ptr + dn, mask=m2, other=0.0).to(tl.float32)
    Dv = tl.load(d_ptr + offs_d, mask=md, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + offs_d, mask=md, other=0.0).to(tl.float32)
    g = tl.load(dhlast_ptr + pid_b * tile + dn, mask=m2, other=0.0).to(tl.float32)
    h0 = tl.load(h0_ptr + pid_b * tile + dn, mask=m2, other=0.0).to(tl.float32)
    gA = tl.zeros((BLOCK_D, BLOCK_N), dtype=tl.float32)
    gD = tl.zeros((BLOCK_D,), dtype=tl.float32)
    gbias = tl.zeros((BLOCK_D,), dtype=tl.float32)

    u_base = u_ptr + pid_b * s_ub + offs_d * s_ud
    dl_base = delta_ptr + pid_b * s_db + offs_d * s_dd
    z_base = z_ptr + pid_b * s_zb + offs_d * s_zd
    b_base = b_ptr + pid_b * s_bb + offs_n * s_bn
    c_base = c_ptr + pid_b * s_cb + offs_n * s_cn
    dy_base = dy_ptr + pid_b * s_yb + offs_d * s_yd
    hs_base = hs_ptr + pid_b * L * tile + dn
    out_base = pid_b * D_INNER * L + offs_d * L  # du, ddelta, dz are contiguous (b, d, L)
    part_base = (pid_b * NUM_DB + pid_d) * N_STATE * L + offs_n * L  # (b, NUM_DB, n, L)
    for i in range(0, L):
        t = L - 1 - i
        u = tl.load(u_base + t * s_ul, mask=md, other=0.0).to(tl.float32)
        raw = tl.load(dl_base + t * s_dl, mask=md, other=0.0).to(tl.float32) + bias
        dl = raw
        if SOFTPLUS:
            dl = _softplus(raw)
        Bt = tl.load(b_base + t * s_bl, mask=mn, other=0.0).to(tl.float32)
        Ct = tl.load(c_base + t * s_cl, mask=mn, other=0.0).to(tl.float32)
        dy = tl.load(dy_base + t * s_yl, mask=md, other=0.0).to(tl.float32)
        h = tl.load(hs_base + t * tile, mask=m2, other=0.0)
        h_prev = tl.load(hs_base + tl.maximum(t - 1, 0) * tile, mask=m2, other=0.0)
        h_prev = tl.where(t > 0, h_prev, h0)
        if HAS_Z:
            z = tl.load(z_base + t * s_zl, mask=md, other=0.0).to(tl.float32)
            sz = tl.sigmoid(z)
            y_pre = tl.sum(h * Ct[None, :], axis=1) + Dv * u
            dz = dy * y_pre * sz * (1.0 + z * (1.0 - sz))
            tl.store(dz_ptr + out_base + t, dz, mask=md)
            dy = dy * z * sz
        gD += dy * u
        tl.store(dc_part_ptr + part_base + t, tl.sum(dy[:, None] * h, axis=0), mask=mn)
        g += dy[:, None] * Ct[None, :]
        decay = tl.exp(dl[:, None] * A)
        gd = g * h_prev * decay  # d loss / d (dl * A)
        gB = tl.sum(g * Bt[None, :], axis=1)
        ddl = tl.sum(gd * A, axis=1) + gB * u
        gA += gd * dl[:, None]
        tl.store(db_part_ptr + part_base + t, tl.sum(g * (dl * u)[:, None], axis=0), mask=mn)
        tl.store(du_ptr + out_base + t, gB * dl + dy * Dv, mask=md)
        if SOFTPLUS:
            ddl = ddl * tl.sigmoid(raw)
        tl.store(ddelta_ptr + out_base + t, ddl, mask=md)
        gbias += ddl
        g = g * decay
    tl.store(dh0_ptr + pid_b * tile + dn, g, mask=m2)
    tl.store(da_part_ptr + pid_b * tile + dn, gA, mask=m2)
    tl.store(dd_part_ptr + pid_b * D_INNER + offs_d, gD, mask=md)
    tl.store(dbias_part_ptr + pid_b * D_INNER + offs_d, gbias, mask=md)


def _blocks(d_inner: int, d_state: int) -> tuple[int, int]:
    block_n = triton.next_power_of_2(d_state)
    block_d = FORCE_BLOCK_D or max(1, min(triton.next_power_of_2(d_inner), 2048 // block_n, 64))
    return block_d, block_n


def _s3(t):
    return t.stride(0), t.stride(1), t.stride(2)


def scan_forward(u, delta, A, B, C, D, z, bias, h0, softplus: bool, store_states: bool):
    """Launch the forward kernel.

    Parameters
    ----------
    u, delta : Tensor, shape (batch, d_inner, length)
    A : Tensor, shape (d_inner, d_state), contiguous float32
    B, C : Tensor, shape (batch, d_state, length)
    D, bias : Tensor, shape (d_inner,), contiguous float32
    z : Tensor, shape (batch, d_inner, length), or None
    h0 : Tensor, shape (batch, d_inner, d_state), contiguous float32
    softplus, store_states : bool

    Returns
    -------
    y : Tensor, shape (batch, d_inner, length), dtype of ``u``, contiguous
    h_last : Tensor, shape (batch, d_inner, d_state), float32
    states : Tensor, shape (batch, length, d_inner, d_state), float32, or None
    """
    b, d, L = u.shape
    n = A.shape[1]
    block_d, block_n = _blocks(d, n)
    y = torch.empty((b, d, L), dtype=u.dtype, device=u.device)
    h_last = torch.empty((b, d, n), dtype=torch.float32, device=u.device)
    states = torch.empty(
        (b, L, d, n) if store_states else (1,), dtype=torch.float32, device=u.device
    )
    zz = u if z is None else z
    grid = (b, triton.cdiv(d, block_d))
    _scan_fwd_kernel[grid](
        u, delta, A, B, C, D, zz, bias, h0, y, h_last, states,
        d, n, L,
        *_s3(u), *_s3(delta), *_s3(zz), *_s3(B), *_s3(C),
        HAS_Z=z is not None, SOFTPLUS=softplus, STORE_STATES=store_states,
        BLOCK_D=block_d, BLOCK_N=block_n,
    )  # fmt: skip
    return y, h_last, (states if store_states else None)


def scan_backward(u, delta, A, B, C, D, z, bias, h0, states, dy, dh_last, softplus: bool):
    """Launch the backward kernel and reduce its partial sums.

    Arguments as in :func:`scan_forward`, plus ``states`` (its stored ``h_t``), ``dy``
    (gradient of ``y``, shape of ``u``) and ``dh_last`` (gradient of the last state,
    ``(batch, d_inner, d_state)`` contiguous float32).

    Returns
    -------
    du, ddelta, dA, dB, dC, dD, dz, dbias, dh0 : Tensor
        Float32 gradients (``dz`` is None without ``z``), shapes of the inputs.
    """
    b, d, L = u.shape
    n = A.shape[1]
    block_d, block_n = _blocks(d, n)
    num_db = triton.cdiv(d, block_d)
    f32 = dict(dtype=torch.float32, device=u.device)
    du = torch.empty((b, d, L), **f32)
    ddelta = torch.empty((b, d, L), **f32)
    dz = torch.empty((b, d, L), **f32) if z is not None else du
    dh0 = torch.empty((b, d, n), **f32)
    dA_part = torch.empty((b, d, n), **f32)
    dD_part = torch.empty((b, d), **f32)
    dbias_part = torch.empty((b, d), **f32)
    dB_part = torch.empty((b, num_db, n, L), **f32)
    dC_part = torch.empty((b, num_db, n, L), **f32)
    zz = u if z is None else z
    _scan_bwd_kernel[(b, num_db)](
        u, delta, A, B, C, D, zz, bias, h0, states, dy, dh_last,
        du, ddelta, dz, dh0, dA_part, dD_part, dbias_part, dB_part, dC_part,
        d, n, L, num_db,
        *_s3(u), *_s3(delta), *_s3(zz), *_s3(B), *_s3(C), *_s3(dy),
        HAS_Z=z is not None, SOFTPLUS=softplus, BLOCK_D=block_d, BLOCK_N=block_n,
    )  # fmt: skip
    return (
        du,
        ddelta,
        dA_part.sum(0),
        dB_part.sum(1),
        dC_part.sum(1),
        dD_part.sum(0),
        dz if z is not None else None,
        dbias_part.sum(0),
        dh0,
    )
