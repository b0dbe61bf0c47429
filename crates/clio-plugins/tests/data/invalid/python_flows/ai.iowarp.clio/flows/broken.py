from clio_agent.sdk import Flow

class Broken(Flow)
    id = "broken"
