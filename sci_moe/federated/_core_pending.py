"""Moved into the core: slot-expanded top-M routing now lives in :mod:`sci_moe.moe`.

This shim keeps the old import path working; import from :mod:`sci_moe.moe` instead
(:func:`~sci_moe.moe.slot_expanded_top_m`, :func:`~sci_moe.moe.slot_to_expert`,
:class:`~sci_moe.moe.SlotExpandedRouter`).
"""

from __future__ import annotations

from sci_moe.moe import SlotExpandedRouter, slot_expanded_top_m, slot_to_expert

__all__ = ["SlotExpandedRouter", "slot_expanded_top_m", "slot_to_expert"]
