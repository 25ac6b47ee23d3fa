"""resource.Quantity values as the eviction manager prints and compares them.

Eviction messages quote quantities ("Threshold quantity: 100Mi, available: 50Mi"), formatted as
Go's `Quantity.String()` does; the type lives in kubelite.api.quantity (quota usage prints them too).
"""

from __future__ import annotations

from kubelite.api.quantity import BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI, Quantity, format_quantity

__all__ = ["BINARY_SI", "DECIMAL_EXPONENT", "DECIMAL_SI", "Quantity", "format_quantity"]
