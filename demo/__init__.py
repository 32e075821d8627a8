"""The demo, apart from what ships: seed data (data/), its installer (catalog.py), `manage.py setup_demo` and
`load_demo_catalog`, and the demo Loyalty MCP server (loyalty_mcp/). A Django app only for its commands; a
deployment leaves it out (TOOLHUB_DEV_APPS=0). Nothing in catalog, agents or toolhub imports it.
"""
