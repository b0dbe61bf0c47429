"""CLIO's Python SDK: flows written in Python (``clio_agent.sdk``), their outcomes
(``clio_agent.flows.outcomes``), the child-side runner the ``clio`` binary starts
(``clio_agent._flow_host``) and the declaration reader ``plugin check`` uses
(``clio_agent._discover``)."""

__version__ = "0.1.0"
