"""MCP: Ash's memory served to the person's other agents (Streamable HTTP at /mcp, stdio)."""
