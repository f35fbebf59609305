"""The options of a simulation, one dataclass per concern, checked once; the launch files users keep."""
