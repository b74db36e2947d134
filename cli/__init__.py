"""The ``titans-agent`` command line (installed as ``titans_agent.cli``).

The click group is :data:`titans_agent.cli.app.cli`; the console script calls
:func:`titans_agent.cli.app.main`. The commands live in :mod:`~titans_agent.cli.write`,
:mod:`~titans_agent.cli.read`, :mod:`~titans_agent.cli.manage` and :mod:`~titans_agent.cli.train`;
what they share is in :mod:`~titans_agent.cli.options` (input) and :mod:`~titans_agent.cli.output`.
"""
