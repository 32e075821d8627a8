"""The builtin offline model, rule-based and labelled so: model.py (the provider), arguments.py and readers.py
(values read from the request by the tool's schema), summaries.py (what it says). Never calls a server."""
