"""Adapters to other frameworks, imported only when used (``titans_agent.adapters``).

``import titans_agent`` never imports any of them; each adapter names the extra to install.
"""
