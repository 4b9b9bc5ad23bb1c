"""Formatting of measured quantities, with their units."""

MIB = 1024 * 1024


def mib(nbytes: float) -> str:
    return f"{nbytes / MIB:,.1f} MiB"


def size(nbytes: float) -> str:
    """MiB from 1 MiB up, KiB below: small collectives and buffers keep their digits."""
    return mib(nbytes) if nbytes >= MIB else f"{nbytes / 1024:,.1f} KiB"


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def pct(share: float) -> str:
    return f"{share * 100:.1f}%"
