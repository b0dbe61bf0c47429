import os

from clio_agent.sdk import Plugin, tool


@tool(callers="sometimes")
def shout(text: str) -> str:
    return text.upper()


class Broken(Plugin):
    id = "broken"
    version = os.environ["VERSION"]
