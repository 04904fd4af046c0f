"""Placeholder replaced by the conversion helper."""
def from_transformers(block):
    raise NotImplementedError
def to_transformers(moe, block):
    raise NotImplementedError
