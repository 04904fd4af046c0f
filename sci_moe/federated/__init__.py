"""Federated fine-tuning with LoRA experts (FedLEASE and baselines)."""

from ._core_pending import SlotExpandedRouter, slot_expanded_top_m, slot_to_expert

__all__ = ["SlotExpandedRouter", "slot_expanded_top_m", "slot_to_expert"]
