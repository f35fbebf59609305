"""The ``vramsim`` command: a module per subcommand, each a ``run(args, console)``, dispatched by ``main``."""

from vramsim.cli.main import main

__all__ = ["main"]
