"""JSON that every parser reads: NaN and Infinity (which json.dumps writes bare, and strict parsers
refuse) become null, each one named in a warning."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any, where: str = "", found: list[str] | None = None) -> Any:
    """obj with every non-finite float replaced by None; their JSON paths appended to `found`."""
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        if found is not None:
            found.append(f"{where or '$'} ({obj})")
        return None
    if isinstance(obj, dict):
        return {k: finite(v, f"{where}.{k}", found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v, f"{where}[{i}]", found) for i, v in enumerate(obj)]
    return obj


def dumps(obj: Any, **kwargs) -> str:
    """json.dumps with allow_nan=False: non-finite numbers written as null (a value that is not
    JSON never leaves advisor)."""
    kwargs.setdefault("default", str)
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(obj), allow_nan=False, **kwargs)


def non_finite(obj: Any) -> list[str]:
    """The JSON paths of the non-finite numbers in obj."""
    found: list[str] = []
    finite(obj, "", found)
    return found
