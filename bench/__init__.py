"""Routing benchmarks and evaluation, apart from what ships: reading bench files and rank metrics
(evaluation.py), full turns of the builtin model over routing cases (demo_eval.py), and their commands
(route_eval, route_bench, route_cases, demo_eval, steward_analyze). A Django app only for its commands; a
deployment leaves it out (TOOLHUB_DEV_APPS=0). The service benchmarks that start servers live in scripts/ (`make
bench` runs them), their inputs in data/.
"""
