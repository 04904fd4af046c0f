"""SPiCE: equivariant geometric Mixture-of-Experts over conformer ensembles."""

__all__: list[str] = []
