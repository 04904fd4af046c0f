"""The one lazy loader: a package's names imported on first use (PEP 562).

A package whose names need a heavy dependency (torch, RDKit, OpenMM) lists them in a table
and binds the two module hooks this returns::

    __getattr__, __dir__ = lazy_exports(__name__, {"scatter_sum": ".scatter"})

so that importing the package does not import the dependency. Every lazy name of
``sci_moe`` goes through :func:`lazy_exports`; no module writes its own ``__getattr__``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module_name: str, table: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module hooks ``(__getattr__, __dir__)`` that import the names of ``table`` on first use.

    Parameters
    ----------
    module_name : str
        The ``__name__`` of the module that binds the hooks (it must be in ``sys.modules``
        when a name is first looked up, as it is while and after it is imported).
    table : mapping of str to str
        Public name -> the module that defines it under the same name, relative to the
        module's package (``".scatter"``) or absolute.

    Returns
    -------
    __getattr__ : callable
        Imports the name's module, stores the value in the module's globals (so the next
        access is a plain attribute lookup) and returns it; a name not in ``table`` raises
        :class:`AttributeError` saying which module lacks it.
    __dir__ : callable
        The module's globals together with the lazy names, sorted.
    """
    table = dict(table)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        module = sys.modules[module_name]
        source = importlib.import_module(target, module.__package__)
        try:
            value = getattr(source, name)
        except AttributeError:
            raise AttributeError(
                f"module {module_name!r}: lazy name {name!r} is not defined in "
                f"{source.__name__!r}; fix the table passed to lazy_exports"
            ) from None
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(table))

    return __getattr__, __dir__
