"""Searches over what-ifs and re-traces: advice, the largest fit, the cheapest parallel strategy."""
