"""Which provider calls an upstream: one factory per provider kind, chosen by the upstream alone.

A new kind of model server is a module in this package (a class with `name`, `label` and `stream`, the
agents.providers.base.Provider protocol) and one `register` line below; Upstream.kind names the kind a profile's
upstream needs.
"""

from collections.abc import Callable

from .base import Provider, Upstream, upstream_of
from .builtin.model import BuiltinProvider

_FACTORIES: dict[str, Callable[[Upstream], Provider]] = {}


def register(kind: str, factory: Callable[[Upstream], Provider]) -> None:
    _FACTORIES[kind] = factory


def get_provider(upstream: Upstream | None = None) -> Provider:
    """The provider that calls `upstream` (default: the one the settings name)."""
    upstream = upstream or upstream_of(None)
    return _FACTORIES[upstream.kind](upstream)


def _openai_compatible(upstream: Upstream) -> Provider:
    # Imported here: the openai SDK takes about a second to import, which every process would pay at start
    # (manage.py commands, the console's forms) although only one that calls a model server needs it.
    from .openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(base_url=upstream.base_url, api_key=upstream.api_key(), model=upstream.model)


register("builtin", lambda upstream: BuiltinProvider())
register("openai", _openai_compatible)
