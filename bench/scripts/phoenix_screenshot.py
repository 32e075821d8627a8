"""docs/img/phoenix-trace.png: a toolhub turn's trace in the Arize Phoenix UI (docs/operations/monitoring.md).

Not a benchmark nor a test: it makes the picture again. On the embedded default (`make run`: SQLite, the builtin
model) in a temporary data dir, one Daphne exporting its traces to a Phoenix of its own (tests/support/phoenix.py:
var/phoenix-venv, which `make test-integration` installs), one turn through /v1, then Debian's Chromium (Playwright,
never `playwright install`) opens that trace in Phoenix with the model call selected.

    .venv/bin/python bench/scripts/phoenix_screenshot.py [--out docs/img/phoenix-trace.png]
"""

import argparse
import json
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.phoenix import phoenix_server  # noqa: E402
from tests.support.servers import daphne, embedded_env, manage  # noqa: E402

PROJECT = "toolhub"
QUESTION = "what is 12 * 7?"
VIEWPORT = {"width": 1440, "height": 860}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # fmt: skip


def one_turn(base: str, key: str) -> str:
    body = json.dumps({"model": "toolhub", "messages": [{"role": "user", "content": QUESTION}]}).encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"{base}/v1/chat/completions", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)["choices"][0]["message"]["content"]


def turn_trace(phoenix) -> tuple[str, list[dict]]:
    """The turn's trace id and spans, once the request's span (the root, which ends last) is stored."""
    deadline = time.monotonic() + 60
    while True:
        try:
            spans = phoenix.get(f"/v1/projects/{PROJECT}/spans", limit=1000)["data"]
        except urllib.error.HTTPError as error:  # 404 until the first span names the project
            assert error.code == 404, error
            spans = []
        for turn in (span for span in spans if span["name"] == "invoke_agent toolhub"):
            ours = [span for span in spans if span["context"]["trace_id"] == turn["context"]["trace_id"]]
            if any(span["parent_id"] is None for span in ours):
                return turn["context"]["trace_id"], ours
        assert time.monotonic() < deadline, f"no whole turn in Phoenix: {sorted({span['name'] for span in spans})}"
        time.sleep(0.5)


def screenshot(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT, color_scheme="light")
        page.goto(url)
        page.get_by_text("invoke_agent toolhub").first.wait_for(timeout=60_000)
        page.get_by_role("tab", name="Attributes").click()  # the selected model call's attributes, as sent
        page.get_by_text("gen_ai.usage.input_tokens").first.wait_for(timeout=60_000)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(out))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "phoenix-trace.png")
    args = parser.parse_args()
    with phoenix_server() as phoenix, tempfile.TemporaryDirectory() as data_dir:
        env = embedded_env(data_dir) | {
            "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
        }
        manage(env, "setup_demo")
        key = manage(env, "create_api_key", "phoenix-screenshot").strip().splitlines()[-1]
        with daphne(env) as base:
            phoenix.wait_until_ready()
            print("toolhub answered:", one_turn(base, key))
            trace_id, spans = turn_trace(phoenix)
        project_id = next(p["id"] for p in phoenix.get("/v1/projects")["data"] if p["name"] == PROJECT)
        model_call = next(span for span in spans if span["name"].startswith("chat "))
        url = f"{phoenix.url}/projects/{project_id}/traces/{trace_id}?selectedSpanNodeId={model_call['id']}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        screenshot(url, args.out)
    print(f"{args.out}: {args.out.stat().st_size // 1024} KB, trace {trace_id} ({len(spans)} spans)")


if __name__ == "__main__":
    main()
