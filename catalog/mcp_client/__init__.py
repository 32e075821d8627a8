"""toolhub as a client of MCP servers: connections and calls (client.py), whom a call is made for and what a server
may ask them during it (callers.py), keeping the catalog in step with what
each server serves (sync.py), catalog names and renames (names.py), results as plain data (content.py), live
resources and prompts (resources.py), how a stdio server's process starts: its environment, directory and limits
(stdio_process.py, and launcher.py, which runs in that process and imports nothing of toolhub); their secrets are
encrypted at rest by catalog.models.secrets. Serving MCP is agents.mcp_gateway's job.
"""
