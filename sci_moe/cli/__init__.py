"""Command-line interface (``sci-moe``). Nothing in the package imports this."""
