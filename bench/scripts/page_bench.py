"""Page timings in Chromium: first contentful paint per page, and Send -> first status line of a new conversation.

Not a test: it asserts nothing. On the embedded default (`make run`: SQLite,
in-memory channel layer, eager Celery, the builtin model) in a temporary data
dir, one Daphne process, and Debian's Chromium driven by Playwright (the
browser tests' flags). Logged in as an operator:

- each page is loaded N times in one browser context (the first load fills
  the HTTP cache, as for an operator coming back), and its
  first-contentful-paint entry is read from the page's performance timeline;
- N new conversations are started from /console/ (the api benchmark's
  query mix, cycled): the time from the click on Send to the first status
  line of the turn visible on the conversation page, and to the turn done;
- with /approvals/ open in a second page and the calculator behind approval,
  --approvals turns ask for one from the console: the time from the
  approval's request (ToolApproval.requested_at, stored by the server) to
  its card in the inbox's DOM (a MutationObserver's clock: the same host's);
  each is then denied from the conversation page.

    .venv/bin/python bench/scripts/page_bench.py --loads 20 --conversations 20 --approvals 20
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.scripts.api_bench import QUERIES, WARM_UP_QUERIES, pct, setup_django  # noqa: E402
from tests.support.servers import daphne, embedded_env, manage  # noqa: E402

PAGES = ("/", "/console/", "/routing/", "/workflows/", "/catalog/", "/policies/", "/knowledge/", "/mcp-servers/")
USERNAME = "bench-operator"
FIRST_STATUS_LINE = "#thread li.event-status"
TURN_DONE = "#thread .turn-status.status-done, #thread .turn-status.status-failed"
# In every document: when its socket opened, when its first status line was in the DOM and when it was painted (the
# task after the next animation frame: rendering waits for the stylesheet), on that page's performance.now() clock.
MARKS_SCRIPT = """window.__marks = {};
document.addEventListener("click", (event) => {
  if (event.target.closest("button")) sessionStorage.clickedAt = String(performance.timeOrigin + performance.now());
}, true);
document.addEventListener("htmx:wsOpen", () => { window.__marks.socket = window.__marks.socket || performance.now(); });
new MutationObserver(() => {
  if (window.__marks.status || !document.querySelector(SELECTOR)) return;
  window.__marks.status = performance.now();
  requestAnimationFrame(() => setTimeout(() => { window.__marks.painted = performance.now(); }));
}).observe(document, {childList: true, subtree: true});""".replace("SELECTOR", repr(FIRST_STATUS_LINE))
# Where the time went, from the conversation page's navigation timing (the POST's redirect included).
STAGES_SCRIPT = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const css = performance.getEntriesByName(document.querySelector("link[rel=stylesheet]").href)[0];
  return {origin: performance.timeOrigin, clicked: Number(sessionStorage.clickedAt), redirected: nav.redirectEnd,
          response: nav.responseStart, css: css && css.responseEnd, dom: nav.domContentLoadedEventEnd,
          socket: window.__marks.socket, status: window.__marks.status, painted: window.__marks.painted};
}"""
STAGES = (("redirected", "POST answered (302)"), ("response", "conversation page first byte"),
          ("css", "its stylesheet loaded"), ("dom", "its DOMContentLoaded"), ("socket", "its socket open"),
          ("status", "first status line in the DOM"),
          ("painted", "first status line visible"))  # fmt: skip
# In the inbox: when each approval's card was first in the DOM, on the epoch clock (the server's requested_at is too).
INBOX_SCRIPT = """window.__seen = {};
new MutationObserver(() => {
  document.querySelectorAll("[id^=inbox-approval-]").forEach((card) => {
    if (!(card.id in window.__seen)) window.__seen[card.id] = performance.timeOrigin + performance.now();
  });
}).observe(document, {childList: true, subtree: true});"""
INBOX_QUESTION = "What is 15 + 27?"  # the calculator, which the run puts behind approval


