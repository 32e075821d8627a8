"""agents: what happens in a conversation. One sub-package per subsystem; a request goes down through them:

- console/      the operator's pages and live WebSockets (views, consumers, fan-out, overview, timeline, search);
- openai_api/   POST /v1/chat/completions (JSON or SSE), /v1/models, approvals by API key;
- mcp_gateway/  toolhub as an MCP server at /mcp (tools, resources, subscriptions, progress) and its OAuth;
- access/       who may do what (abilities per role and API-key scope) and the API keys themselves;
- account/      a signed-in user's own settings: the time zone pages and sockets show times in (/account/);
- turns/        one turn's lifecycle: start, dispatch to Celery, the runtime loop, lease, end/fail/cancel,
                approvals, events, tool calls, memory, prompt, workflows, learning, retention;
- router/       the steward: a request -> RoutingDecision and 0-5 recommended tools (`analyze`);
- providers/    model providers behind one protocol, chosen by a registry; the builtin offline model;
- tools/        the builtin tools run in-process (calculator, clock, web search, DNS) and result truncation.

models.py holds every table of the app; tasks.py the Celery entry points only. Imports run down that list
(an entry point may use turns, turns uses router, providers and tools, all use models and the catalog); never
up, and nothing here is imported by catalog.
"""
