"""toolhub's OAuth authorization server pages and endpoints, over django-oauth-toolkit's views.

The consent page is the library's AuthorizationView in toolhub's look (the
login before it is toolhub's own login page); the register endpoint is RFC 7591
dynamic client registration over the library's Application model. Tokens,
codes, PKCE and metadata are the library's. Never grants a scope a user did not
see on the consent page.
"""

import json
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider import models as oauth2_models
from oauth2_provider.views import AuthorizationView

from agents.access.abilities import CALL_TOOL, USE_MCP, allows
from toolhub import csp, rate_limits

from . import oauth


class ConsentView(AuthorizationView):
    """Asks the signed-in user whether a client may use toolhub for them (GET), and answers the client (POST)."""

    template_name = "oauth/authorize.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        redirect = urlsplit(context.get("redirect_uri") or "")
        context |= {
            "redirect_host": redirect.netloc,
            "may_list_tools": allows(user, USE_MCP),
            "may_call_tools": allows(user, CALL_TOOL),
        }
        return context

    def form_valid(self, form):
        # The library looks the client up with .get(): a consent POST naming no registered client raised (500).
        if not oauth2_models.get_application_model().objects.filter(client_id=form.cleaned_data["client_id"]).exists():
            error = {"error": "invalid_client", "description": "No client is registered with that client_id."}
            return self.render_to_response(self.get_context_data(form=form, error=error), status=400)
        return super().form_valid(form)

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        redirect_uri = getattr(self, "oauth2_data", {}).get("redirect_uri")
        policy = settings.TOOLHUB_CONTENT_SECURITY_POLICY
        if response.status_code == 200 and redirect_uri and policy:
            # The consent form's answer redirects to the client: browsers hold that redirect to form-action.
            parts = urlsplit(redirect_uri)
            response[csp.header_name()] = csp.with_form_action(policy, f"{parts.scheme}://{parts.netloc}")
        return response


def _registration_error(error: str, description: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


@csrf_exempt  # clients call it with no cookie; it changes nothing a signed-in user owns
@require_POST
def register(request):
    """RFC 7591: register a public MCP client; 201 with its client_id, or 400 saying which metadata is wrong."""
    if not settings.TOOLHUB_OAUTH_REGISTRATION:
        return _registration_error("access_denied", "Client registration is turned off here; ask an admin.", 403)
    client = rate_limits.client_address(request)
    exceeded = rate_limits.take(f"oauth-register:{client}", limit=settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE,
                                what="address")  # fmt: skip
    if exceeded is not None:
        response = _registration_error("temporarily_unavailable", exceeded.message, 429)
        response["Retry-After"] = str(exceeded.retry_after)
        return response
    try:
        metadata = json.loads(request.body)
    except ValueError:
        return _registration_error("invalid_client_metadata", "The body must be JSON client metadata.")
    refused = oauth.registration_refusal(metadata)
    if refused is not None:
        return _registration_error(refused.error, refused.description)
    try:
        application = oauth.register_client(metadata)
    except ValidationError as error:
        return _registration_error("invalid_client_metadata", " ".join(error.messages))
    return JsonResponse(oauth.registration_response(application), status=201)
