"""The operator's console: pages (views.py, urls.py), live WebSockets (consumers.py, websocket_urls.py, fanout.py)
and what they show (fragments of turn events, the overview and its charts and metrics, a turn's timeline, turn
search, a tool's activity). Reads turns' stored events; starts, cancels and decides through agents.turns. A new
page goes here: a view in views.py, its URL in urls.py, its template under templates/agents/.
"""
