"""Formatting of measured quantities, with their units."""

import math

MIB = 1024 * 1024


GIB = 1024 * MIB


def mib(nbytes: float) -> str:
    """A memory size, one convention in every report: MiB to one decimal; from 1 GiB up GiB to three
    significant digits or more (5.78 GiB; a device's 80 GB reads 79.2 GiB, as its description does,
    never 81,090.1 MiB); under 0.05 MiB (which would print as 0.0 MiB) KiB."""
    if 0 < abs(nbytes) < 0.05 * MIB:
        return f"{nbytes / 1024:,.1f} KiB"
    if abs(nbytes) >= GIB:
        return f"{nbytes / GIB:,.{2 if abs(nbytes) < 9.995 * GIB else 1}f} GiB"
    return f"{nbytes / MIB:,.1f} MiB"


def size(nbytes: float) -> str:
    """mib()'s units from 1 MiB up, KiB and bytes below: small collectives and buffers keep their digits."""
    if nbytes >= MIB:
        return mib(nbytes)
    return f"{nbytes / 1024:,.1f} KiB" if nbytes >= 1024 else f"{int(nbytes)} B"


_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(x: float, unit: str) -> str:
    """A count or rate with an SI prefix and three significant digits, never an exponent:
    2.34e4 FLOP/s -> 23.4 kFLOP/s, 3.08e12 B/s -> 3.08 TB/s."""
    for scale, prefix in _SI:
        if abs(x) >= scale * 0.9995:         # 999.96 GB/s rounds to 1.00 TB/s, not 1e+03 GB/s
            value = x / scale
            return f"{value:,.0f} {prefix}{unit}" if abs(value) >= 999.5 else f"{value:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}" if abs(x) >= 0.001 or x == 0 else f"{x:.1e} {unit}"


def sig(x: float, digits: int = 3) -> str:
    """A plain number to `digits` significant digits, with separators and never an exponent:
    2734.2 -> 2,730; 0.98712 -> 0.987; 38012.4 -> 38,000; 2.2 -> 2.2 (where :.3g writes 2.73e+03, 3.8e+04)."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    places = digits - 1 - math.floor(math.log10(abs(x)))
    value = round(x, places)
    if value and math.floor(math.log10(abs(value))) > math.floor(math.log10(abs(x))):
        places -= 1                 # 999.7 rounds up to 1,000: one digit fewer after the point
        value = round(x, places)
    text = f"{value:,.{max(places, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text     # as :g: 2.2, not 2.20


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def flop(count: float) -> str:
    """A FLOP count with an SI prefix: 2.02 GFLOP, 39.5 TFLOP."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(count) >= scale:
            return f"{sig(count / scale)} {prefix}FLOP"
    return f"{sig(count)} FLOP"
