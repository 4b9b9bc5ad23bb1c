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
