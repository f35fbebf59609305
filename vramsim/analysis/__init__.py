"""A traced Program -> its figures: checkpointing, parallelism and allocator what-ifs, then the Report."""
