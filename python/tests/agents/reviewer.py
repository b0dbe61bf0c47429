"""The agent of reviewer.toml, as Python classes: a base layer and the reviewer."""

from clio_agent.sdk import Agent, Flow, Prefers, Requires


class Base(Agent):
    id = "base"
    plugins = ["core", "memory"]
    requires = Requires(tool_calling=True, context_tokens=8000)
    prefers = Prefers(provider="ollama", effort="high")


class Reviewer(Base):
    id = "reviewer"
    version = "1.2.0"
    role = "Reviews drafts"
    description = "Reads a draft and says what to fix."
    plugins = ["clio/pdf@^1.2", "notes"]
    flow = Flow("council", models=["a", "b"], rounds=2)
    requires = Requires(context_tokens=64_000)
    prefers = Prefers(model="local/qwen")
