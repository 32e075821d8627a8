"""The client's address, for the limits that count per address (toolhub/rate_limits.py, OAuth client registration).

X-Forwarded-For is believed only when the direct peer (REMOTE_ADDR) is a trusted proxy (TOOLHUB_TRUSTED_PROXIES,
addresses or networks): the client is then the right-most hop that is not itself trusted, since each proxy appends
the address it was reached from and everything to the left of that was written by the client. From any other
peer the header is ignored, so rotating it buys nothing. Never trusts a header on its own, never writes.
"""

import functools
import ipaddress

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNKNOWN = "unknown"


def client_address(request) -> str:
    """The address of the client behind `request`, as text; "unknown" when the server gave no peer address."""
    peer = parse_address(request.META.get("REMOTE_ADDR", ""))
    if peer is None:
        return request.META.get("REMOTE_ADDR") or UNKNOWN
    trusted = trusted_networks(tuple(settings.TOOLHUB_TRUSTED_PROXIES))
    client = peer
    hops = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
    while is_trusted(client, trusted) and hops:
        hop = parse_address(hops.pop())
        if hop is None:  # not an address: nothing further left can be believed
            break
        client = hop
    return str(client)


def parse_address(text: str) -> Address | None:
    """An address as servers and proxies write it: plain, `[v6]:port` or `v4:port`; IPv4-mapped IPv6 as IPv4."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


@functools.lru_cache(maxsize=8)
def trusted_networks(proxies: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(proxy, strict=False) for proxy in proxies)


def is_trusted(address: Address, networks: tuple[Network, ...]) -> bool:
    return any(address.version == network.version and address in network for network in networks)
