"""``python -m knowwhen_runner`` is the ``knowwhen`` command."""

from .cli.main import main

main()
