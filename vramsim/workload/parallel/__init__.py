"""The program one rank runs under tensor or expert parallelism."""
