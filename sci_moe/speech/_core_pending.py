"""Moved into the core: the task-affine expert now lives in :mod:`sci_moe.moe`.

:class:`~sci_moe.moe.TaskAffineTable`, :func:`~sci_moe.moe.task_affine_forward`,
:func:`~sci_moe.moe.task_affine_macs` and :func:`~sci_moe.moe.bank_macs_per_token` were
written here for the Omni-Expert and moved to the core (same numerics); the output
activation of the former ``OutputMLPExperts`` is the core option
``MLPExperts(output_activation=...)``. These names stay importable from
``sci_moe.speech`` for compatibility.
"""

from __future__ import annotations

from sci_moe.moe import TaskAffineTable, bank_macs_per_token, task_affine_forward, task_affine_macs

__all__ = ["TaskAffineTable", "bank_macs_per_token", "task_affine_forward", "task_affine_macs"]
