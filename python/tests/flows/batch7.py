from clio_agent.sdk import Flow, Step, Workflow


class Batch7(Flow):
    id = "batch7"

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
