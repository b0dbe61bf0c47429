from clio_agent.sdk import Plugin, hook, tool


@tool(read_only=True)
def shout(text: str, times: int = 1) -> str:
    """Says the text louder."""
    return (text.upper() + "!") * times


@tool
def secret(path: str) -> str:
    """Reads a file the hook refuses."""
    return open(path).read()


@hook("tool_call", id="no-secrets", tools="secret", fail_closed=True)
def no_secrets(ev):
    if "clio" in str(ev.tool_input):
        return {"decision": "deny", "reason": "no secrets from clio's home"}
    return None


class Loud(Plugin):
    id = "loud"
    version = "0.2.0"
    description = "A tool and a hook written in Python."
