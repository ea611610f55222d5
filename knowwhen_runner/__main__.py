"""``python -m knowwhen_runner`` is the ``knowwhen`` command."""

from .cli import main

main()
