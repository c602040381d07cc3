"""The operator's agents: their definition (`agent`), the agents file (`file`) and sub-agents
offered to an agent's model as tools (`subagents`)."""
