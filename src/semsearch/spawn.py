"""How semsearch starts its own Python children: never importing from the caller's directory.

`python -m pkg` puts the current directory first on `sys.path`, so a `json.py` or `queue.py`
in a repository an agent works in (or in the directory `semsearch serve` was started from)
would be imported, and run, by the child. `-P` (and `PYTHONSAFEPATH`, inherited by the
child's own children) leaves it off; children that need no particular directory also start in
`/`, and are told the project as an argument instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

NEUTRAL_CWD = "/"


def python_module(module: str, *args: str) -> list[str]:
    """The argv of `python -m module args…` for this interpreter, without the cwd on sys.path."""
    return [sys.executable, "-P", "-m", module, *args]


def child_env(env: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """`env` (default: this process's) with PYTHONSAFEPATH set, plus `extra`."""
    out = dict(os.environ if env is None else env)
    out.update(extra)
    out["PYTHONSAFEPATH"] = "1"
    return out
