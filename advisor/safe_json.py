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


MAX_SIDE_FILE = 16 << 20     # advisor_run.json is a few KB; a larger one is not ours


def load_side_json(path, max_bytes: int = MAX_SIDE_FILE) -> Any:
    """A small JSON file others may have written (advisor_run.json): ValueError, with why, for one
    too large, nested too deeply (json raises RecursionError), or holding NaN or Infinity."""
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes >> 20} MiB")
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        doc = None
        depth = MAX_DEPTH + 1
    else:
        depth = _depth(doc)
    if depth > MAX_DEPTH:
        # what is read is written again (the JSON report): keep it far from the recursion limit
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    return doc


MAX_DEPTH = 64


def _depth(doc: Any) -> int:
    """How deeply lists and objects nest in doc, walked without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                break
            stack.extend((v, level + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")
