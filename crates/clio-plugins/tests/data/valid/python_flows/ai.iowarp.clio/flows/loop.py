from typing import Annotated, Literal

from clio_agent.sdk import Flow
from pydantic import Field

# Nothing here runs when the plugin is checked: the declaration is read from the syntax tree.
raise SystemExit("imported!")


class Loop(Flow):
    """Drafts until the person accepts."""

    id = "loop"
    shape = "oneOrMore(terminal('draft'))"
    max_rounds: Annotated[int, Field(ge=1, le=9)] = 3
    tone: Literal["dry", "warm"] = "dry"
    models: tuple[str, ...] = ()
    budget_tokens = 5000

    async def forward(self, task, ctx):
        return task
