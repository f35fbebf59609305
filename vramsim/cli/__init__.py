"""The ``vramsim`` command: the only place that prints or exits."""
