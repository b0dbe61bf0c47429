"""Flow-side modules of the SDK: ``clio_agent.flows.outcomes``."""
