"""Figures as JSON output carries them: USD to a millionth of a dollar, ratios to four
decimal places.

Sums of float prices pick up binary noise (`0.0010535999999999998`); a figure for people
and scripts is rounded once, here, when it is put in a JSON value, never where it is
computed or stored (records keep the exact cost they were billed). Six places keep a sum
within half a millionth of a dollar of its exact value; four keep a ratio within half a
hundredth of a percent. `-0.0` is written `0.0`.
"""

from __future__ import annotations

USD_PLACES = 6
RATIO_PLACES = 4


def _fixed(value: float | None, places: int) -> float | None:
    if value is None:  # unknown (a call with no price): said as null, never as 0
        return None
    return round(value, places) + 0.0  # -0.0 + 0.0 is 0.0: no "-0.0" for nothing saved


def json_usd(value: float | None) -> float | None:
    """A money figure (USD) for JSON: `USD_PLACES` decimal places."""
    return _fixed(value, USD_PLACES)


def json_ratio(value: float | None) -> float | None:
    """A ratio or a share for JSON: `RATIO_PLACES` decimal places."""
    return _fixed(value, RATIO_PLACES)
