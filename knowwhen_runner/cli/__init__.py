"""The ``knowwhen`` command line: one module per command group, assembled by ``main``.

Reading order: ``main`` (the app, the entry point, how a known error becomes one line and exit 2), then
one module per group: ``init`` (a starter config), ``catalog`` (models, scenarios), ``run`` (run, plan,
worker, finalize), ``status`` (status, pause, resume), ``dataset`` (score, compare, import,
fetch-dataset, fetch-l1), ``serve`` (serve, view), ``gym``, ``export``, ``cache``; ``tables`` draws the
tables they print (fitted to the terminal's width). Each command parses its arguments, calls
one function of a stage and prints; nothing below this package imports it.
"""
