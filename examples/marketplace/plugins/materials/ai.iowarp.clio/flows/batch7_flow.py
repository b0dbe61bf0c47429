"""The seeds' `Batch7` of "Workflows as data", as a Python flow: a `Workflow` of `Step`s
handed to the built-in `workflow` flow, with the independent reviewer as its editor and
each edit approved by the person. Its id is `batch7-flow`: `batch7` is flows/batch7.json."""

from clio_agent.sdk import Flow, Step, Workflow


class Batch7(Flow):
    id = "batch7-flow"

    async def forward(self, task, ctx):
        workflow = Workflow(steps=[
            Step("survey", "evidence_researcher", input="$task"),
            Step("relate", "data_analysis_expert", after=["survey"]),
            Step("review", "independent_reviewer", after=["relate"]),
        ])
        result = await ctx.call("workflow", {
            "workflow": workflow.to_dict(),
            "task": task,
            "editors": ["independent_reviewer"],
            "max_added_steps": 2,
            "approve_edits": True,
        })
        return result
