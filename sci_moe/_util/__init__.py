"""Private shared utilities: the bottom floor of sci-moe.

One copy of each: physical constants and units (:mod:`.units`), atomic file writes and
checkpoint I/O (:mod:`.io`), verified checkpoint files (:mod:`.checkpoint_file`), a
restricted unpickler (:mod:`.unpickle`), locking of run directories (:mod:`.lock`), a
failure-tolerant process pool (:mod:`.parallel`), log-friendly progress bars
(:mod:`.progress`), thread settings (:mod:`.threads`), argument checks (:mod:`.validate`),
the check of a layer's input tensor (:mod:`.layer_input`),
activation functions by name (:mod:`.activations`),
the one lazy loader (:mod:`.lazy`), scatter reductions (:mod:`.scatter`) and
``torch.compile`` with an eager fallback (:mod:`.compiling`) and the run's torch device
(:mod:`.devices`).
Nothing here imports any other part of ``sci_moe``; every other floor may import from here.
Not a public API: fields re-export what their users need.
"""

from .checkpoint_file import (
    CHECKPOINT_MAGIC,
    CheckpointError,
    load_latest,
    load_verified,
    remove_stale_temps,
    save_verified,
)
from .io import (
    atomic_open,
    atomic_save_json,
    atomic_save_npz,
    atomic_torch_save,
    atomic_write_bytes,
    atomic_write_text,
    fsync_dir,
    previous_path,
    read_json_file,
    sha256_file,
)
from .lazy import lazy_exports
from .lock import LOCK_NAME, DirectoryLock, DirectoryLocked, lock_directory
from .parallel import parallel_map
from .progress import LineWriter, progress_bar, progress_mode
from .threads import available_cores, resolve_threads, set_threads
from .units import (
    BOLTZMANN_KJ_PER_MOL_K,
    KJ_PER_EV,
    KJ_PER_HARTREE,
    KJ_PER_KCAL,
    kt_kj_per_mol,
)
from .unpickle import (
    NUMPY_ARRAY_GLOBALS,
    PLAIN_DATA_GLOBALS,
    RestrictedUnpickler,
    restricted_loads,
)
from .validate import check_coef, check_int, check_int_attr, check_real

# What needs torch (scatter reductions, the layer input check, ...) is imported lazily: that
# keeps ``sci_moe._util`` (and so the command line's argument parsing and ``--help``) free
# of the torch import.
_LAZY = {
    "CompiledOrEager": ".compiling",
    "DEVICE_TYPES": ".devices",
    "check_device_name": ".devices",
    "module_device": ".devices",
    "resolve_device": ".devices",
    "to_device": ".devices",
    "check_layer_input": ".layer_input",
    "get_activation": ".activations",
    "scatter_mean": ".scatter",
    "scatter_sum": ".scatter",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "BOLTZMANN_KJ_PER_MOL_K",
    "CHECKPOINT_MAGIC",
    "DEVICE_TYPES",
    "KJ_PER_EV",
    "KJ_PER_HARTREE",
    "KJ_PER_KCAL",
    "LOCK_NAME",
    "NUMPY_ARRAY_GLOBALS",
    "PLAIN_DATA_GLOBALS",
    "CheckpointError",
    "CompiledOrEager",
    "DirectoryLock",
    "DirectoryLocked",
    "LineWriter",
    "RestrictedUnpickler",
    "atomic_open",
    "atomic_save_json",
    "atomic_save_npz",
    "atomic_torch_save",
    "atomic_write_bytes",
    "atomic_write_text",
    "available_cores",
    "check_coef",
    "check_device_name",
    "check_int",
    "check_int_attr",
    "check_layer_input",
    "check_real",
    "fsync_dir",
    "get_activation",
    "kt_kj_per_mol",
    "lazy_exports",
    "load_latest",
    "load_verified",
    "lock_directory",
    "module_device",
    "parallel_map",
    "previous_path",
    "progress_bar",
    "progress_mode",
    "read_json_file",
    "remove_stale_temps",
    "resolve_device",
    "resolve_threads",
    "restricted_loads",
    "save_verified",
    "scatter_mean",
    "scatter_sum",
    "set_threads",
    "sha256_file",
    "to_device",
]
