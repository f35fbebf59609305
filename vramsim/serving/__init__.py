"""Serving budgets: the KV cache a serving engine gets on a device."""
