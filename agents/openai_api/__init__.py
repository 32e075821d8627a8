"""The OpenAI-compatible API at /v1 (urls.py): chat completions as JSON or SSE (views.py, completions.py), models,
approvals; its input bounds (body_limits.py), OpenAI-shaped errors (errors.py, middleware.py) and its OpenAPI
description (openapi.py). Starts turns through agents.turns; never runs one itself.
"""
