from clio_agent.sdk import Flow


class ThreeModels(Flow):
    id = "three-models"
    models: tuple[str, ...] = ()

    async def forward(self, question, ctx):
        council = Flow("council", models=list(self.models))
        return await ctx.call(council, question)
