"""The three operator roles (Django groups) and the model permissions each holds.

viewer reads; operator also edits policies, knowledge and tool examples, approves calls and
chats; admin holds every permission. Views check permissions, not group names; pages that hide an action
name the role it needs (role_needed, the same rule as the groups).
"""

from django.contrib.auth.models import Group, Permission

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"

APPS = ("catalog", "agents")
OPERATOR_EDITS = {
    "catalog": ("toolpolicy", "policyversion", "knowledgesnippet", "toolexample"),
    "agents": ("conversation", "message", "turn", "workflow", "toolapproval"),
}


def ensure_groups() -> dict[str, Group]:
    """Create or refresh the role groups; safe to run any number of times."""
    permissions = Permission.objects.filter(content_type__app_label__in=APPS).select_related("content_type")
    view = [p for p in permissions if p.codename.startswith("view_")]
    edit = [
        p
        for p in permissions
        if p.content_type.model in OPERATOR_EDITS.get(p.content_type.app_label, ())
        and not p.codename.startswith("delete_")
    ]
    groups = {}
    for name, granted in ((VIEWER, view), (OPERATOR, view + edit), (ADMIN, list(permissions))):
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(granted)
        groups[name] = group
    return groups


def role_needed(permission: str) -> str:
    """The least role whose group holds `permission` ("app_label.codename"), by the rule ensure_groups applies."""
    app_label, _, codename = permission.partition(".")
    action, _, model = codename.partition("_")
    if app_label in APPS and action == "view":
        return VIEWER
    if model in OPERATOR_EDITS.get(app_label, ()) and action != "delete":
        return OPERATOR
    return ADMIN
