"""Results turned into words: the terminal view."""
