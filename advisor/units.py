"""Formatting of measured quantities, with their units."""

MIB = 1024 * 1024


def mib(nbytes: float) -> str:
    return f"{nbytes / MIB:,.1f} MiB"


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def pct(share: float) -> str:
    return f"{share * 100:.1f}%"
