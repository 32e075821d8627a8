"""Template context shared by every page: which model and mode this instance runs."""

from django.conf import settings


def toolhub(request):
    if settings.TOOLHUB_MODEL_PROVIDER == "builtin":
        model_label = "builtin (offline, rule-based)"
    else:
        model_label = f"{settings.TOOLHUB_MODEL} at {settings.TOOLHUB_MODEL_BASE_URL}"
    return {"toolhub_model_label": model_label}
