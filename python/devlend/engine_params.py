"""The timing constants of params/hardware.toml, as the engine reads them, for Python models."""

from __future__ import annotations

import functools
import tomllib

from . import _core


@functools.lru_cache(maxsize=None)
def params() -> dict:
    return tomllib.loads(_core.params_toml())


def timing_param(name: str) -> int:
    return params()["timing"][name]
