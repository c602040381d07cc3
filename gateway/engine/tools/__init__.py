"""Server tools: Python functions (`python_tools`), MCP servers (`mcp`, `mcp_pinned`), the demo's
tools, what a tool may know of its run (`context`), progress (`status`), asking the user
(`elicitation`), approval before a call (`approvals`), and MCP resources a message embeds
(`resources`)."""
