"""Vectors of texts by one model, stored by content (TextEmbedding): what start-up embeds once.

`stored_embed(texts, model=...)` returns the same vectors as embeddings.embed_texts, reading
the ones any process already made from the database and storing the ones it makes. For
index builds (examples, their generic and diacritic-free forms), never for a request's own
text: a request is embedded in memory and never written.
"""

import numpy as np

from catalog.models import TextEmbedding

from . import embedding_cache, embeddings

CHUNK = 500  # keys per query (SQLite's variable limit)


def text_key(text: str, model: str) -> str:
    return embedding_cache.cache_key(embeddings.model_name(model), text)


def stored_embed(texts: list[str], *, model: str) -> np.ndarray:
    """Unit vectors, one row per text, by `model`; each distinct text embedded at most once ever."""
    if not texts:
        return embeddings.embed_texts([], model=model)
    keys = {text: text_key(text, model) for text in dict.fromkeys(texts)}
    found: dict[str, np.ndarray] = {}
    wanted = list(keys.values())
    for start in range(0, len(wanted), CHUNK):
        for key, vector in TextEmbedding.objects.filter(key__in=wanted[start : start + CHUNK]).values_list(
            "key", "vector"
        ):
            found[key] = np.frombuffer(bytes(vector), dtype="<f4")
    missing = [text for text, key in keys.items() if key not in found]
    if missing:
        fresh = embeddings.embed_texts(missing, model=model)
        rows = [
            TextEmbedding(key=keys[text], vector=np.asarray(vector, dtype="<f4").tobytes())
            for text, vector in zip(missing, fresh, strict=True)
        ]
        TextEmbedding.objects.bulk_create(rows, ignore_conflicts=True, batch_size=CHUNK)
        found.update({keys[text]: vector for text, vector in zip(missing, fresh, strict=True)})
    return np.vstack([found[keys[text]] for text in texts]).astype(np.float32, copy=False)
