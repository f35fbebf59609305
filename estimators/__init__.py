"""Device catalog, allocator model and what-if estimators over a traced program."""
