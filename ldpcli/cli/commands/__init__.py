"""One module per ``ldp`` command, each with its Typer ``app``: the command's options, the library
call, and how its result is rendered. :mod:`ldpcli.cli.app` imports a module when its command runs."""
