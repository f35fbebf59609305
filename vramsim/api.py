"""The public entry points: ``simulate``, ``simulate_each`` and ``count_parameters``, from the analysis stage."""

from __future__ import annotations

from vramsim.analysis.simulate import count_parameters, simulate, simulate_each

__all__ = ["count_parameters", "simulate", "simulate_each"]
