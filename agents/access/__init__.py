"""Who may do what: the abilities of /v1, /mcp and the dashboard per role and API-key scope (abilities.py), and
API keys: made, hashed and looked up (api_keys.py). Used by the console, the OpenAI API and the MCP gateway;
imports only agents.models.
"""
