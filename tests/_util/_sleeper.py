"""A worker function for the parent-death test (importable by pool workers)."""

import os
import time


def record_pid_and_sleep(folder: str, seconds: float) -> dict:
    with open(os.path.join(folder, f"{os.getpid()}.pid"), "w") as fh:
        fh.write("x")
    time.sleep(seconds)
    return {}
