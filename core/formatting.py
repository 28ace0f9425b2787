"""Numbers for people: bytes, durations and figures, formatted the same way everywhere."""

from __future__ import annotations

from datetime import datetime, timezone

NA = "n/a"
MISSING = "-"

# How a figure of each kind is written; a kind not listed is written with str().
_PATTERNS = {
    "rate": "{:,.0f}",
    "ms": "{:.2f}",
    "seconds": "{:.2f}",
    "count": "{:,}",
    "loss": "{:.4f}",
    "ratio": "{:.2f}x",
    "percent": "{:.0%}",
    "fraction": "{:.1%}",
    "pct": "{:.1f}%",
}

_FIXED_DECIMALS = {"loss": 4, "ms": 2, "seconds": 2}
"""Kinds written with a fixed number of decimals, which a small value would lose: below 10 units of the last decimal
shown it is written to 3 significant digits instead (scientific form where it is that small)."""


def format_bytes(n: int | None, missing: str = NA) -> str:
    """Bytes in binary units for display: "15.6 GiB"; `missing` ("n/a") for None."""
    if n is None:
        return missing
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def format_si(value: float | None, unit: str, missing: str = MISSING) -> str:
    """1.5e12, "FLOP/s" -> "1.50 TFLOP/s" (decimal prefixes)."""
    if value is None:
        return missing
    for prefix, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def format_joules(joules: float) -> str:
    """0.00041 -> "0.41 mJ": energy with the prefix that keeps 1-999 before the point (µJ to kJ)."""
    for prefix, size in (("k", 1e3), ("", 1.0), ("m", 1e-3)):
        if abs(joules) >= size:
            return f"{joules / size:.3g} {prefix}J"
    return f"{joules / 1e-6:.3g} µJ"


def format_value(value: object, kind: str, missing: str = MISSING) -> str:
    """A figure as text by its kind ("rate", "ms", "bytes", ...); `missing` for None."""
    if value is None:
        return missing
    if kind == "bytes":
        return format_bytes(int(value), missing)  # type: ignore[call-overload]
    if kind == "flops":
        return format_si(float(value), "FLOP/s", missing)  # type: ignore[arg-type]
    if kind == "joules":
        return format_joules(float(value))  # type: ignore[arg-type]
    decimals = _FIXED_DECIMALS.get(kind)
    if decimals is not None and isinstance(value, int | float) and 0 < abs(value) < 10.0 ** (1 - decimals):
        return f"{value:.3g}"  # 9.65e-06 as itself, not 0.0000; 0.00012 as 0.00012, not 0.0001
    pattern = _PATTERNS.get(kind)
    return pattern.format(value) if pattern else str(value)


def format_duration(seconds: float) -> str:
    """'0:42', '12:05', '3:02:10'."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_seconds(seconds: float) -> str:
    """'0.214 s', '3.5 min', '2.1 h': a span of any size in three significant digits."""
    if seconds < 120:
        return f"{seconds:,.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:,.3g} min"
    return f"{seconds / 3600:,.3g} h"


def format_elapsed(seconds: float) -> str:
    """'42 s', '1 min 12 s', '1 h 3 min': a wait as it is said."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def utc_now() -> str:
    """The current UTC time as ISO 8601 to the second, as runs and exports record it."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
