"""The signed-in user's account page: the time zone their pages show times in. Thin: the form, zones.py, a
message and a redirect."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from .forms import TimeZoneForm
from .zones import COOKIE, save_time_zone, saved_zone


@login_required
@require_http_methods(["GET", "POST"])
def account(request):
    """GET: the zone in use and where it comes from, and the choice. POST: save the user's own choice (no role
    needed: it changes nothing but their pages); a name that is no zone is the form's error (400)."""
    browser = request.COOKIES.get(COOKIE, "")
    data = request.POST if request.method == "POST" else None
    form = TimeZoneForm(data, initial={"time_zone": saved_zone(request.user)}, browser_zone=browser)
    if request.method == "POST":
        if form.is_valid():
            name = form.cleaned_data["time_zone"]
            save_time_zone(user=request.user, name=name)
            if name:
                messages.success(request, f"Saved: pages show times in {name}.")
            else:
                messages.success(request, "Saved: pages show times in your browser's zone.")
            return redirect("account")
    context = {"form": form, "zone": request.time_zone}
    return render(request, "agents/account.html", context, status=400 if form.errors else 200)
