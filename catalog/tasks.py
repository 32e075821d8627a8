"""Celery tasks of the catalog: thin, take ids, call a service; never hold business rules."""

from celery import shared_task

from .models import McpServer


@shared_task(ignore_result=True)
def sync_mcp_server(server_id: int) -> str:
    """Sync one MCP server (progress on its row). Safe to run again or twice at once: a second sync of the
    same server finds the first one running and stops; a deleted server is skipped."""
    from .mcp_client.sync import sync_server  # only processes that sync load the MCP SDK

    server = McpServer.objects.filter(pk=server_id).first()
    if server is None:
        return "no such MCP server"
    return sync_server(server).summary()
