"""The Titans neural memory: the chunked update and token-level read (:mod:`~titans_agent.core.scan`)
and the agent's memory module over it (:mod:`~titans_agent.core.memory`). Pure torch, no I/O."""