# The paint entry may be recorded a frame after `load`: wait for it (buffered) rather than read too early.
FCP_SCRIPT = """() => new Promise((resolve) => {
  const found = () => performance.getEntriesByName("first-contentful-paint")[0];
  if (found()) return resolve(found().startTime);
  new PerformanceObserver(() => { if (found()) resolve(found().startTime); }).observe({type: "paint", buffered: true});
  setTimeout(() => resolve(null), 10000);
})"""


def session_cookie() -> str:
    """An operator's session in the embedded database (this process shares it with Daphne)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from toolhub.roles import OPERATOR, ensure_groups

    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    user.groups.add(ensure_groups()[OPERATOR])
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def first_paint(page, path: str) -> float:
    page.goto(path, wait_until="load")
    value = page.evaluate(FCP_SCRIPT)
    if value is None:
        raise SystemExit(f"{path}: no first-contentful-paint entry")
    return value


def new_conversation(page, question: str, timeout_ms: float) -> dict:
    """Send `question` from /console/ (once its socket is open, as after a person typed): ms from the click event to
    each stage of the conversation page (STAGES) and, seen from here, to the turn done."""
    page.goto("/console/", wait_until="load")
    page.wait_for_selector("body[data-live=open]")
    page.get_by_label("Start a conversation").fill(question)
    start = time.perf_counter()
    page.get_by_role("button", name="Send").click()
    page.wait_for_url("**/console/*/", wait_until="commit", timeout=timeout_ms)
    page.wait_for_selector(FIRST_STATUS_LINE, state="visible", timeout=timeout_ms)
    page.wait_for_selector(TURN_DONE, timeout=timeout_ms)
    done = (time.perf_counter() - start) * 1000
    marks = page.evaluate(STAGES_SCRIPT)
    stages = {key: marks["origin"] + marks[key] - marks["clicked"] for key, _ in STAGES if marks[key]}
    return {"stages": stages, "done": done, "conversation": page.url.rstrip("/").rsplit("/", 1)[-1]}


def inbox_latency(context, page, count: int, timeout_ms: float) -> list[float]:
    """ms from each approval's request to its card in an open inbox (see the module's docstring)."""
    from agents.models import ToolApproval
    from tests.browser.test_console import set_calculator

    # Playwright's sync API keeps an event loop in this thread; these ORM calls are still sequential (as in the
    # browser tests: tests/browser/conftest.py's orm_beside_playwright).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    set_calculator(requires_confirmation=True)
    inbox = context.new_page()
    inbox.add_init_script(INBOX_SCRIPT)
    inbox.goto("/approvals/", wait_until="load")
    inbox.wait_for_selector("body[data-approvals-socket=open]", timeout=timeout_ms)
    latencies = []
    try:
        for _ in range(count):
            page.goto("/console/", wait_until="load")
            page.wait_for_selector("body[data-live=open]")
            page.get_by_label("Start a conversation").fill(INBOX_QUESTION)
            page.get_by_role("button", name="Send").click()
            deny = page.get_by_role("button", name="Deny")
            deny.wait_for(timeout=timeout_ms)
            approval = ToolApproval.objects.filter(status=ToolApproval.Status.PENDING).latest("id")
            card = f"inbox-approval-{approval.pk}"
            inbox.wait_for_selector(f"#{card}", timeout=timeout_ms)
            seen = inbox.evaluate(f"window.__seen[{card!r}]")
            latencies.append(seen - approval.requested_at.timestamp() * 1000)
            deny.click()
            page.wait_for_selector(TURN_DONE, timeout=timeout_ms)
    finally:
        set_calculator(requires_confirmation=False)
        inbox.close()
    return latencies


def run(args, base: str, session: str) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, WIDE  # the browser tests' (needs Django set up)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=WIDE, base_url=base)
        context.add_cookies([{"name": "sessionid", "value": session, "url": base}])
        context.add_init_script(MARKS_SCRIPT)
        page = context.new_page()
        timeout_ms = args.timeout * 1000
        # Warm-up, not timed: the first turns wait for the router's warm-up and load the embedding model.
        for question in WARM_UP_QUERIES:
            new_conversation(page, question, timeout_ms)
        sends = [new_conversation(page, QUERIES[i % len(QUERIES)], timeout_ms) for i in range(args.conversations)]
        inbox = inbox_latency(context, page, args.approvals, timeout_ms) if args.approvals else []
        paths = (*PAGES, f"/console/{sends[-1]['conversation']}/") if sends else PAGES
        paints = {}
        for path in paths:
            first_paint(page, path)  # warm: templates compiled, static files cached
            paints[path] = [first_paint(page, path) for _ in range(args.loads)]
        browser.close()
    return {"sends": sends, "paints": paints, "inbox": inbox}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=20, help="timed loads of each page (default 20)")
    parser.add_argument("--conversations", type=int, default=20, help="timed new conversations (default 20)")
    parser.add_argument("--approvals", type=int, default=20, help="timed approvals seen by the inbox (0: none)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a page or a turn may take")
    args = parser.parse_args()
    if args.loads < 1 or args.conversations < 1:
        parser.error("--loads and --conversations must be at least 1")
    with tempfile.TemporaryDirectory(prefix="page-bench-") as tmp:
        env = embedded_env(Path(tmp))
        manage(env, "setup_demo")
        setup_django(Path(tmp))
        session = session_cookie()
        load_before = os.getloadavg()
        with daphne(env) as base:
            figures = run(args, base, session)
        load_after = os.getloadavg()
    report(args, figures, load_before, load_after)


def report(args, figures: dict, load_before: tuple, load_after: tuple) -> None:
    print("toolhub page benchmark: Chromium (Playwright) against one Daphne on the embedded default "
          "(SQLite, in-memory channel layer, eager Celery, builtin model), 1280x800")  # fmt: skip
    print(f"host: {os.cpu_count()} CPUs, load average (1/5/15 min) {' '.join(f'{x:.2f}' for x in load_before)} "
          f"before, {' '.join(f'{x:.2f}' for x in load_after)} after\n")  # fmt: skip
    print(f"First contentful paint, ms ({args.loads} loads each after one warm load, HTTP cache warm):")
    for path, values in figures["paints"].items():
        shown = path if not path.startswith("/console/") or path == "/console/" else "/console/<id>/ (one turn)"
        print(f"  {shown:28} p50 {pct(values, 0.5):>5}  p95 {pct(values, 0.95):>5}  max {round(max(values)):>5}")
    sends = figures["sends"]
    print(f"\nNew conversation from /console/ ({len(sends)} after {len(WARM_UP_QUERIES)} warm-up, the api benchmark's "
          f"{len(QUERIES)} queries cycled), ms from the click on Send:")  # fmt: skip
    for key, label in STAGES:
        values = [send["stages"][key] for send in sends if key in send["stages"]]
        if values:
            shown = "" if len(values) == len(sends) else f"  (in {len(values)} of {len(sends)})"
            print(f"  {label:32} p50 {pct(values, 0.5):>5}  p95 {pct(values, 0.95):>5}{shown}")
    done = [send["done"] for send in sends]
    print(f"  {'turn done (seen by Playwright)':32} p50 {pct(done, 0.5):>5}  p95 {pct(done, 0.95):>5}")
    inbox = figures["inbox"]
    if inbox:
        print(
            f"\nApprovals inbox open, {len(inbox)} calls asking for approval: ms from the request (stored) to its card "
            f"in the inbox: p50 {pct(inbox, 0.5)}  p95 {pct(inbox, 0.95)}  max {round(max(inbox))} (target: p95 1000)"
        )


if __name__ == "__main__":
    main()
