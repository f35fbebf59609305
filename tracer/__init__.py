"""Dispatch-level tracer: records every storage a program allocates on the meta device."""
