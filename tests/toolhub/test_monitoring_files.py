"""deploy/'s Prometheus configuration, alert rules and Grafana dashboard load, and name only metrics toolhub exports.

No Prometheus or Grafana runs here: the files are read as YAML and JSON, and each PromQL expression's metric names
are checked against what agents.observability.metrics.collect() yields (families and their samples' names).
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from agents.observability.metrics import collect

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "toolhub-dashboard.json"

# PromQL words that are not metric names: operators, modifiers and aggregation clauses.
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (a small reader, enough for the expressions in deploy/)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals: label values, templates
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors ($__rate_interval too)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)  # label lists
    words = re.findall(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr)  # not a function call
    return {word for word in words if word not in KEYWORDS}


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def dashboard_targets() -> list[tuple[str, dict]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(panel["title"], target) for panel in panels for target in panel.get("targets", [])]


@pytest.fixture
def exported(db) -> set[str]:
    """Every name toolhub's metrics answer to: family names and sample names (counters' _total, _bucket, _count)."""
    names = set()
    for family in collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def test_metric_names_reader():
    assert metric_names(
        'sum by (job, le) (rate(toolhub_x_bucket{a="b c"}[$__rate_interval])) / on (job) toolhub_y > 0.05'
    ) == {"toolhub_x_bucket", "toolhub_y"}
    assert metric_names("histogram_quantile(0.95, sum by (le) (rate(up[5m])))") == {"up"}


@pytest.mark.django_db
def test_the_exported_names_are_the_exposition_names(exported):
    assert {"toolhub_turns_total", "toolhub_steward_duration_seconds_bucket", "toolhub_mcp_server_up"} <= exported
    assert "toolhub_turns_total_total" not in exported


def test_prometheus_scrapes_metrics_with_a_token_file_and_loads_the_alerts():
    config = yaml.safe_load(PROMETHEUS.read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["scrape_interval"] == "30s"
    assert job["authorization"]["credentials_file"]
    assert "credentials" not in job["authorization"]  # the token never sits in the configuration itself
    assert [PROMETHEUS.parent / path for path in config["rule_files"]] == [ALERTS]


def test_every_alert_has_a_severity_a_summary_and_a_description():
    rules = alert_rules()
    assert {rule["alert"] for rule in rules} >= {
        "ToolhubTurnErrorRateHigh", "ToolhubTurnsStuck", "ToolhubApprovalBacklog", "ToolhubMcpServerDown",
        "ToolhubRoutingFallbackRateHigh", "ToolhubStewardLatencyHigh",
    }  # fmt: skip
    assert len({rule["alert"] for rule in rules}) == len(rules)
    for rule in rules:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]


@pytest.mark.django_db
def test_alerts_name_only_exported_metrics(exported):
    for rule in alert_rules():
        names = metric_names(rule["expr"])
        assert names, rule["alert"]
        assert names <= exported | {"up"}, (rule["alert"], names - exported)  # up: Prometheus's own, per target


@pytest.mark.django_db
def test_dashboard_panels_name_only_exported_metrics(exported):
    targets = dashboard_targets()
    assert len(targets) >= 10
    for title, target in targets:
        names = metric_names(target["expr"])
        assert names, title
        assert names <= exported, (title, names - exported)


def test_dashboard_reads_from_its_prometheus_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36
    (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert (variable["name"], variable["query"]) == ("DS_PROMETHEUS", "prometheus")
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"]["uid"] == "$DS_PROMETHEUS", panel["title"]
        assert all(target["datasource"]["uid"] == "$DS_PROMETHEUS" for target in panel["targets"]), panel["title"]
