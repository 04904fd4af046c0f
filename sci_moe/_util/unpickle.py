"""An unpickler that rebuilds plain data only (never calls arbitrary code)."""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable, Iterable, Mapping

__all__ = [
    "NUMPY_ARRAY_GLOBALS",
    "PLAIN_DATA_GLOBALS",
    "RestrictedUnpickler",
    "restricted_loads",
]

#: Globals that numpy scalars and arrays of numeric dtype need (old ``numpy.core`` and new
#: ``numpy._core`` spellings).
NUMPY_ARRAY_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    {
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }
)

#: Globals a pickle of plain data needs: containers, complex numbers and numpy arrays of
#: numeric dtype (:data:`NUMPY_ARRAY_GLOBALS`; Python 2 names too).
PLAIN_DATA_GLOBALS: frozenset[tuple[str, str]] = NUMPY_ARRAY_GLOBALS | frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("builtins", "dict"),
        ("builtins", "object"),
        ("__builtin__", "set"),
        ("__builtin__", "frozenset"),
        ("__builtin__", "complex"),
        ("__builtin__", "dict"),
        ("__builtin__", "object"),
        ("copy_reg", "_reconstructor"),
        ("copyreg", "_reconstructor"),
        ("collections", "OrderedDict"),
        ("_codecs", "encode"),  # bytes in protocol-2 pickles of numpy arrays
    }
)

_RENAMED_MODULES = {"copy_reg": "copyreg", "__builtin__": "builtins"}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that only rebuilds the globals it is allowed to.

    Dicts, lists, tuples, strings, numbers, ``None`` and booleans need no globals; the
    globals allowed by default are :data:`PLAIN_DATA_GLOBALS`. Anything else
    (``os.system``, ``builtins.eval``, arbitrary classes) raises
    ``pickle.UnpicklingError``.

    Parameters
    ----------
    file : binary file
        The pickle stream.
    allowed : iterable of (module, name), optional
        The allowed globals (default :data:`PLAIN_DATA_GLOBALS`).
    substitutes : mapping of (module prefix, name) to callable, optional
        Stand-ins for classes one must not import: a global whose module starts with the
        prefix and whose name matches is rebuilt by the stand-in (e.g. scikit-learn's
        ``Bunch`` as a ``dict`` subclass).
    """

    def __init__(
        self,
        file,
        *,
        allowed: Iterable[tuple[str, str]] | None = None,
        substitutes: Mapping[tuple[str, str], Callable] | None = None,
    ):
        super().__init__(file)
        self._allowed = frozenset(PLAIN_DATA_GLOBALS if allowed is None else allowed)
        self._substitutes = dict(substitutes or {})

    def find_class(self, module: str, name: str):
        for (prefix, sub_name), stand_in in self._substitutes.items():
            if name == sub_name and module.startswith(prefix):
                return stand_in
        if (module, name) not in self._allowed:
            raise pickle.UnpicklingError(
                f"refusing to unpickle global {module}.{name}: only plain data is allowed"
            )
        module = _RENAMED_MODULES.get(module, module)
        if module.startswith("numpy.core"):
            import numpy as np

            if int(np.__version__.split(".")[0]) >= 2:
                module = "numpy._core" + module[len("numpy.core") :]
        return super().find_class(module, name)


def restricted_loads(data: bytes, **kw):
    """``pickle.loads`` through :class:`RestrictedUnpickler` (keywords as its constructor)."""
    return RestrictedUnpickler(io.BytesIO(data), **kw).load()
