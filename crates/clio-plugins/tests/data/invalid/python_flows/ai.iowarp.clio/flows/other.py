from clio_agent.sdk import Flow


class Clash(Flow):
    id = "clash"

    async def forward(self, task, ctx):
        return task
