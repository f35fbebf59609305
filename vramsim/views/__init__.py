"""Results turned into words: a terminal view per result, each module rendering one."""
