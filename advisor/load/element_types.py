"""XLA's element types (`xla.PrimitiveType`): value -> (lowercase XLA name, bits per element).

A table here, not read from jaxlib at import: importing jax to read one enum cost about 2.5 s
of every `advisor analyze`. `tests/test_fast_paths.py` checks the table against jaxlib's enum
and the widths against numpy / ml_dtypes (`derive()`, which also regenerates it:
`python -m advisor.load.element_types`). PRED is stored as one byte; TUPLE, TOKEN and
OPAQUE_TYPE hold no array data of their own and are not listed.
"""

from __future__ import annotations

TUPLE = 13

ELEMENT_TYPES: dict[int, tuple[str, int]] = {
    1: ("pred", 8),
    2: ("s8", 8),
    3: ("s16", 16),
    4: ("s32", 32),
    5: ("s64", 64),
    6: ("u8", 8),
    7: ("u16", 16),
    8: ("u32", 32),
    9: ("u64", 64),
    10: ("f16", 16),
    11: ("f32", 32),
    12: ("f64", 64),
    15: ("c64", 64),
    16: ("bf16", 16),
    18: ("c128", 128),
    19: ("f8e5m2", 8),
    20: ("f8e4m3fn", 8),
    21: ("s4", 4),
    22: ("u4", 4),
    23: ("f8e4m3b11fnuz", 8),
    24: ("f8e5m2fnuz", 8),
    25: ("f8e4m3fnuz", 8),
    28: ("f8e4m3", 8),
    29: ("f8e3m4", 8),
    32: ("f4e2m1fn", 4),
    33: ("f8e8m0fnu", 8),
}


def derive() -> dict[int, tuple[str, int]]:
    """The table as jaxlib's enum and numpy / ml_dtypes give it (imports jax: tests and regeneration only)."""
    import ml_dtypes
    import numpy as np
    from jax._src.lib import xla_client

    out = {}
    for name, value in xla_client.PrimitiveType.__members__.items():
        dtype = _numpy_dtype(name.lower(), ml_dtypes, np)
        if dtype is not None:
            out[int(value)] = (name.lower(), _bits(dtype, ml_dtypes, np))
    return out


def _numpy_dtype(name: str, ml_dtypes, np):
    if name == "pred":
        return np.uint8
    if name[0] in "su" and name[1:].isdigit():
        kind = "int" if name[0] == "s" else "uint"
        return getattr(np, f"{kind}{name[1:]}", None) or getattr(ml_dtypes, f"{kind}{name[1:]}", None)
    if name[0] == "c" and name[1:].isdigit():
        return getattr(np, f"complex{name[1:]}", None)
    if name == "bf16":
        return ml_dtypes.bfloat16
    if name[0] == "f" and name[1:].isdigit():
        return getattr(np, f"float{name[1:]}", None)
    if name.startswith(("f8", "f4", "f6")):
        return getattr(ml_dtypes, f"float{name[1]}_{name[2:]}", None)
    return None


def _bits(dtype, ml_dtypes, np) -> int:
    if np.dtype(dtype).kind in "biufc":     # numpy's own types: whole bytes
        return np.dtype(dtype).itemsize * 8
    for info in (ml_dtypes.iinfo, ml_dtypes.finfo):
        try:
            return int(info(dtype).bits)
        except (ValueError, TypeError):
            continue
    return np.dtype(dtype).itemsize * 8


if __name__ == "__main__":
    for value, entry in sorted(derive().items()):
        print(f'    {value}: ("{entry[0]}", {entry[1]}),')
