"""Triton kernels of the scatter grouped GEMM and their launchers (imports triton).

Two kernels, both reading rows through index vectors instead of permuted copies:

``_scatter_gemm_kernel``
    ``C[c(r)] = s_r * A[a(r)] @ B[e(r)]`` for the ``M`` expert-sorted rows ``r``. One
    program computes a ``(BLOCK_M, BLOCK_N)`` tile whose rows all belong to one expert:
    each expert's rows are cut into ``ceil(count_e / BLOCK_M)`` tiles (no padding of
    the data; the last tile of an expert is masked), and a tile table maps the program
    id to its expert. The grid is an upper bound on the tile count computed without a
    host sync; surplus programs do no work. Used for the forward pass (``B = W^T``) and
    for the input gradient (``B = W``); the latter can also reduce the gate gradient
    ``<dC_r @ W_e, X[g(r)]>`` in its epilogue (one partial sum per ``BLOCK_N`` column
    tile, summed afterwards: deterministic, no atomics).
``_grouped_xty_kernel``
    ``dW[e] = sum_{r in e} s_r dY[d(r)]^T X[x(r)]``: one program per
    ``(expert, BLOCK_N x BLOCK_K)`` tile of the weight gradient, looping over the
    expert's rows. Empty experts write zeros.

All products accumulate in float32; inputs may be float32, bfloat16 or float16.
"""

from __future__ import annotations

import functools
import warnings

import torch
import triton
import triton.language as tl

__all__ = ["FORCE_CONFIG", "block_m_for", "grouped_xty", "scatter_gemm", "tile_table"]

# Tests set this to force block sizes (small blocks exercise multi-tile loops).
FORCE_CONFIG: dict[str, int] = {}


