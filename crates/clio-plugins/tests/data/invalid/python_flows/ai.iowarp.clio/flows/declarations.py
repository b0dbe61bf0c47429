from clio_agent.sdk import Flow


class NoId(Flow):
    async def forward(self, task, ctx):
        return task


class WrongOption(Flow):
    id = "wrong-option"
    rounds: int = "three"

    async def forward(self, task, ctx):
        return task


class Twice(Flow):
    id = "wrong-option"

    async def forward(self, task, ctx):
        return task
