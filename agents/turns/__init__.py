"""One turn, from the user's message to its last event, and the state that outlives it.

- start.py        store the message and a queued Turn (views, the API and consumers call it);
- dispatch.py     the only module that enqueues Celery tasks (run a turn, expire an approval);
- runtime.py      the request path: memory -> steward -> bundle -> knowledge -> prompt -> model loop -> record;
- lifecycle.py    a running turn's lease and deadline; end_turn/fail_turn, once, in one transaction;
- watchdog.py     stalled or overdue turns: queued again or failed visibly;
- cancellation.py, approvals.py   an operator's (or owner's) intervention on a running turn;
- sampling.py, questions.py       what an MCP server asks during a turn's tool call: the turn's model samples, an
  operator answers its elicitation in the console;
- events.py       store a TurnEvent, then broadcast it after commit; the failure reasons;
- tool_calls.py, client_tools.py  a model's tool call checked and executed; an API client's own tools;
- memory.py, budget.py, prompt.py  the conversation fitted to the model's budget; the step's prompt;
- workflows.py, staged_flows.py   workflow state (TTL, compare-and-set, idempotency) and the flows that drive it;
- routing_log.py, learning.py, retention.py, rollup.py, storage.py, middleware.py   what a turn leaves behind (rollup:
  closed days summed once for /metrics and the overview).

Imports the router, providers, tools, models and the catalog; never the console, the APIs or agents.tasks.
"""
