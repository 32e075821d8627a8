"""Tool search: the index that ranks tools for a query (index.py: select:, regex:, hybrid BM25 + dense), the
process-wide index of the database catalog (service.py), the offline embedding models (embeddings.py, minilm.py,
the e5 engine in e5engine/), their vectors stored by content (vectors.py, embedding_cache.py), tool examples
(tool_examples.py) and the catalog-state version the index is cached by (signals.py).
"""
