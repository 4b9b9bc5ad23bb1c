"""Formatting of measured quantities, with their units."""

MIB = 1024 * 1024


def mib(nbytes: float) -> str:
    """MiB to one decimal; under 0.05 MiB (which would print as 0.0 MiB) in KiB."""
    if 0 < abs(nbytes) < 0.05 * MIB:
        return f"{nbytes / 1024:,.1f} KiB"
    return f"{nbytes / MIB:,.1f} MiB"


def size(nbytes: float) -> str:
    """MiB from 1 MiB up, KiB below: small collectives and buffers keep their digits."""
    if nbytes >= MIB:
        return mib(nbytes)
    return f"{nbytes / 1024:,.1f} KiB" if nbytes >= 1024 else f"{int(nbytes)} B"


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def flop(count: float) -> str:
    """A FLOP count with an SI prefix: 2.02 GFLOP, 39.5 TFLOP."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(count) >= scale:
            return f"{count / scale:.3g} {prefix}FLOP"
    return f"{count:.3g} FLOP"