@triton.jit
def _scatter_gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    a_idx_ptr,
    c_idx_ptr,
    scale_ptr,
    g_ptr,
    g_idx_ptr,
    dg_ptr,
    tile_expert_ptr,
    tile_end_ptr,
    counts_ptr,
    ends_ptr,
    num_experts,
    num_m_tiles,
    N,
    K,
    stride_am,
    stride_ak,
    stride_be,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    stride_gm,
    stride_gn,
    stride_dg,
    A_IDX: tl.constexpr,
    C_IDX: tl.constexpr,
    G_IDX: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    WRITE_C: tl.constexpr,
    DGATE: tl.constexpr,
    EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr,
    DOT_F32: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Grouped program order: GROUP_M row tiles share their column tiles in L2.
    pid = tl.program_id(0)
    num_n_tiles = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n_tiles
    first_m = (pid // per_group) * GROUP_M
    group_size = tl.minimum(num_m_tiles - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size

    # Which expert this row tile belongs to, and its rows [start, end).
    e = tl.load(tile_expert_ptr + pid_m).to(tl.int32)
    active = e < num_experts
    e = tl.minimum(e, num_experts - 1)
    count = tl.load(counts_ptr + e).to(tl.int32)
    group_end = tl.load(ends_ptr + e).to(tl.int32)
    first_tile = tl.load(tile_end_ptr + e).to(tl.int32) - tl.cdiv(count, BLOCK_M)
    start = group_end - count + (pid_m - first_tile) * BLOCK_M
    start = tl.where(active, start, 0)
    end = tl.where(active, group_end, 0)
    rows = start + tl.arange(0, BLOCK_M)
    mask_m = rows < end

    if A_IDX:
        a_rows = tl.load(a_idx_ptr + rows, mask=mask_m, other=0).to(tl.int64)
    else:
        a_rows = rows.to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = (
        b_ptr
        + e.to(tl.int64) * stride_be
        + offs_k[:, None] * stride_bk
        + offs_n[None, :].to(tl.int64) * stride_bn
    )

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    num_k = tl.where(active, tl.cdiv(K, BLOCK_K), 0)
    for i in range(0, num_k):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=mask_n[None, :], other=0.0)
        else:
            k_left = K - i * BLOCK_K
            a = tl.load(a_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n[None, :], other=0.0)
        if DOT_F32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    mask = mask_m[:, None] & mask_n[None, :]
    if DGATE:
        # Partial <acc_r, G[g(r)]> over this column tile (before any scaling).
        if G_IDX:
            g_rows = tl.load(g_idx_ptr + rows, mask=mask_m, other=0).to(tl.int64)
        else:
            g_rows = rows.to(tl.int64)
        g_ptrs = g_ptr + g_rows[:, None] * stride_gm + offs_n[None, :] * stride_gn
        g = tl.load(g_ptrs, mask=mask, other=0.0)
        part = tl.sum(acc * g.to(tl.float32), axis=1)
        tl.store(dg_ptr + pid_n * stride_dg + rows, part, mask=mask_m)
    if WRITE_C:
        if HAS_SCALE:
            s = tl.load(scale_ptr + rows, mask=mask_m, other=0.0).to(tl.float32)
            acc = acc * s[:, None]
        if C_IDX:
            c_rows = tl.load(c_idx_ptr + rows, mask=mask_m, other=0).to(tl.int64)
        else:
            c_rows = rows.to(tl.int64)
        c_ptrs = c_ptr + c_rows[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _grouped_xty_kernel(
    x_ptr,
    dy_ptr,
    dw_ptr,
    x_idx_ptr,
    dy_idx_ptr,
    scale_ptr,
    counts_ptr,
    ends_ptr,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_dym,
    stride_dyn,
    stride_we,
    stride_wn,
    stride_wk,
    X_IDX: tl.constexpr,
    DY_IDX: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    PRECISION: tl.constexpr,
    DOT_F32: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    e = tl.program_id(1)
    num_k_tiles = tl.cdiv(K, BLOCK_K)
    pid_n = pid // num_k_tiles
    pid_k = pid % num_k_tiles
    count = tl.load(counts_ptr + e).to(tl.int32)
    end = tl.load(ends_ptr + e).to(tl.int32)
    start = end - count

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    mask_n = offs_n < N
    mask_k = offs_k < K
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for m0 in range(start, end, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        mask_m = rows < end
        if X_IDX:
            x_rows = tl.load(x_idx_ptr + rows, mask=mask_m, other=0).to(tl.int64)
        else:
            x_rows = rows.to(tl.int64)
        if DY_IDX:
            dy_rows = tl.load(dy_idx_ptr + rows, mask=mask_m, other=0).to(tl.int64)
        else:
            dy_rows = rows.to(tl.int64)
        dy = tl.load(
            dy_ptr + dy_rows[:, None] * stride_dym + offs_n[None, :] * stride_dyn,
            mask=mask_m[:, None] & mask_n[None, :],
            other=0.0,
        )
        if HAS_SCALE:
            s = tl.load(scale_ptr + rows, mask=mask_m, other=0.0).to(tl.float32)
            dy = (dy.to(tl.float32) * s[:, None]).to(dy_ptr.dtype.element_ty)
        x = tl.load(
            x_ptr + x_rows[:, None] * stride_xm + offs_k[None, :] * stride_xk,
            mask=mask_m[:, None] & mask_k[None, :],
            other=0.0,
        )
        if DOT_F32:
            dy = dy.to(tl.float32)
            x = x.to(tl.float32)
        acc = tl.dot(tl.trans(dy), x, acc, input_precision=PRECISION)

    w_ptrs = (
        dw_ptr
        + e.to(tl.int64) * stride_we
        + offs_n[:, None].to(tl.int64) * stride_wn
        + offs_k[None, :] * stride_wk
    )
    tl.store(w_ptrs, acc.to(dw_ptr.dtype.element_ty), mask=mask_n[:, None] & mask_k[None, :])


# ---------------------------------------------------------------------- configs


def _pow2(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(max(int(n), 1))))


@functools.cache
def _num_stages(device_index: int) -> int:
    """Software-pipelining depth that fits the device's shared memory."""
    try:
        props = triton.runtime.driver.active.utils.get_device_properties(device_index)
        smem = props["max_shared_mem"]
    except Exception:  # interpreter, unknown driver
        return 2
    return 4 if smem >= 200 * 1024 else 3 if smem >= 150 * 1024 else 2


def _fp32_precision() -> str:
    """``"tf32"`` when torch allows TF32 matmuls on CUDA, else ``"ieee"`` (exact)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"
    except Exception:
        return "ieee"


def _precision(dtype: torch.dtype) -> str:
    return _fp32_precision() if dtype == torch.float32 else "ieee"


def _dot_f32(t: torch.Tensor) -> bool:
    """Whether to upcast bfloat16 dot operands to float32 (CPU = the interpreter only).

    The interpreter's ``tl.dot`` multiplies the raw uint16 storage of bfloat16 operands
    (triton 3.9). The upcast is exact (bfloat16 products are exact in float32), so the
    result matches the GPU's bf16 MMA with float32 accumulation.
    """
    return t.device.type == "cpu" and t.dtype == torch.bfloat16


def _launch_opts(device: torch.device, block_mn: int) -> dict:
    if device.type != "cuda":
        return {}
    stages = _num_stages(device.index if device.index is not None else 0)
    return {"num_warps": 8 if block_mn >= 128 * 128 else 4, "num_stages": stages}


def block_m_for(rows: int, num_experts: int) -> int:
    """Row tile of :func:`scatter_gemm`: about the mean rows per expert, 16 to 128."""
    if "BLOCK_M" in FORCE_CONFIG:
        return FORCE_CONFIG["BLOCK_M"]
    return _pow2(rows / max(num_experts, 1), 16, 128)


# ------------------------------------------------------------------- tile table


def tile_table(counts: torch.Tensor, rows: int, block_m: int) -> tuple[torch.Tensor, ...]:
    """Row-tile table of the expert-sorted rows, computed on the device (no host sync).

    Parameters
    ----------
    counts : Tensor, shape (E,), integer
        Rows per expert.
    rows : int
        ``counts.sum()`` (an upper bound is enough).
    block_m : int

    Returns
    -------
    tile_expert : Tensor, shape (num_tiles,), int64
        Expert of each row tile; ``E`` for surplus tiles (no work).
    tile_end : Tensor, shape (E,), int64
        Inclusive cumulative tile count per expert.
    """
    E = counts.numel()
    num_tiles = triton.cdiv(rows, block_m) + min(E, rows)
    tile_end = torch.cumsum(torch.div(counts + (block_m - 1), block_m, rounding_mode="floor"), 0)
    ids = torch.arange(num_tiles, device=counts.device, dtype=tile_end.dtype)
    tile_expert = torch.searchsorted(tile_end, ids, right=True)
    return tile_expert, tile_end


# --------------------------------------------------------------------- launchers


def scatter_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    b_strides: tuple[int, int, int],
    out: torch.Tensor | None,
    counts: torch.Tensor,
    ends: torch.Tensor,
    tiles: tuple[torch.Tensor, torch.Tensor],
    rows: int,
    n: int,
    k: int,
    block_m: int,
    a_idx: torch.Tensor | None = None,
    c_idx: torch.Tensor | None = None,
    scale: torch.Tensor | None = None,
    g: torch.Tensor | None = None,
    g_idx: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """``out[c(r)] = scale_r * a[a(r)] @ B[e(r)]``; optionally the partial gate sums.

    Parameters
    ----------
    a : Tensor, shape (*, k)
        Rows read through ``a_idx`` (or rows ``0..M-1`` in order).
    b : Tensor
        Expert matrices; ``B[e][i, j] = b[e * se + i * sk + j * sn]`` with
        ``b_strides = (se, sk, sn)`` (element strides into ``b``'s storage).
    out : Tensor, shape (*, n), or None
        Written at rows ``c_idx`` (or ``0..M-1``); ``None`` computes only the gate sums.
    counts, ends : Tensor, shape (E,)
        Rows per expert and their inclusive cumulative sum.
    tiles : tuple
        :func:`tile_table` of ``counts`` for ``block_m``.
    rows, n, k, block_m : int
        ``M``, output columns, contraction size, row tile.
    a_idx, c_idx : Tensor, shape (M,), int64, optional
    scale : Tensor, shape (M,), optional
        Row scale applied to the output (float32 epilogue).
    g : Tensor, shape (*, n), optional
        With it, return ``partial`` of shape ``(ceil(n / BLOCK_N), M)``, float32:
        ``partial.sum(0)[r] = <a[a(r)] @ B[e(r)], g[g(r)]>``.
    g_idx : Tensor, shape (M,), int64, optional

    Returns
    -------
    Tensor or None
        The gate partial sums when ``g`` is given.
    """
    E = counts.numel()
    block_n = FORCE_CONFIG.get("BLOCK_N", _pow2(n, 16, 128))
    block_k = FORCE_CONFIG.get("BLOCK_K", _pow2(k, 16, 64 if a.element_size() == 2 else 32))
    num_m_tiles = tiles[0].numel()
    num_n_tiles = triton.cdiv(n, block_n)
    dummy = counts
    partial = None
    if g is not None:
        partial = torch.empty(num_n_tiles, rows, device=a.device, dtype=torch.float32)
    grid = (num_m_tiles * num_n_tiles,)
    _scatter_gemm_kernel[grid](
        a,
        b,
        out if out is not None else dummy,
        a_idx if a_idx is not None else dummy,
        c_idx if c_idx is not None else dummy,
        scale if scale is not None else dummy,
        g if g is not None else dummy,
        g_idx if g_idx is not None else dummy,
        partial if partial is not None else dummy,
        tiles[0],
        tiles[1],
        counts,
        ends,
        E,
        num_m_tiles,
        n,
        k,
        a.stride(0),
        a.stride(1),
        *b_strides,
        out.stride(0) if out is not None else 0,
        out.stride(1) if out is not None else 0,
        g.stride(0) if g is not None else 0,
        g.stride(1) if g is not None else 0,
        partial.stride(0) if partial is not None else 0,
        A_IDX=a_idx is not None,
        C_IDX=c_idx is not None,
        G_IDX=g_idx is not None,
        HAS_SCALE=scale is not None,
        WRITE_C=out is not None,
        DGATE=g is not None,
        EVEN_K=k % block_k == 0,
        PRECISION=_precision(a.dtype),
        DOT_F32=_dot_f32(a),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=8,
        **_launch_opts(a.device, block_m * block_n),
    )
    return partial


def grouped_xty(
    x: torch.Tensor,
    dy: torch.Tensor,
    dw: torch.Tensor,
    counts: torch.Tensor,
    ends: torch.Tensor,
    rows: int,
    x_idx: torch.Tensor | None = None,
    dy_idx: torch.Tensor | None = None,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """``dw[e] = sum_{r in e} scale_r dy[d(r)]^T x[x(r)]`` (the weight gradient).

    Parameters
    ----------
    x : Tensor, shape (*, K)
    dy : Tensor, shape (*, N)
    dw : Tensor, shape (E, N, K)
        Output, fully written (zeros for empty experts).
    counts, ends : Tensor, shape (E,)
    rows : int
        ``M``, the number of sorted rows.
    x_idx, dy_idx : Tensor, shape (M,), int64, optional
        Row indirections into ``x`` and ``dy`` (identity when omitted).
    scale : Tensor, shape (M,), optional
        Applied to the ``dy`` rows (rounded to ``dy``'s dtype before the product).

    Returns
    -------
    Tensor
        ``dw``.
    """
    E, N, K = dw.shape
    if rows == 0:
        return dw.zero_()
    sixteen = x.element_size() == 2
    block_n = FORCE_CONFIG.get("BLOCK_N", _pow2(N, 16, 128))
    block_k = FORCE_CONFIG.get("BLOCK_K", _pow2(K, 16, 128))
    block_m = FORCE_CONFIG.get("BLOCK_M", _pow2(rows / max(E, 1), 16, 64 if sixteen else 32))
    dummy = counts
    grid = (triton.cdiv(N, block_n) * triton.cdiv(K, block_k), E)
    _grouped_xty_kernel[grid](
        x,
        dy,
        dw,
        x_idx if x_idx is not None else dummy,
        dy_idx if dy_idx is not None else dummy,
        scale if scale is not None else dummy,
        counts,
        ends,
        N,
        K,
        x.stride(0),
        x.stride(1),
        dy.stride(0),
        dy.stride(1),
        dw.stride(0),
        dw.stride(1),
        dw.stride(2),
        X_IDX=x_idx is not None,
        DY_IDX=dy_idx is not None,
        HAS_SCALE=scale is not None,
        PRECISION=_precision(x.dtype),
        DOT_F32=_dot_f32(x),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        **_launch_opts(x.device, block_n * block_k),
    )
    return dw
