"""The ``titans-agent`` command line (installed as ``titans_agent.cli``).

The click group is :data:`titans_agent.cli.main.cli`; the console script calls
:func:`titans_agent.cli.main.main`.
"""
