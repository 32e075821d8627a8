"""bench/datasets/convert.py: each source format on a tiny hand-written fixture, test files never opened,
and the committed samples (bench/data/<name>/) consistent with their catalogs."""

import gzip
import json
import re
from pathlib import Path

import pytest

from bench.datasets import convert

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def toollens_text(category, tool, api, description, required, optional, returns) -> str:
    return (
        f"category_name:{category}, tool_name:{tool}, api_name:{api}, api_description:{description}, "
        f"required_params: {json.dumps(required)}, optional_params: {json.dumps(optional)}, "
        f"return_schema: {json.dumps(returns)}"
    )


@pytest.fixture
def toollens_repo(tmp_path):
    """The layout of quchangle1/COLT: datasets/ToolLens/{corpus.jsonl, queries.jsonl, qrels/*.tsv}."""
    folder = tmp_path / "COLT" / "datasets" / "ToolLens"
    corpus = [
        toollens_text(
            "Food",
            "Worldwide Recipes",
            "Suggestions",
            "Get Suggestions",
            [{"name": "q", "type": "STRING", "description": ""}],
            [],
            {"success": "bool", "results": {"searches": ["list of str with length 10"]}},
        ),
        toollens_text(
            "Travel",
            "Nomad List Cities",
            "Oceania",
            "Get Oceania cities, sorted.\n\nsort: asc | desc, required_params: in the text",
            [{"name": "day", "type": "DATE (YYYY-MM-DD)", "description": "The day"}],
            [
                {"name": "limit", "type": "NUMBER", "description": "At most this many"},
                {"name": "sort", "type": "ENUM", "description": ""},
            ],
            "",
        ),
        toollens_text("Data", "A" * 40, "B" * 40, "Long names", [], [], {}),
    ]
    write_lines(
        folder / "corpus.jsonl",
        [json.dumps({"_id": str(i), "title": "", "text": text, "metadata": {}}) for i, text in enumerate(corpus)],
    )
    write_lines(
        folder / "queries.jsonl",
        [
            json.dumps({"_id": "7", "text": "I'm cooking with tofu.", "metadata": {}}),
            json.dumps({"_id": "8", "text": "A test query.", "metadata": {}}),
            json.dumps({"_id": "3", "text": " Dive spots in Fiji? ", "metadata": {}}),
        ],
    )
    write_lines(
        folder / "qrels" / "train.tsv",
        ["query-id\tcorpus-id\tscore", "3\t1\t1", "3\t2\t1", "7\t0\t1", "3\t1\t1", "7\t2\t0"],
    )
    write_lines(folder / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", "8\t0\t1"])
    return tmp_path / "COLT"


@pytest.fixture
def sealtools_repo(tmp_path):
    """The layout of fairyshine/Seal-Tools: Seal-Tools_Dataset/{tool,dev,test_*}.jsonl."""
    folder = tmp_path / "Seal-Tools" / "Seal-Tools_Dataset"
    tools = [
        {
            "api_name": "getVolleyballScore",
            "api_description": "Retrieve the current score of a volleyball match",
            "field": "Sports/Volleyball",
            "parameters": {
                "match_id": {"type": "str", "description": "The ID of the volleyball match"},
                "set_number": {"type": "int", "description": "The set number", "example": "1"},
                "live": {"type": "bool", "description": "Live only", "default": True},
            },
            "required": ["match_id"],
            "responses": {"score": {"type": "str", "description": "The score"}},
        },
        {
            "api_name": "getPM2.5Level",
            "api_description": "Get the PM2.5 level of a city",
            "field": "Environment/Air",
            "parameters": {
                "city": {"type": "str", "description": "The city"},
                "ratio": {"type": "float", "description": "x"},
            },
            "required": ["city"],
            "responses": {},
        },
        {
            "api_name": "getPM2_5Level",
            "api_description": "A different tool whose name the renamed one must not take",
            "field": "Environment/Air",
            "parameters": {},
            "required": [],
            "responses": {},
        },
    ]
    write_lines(folder / "tool.jsonl", [json.dumps(tool) for tool in tools])
    calls = [
        {"api": "getPM2.5Level", "parameters": {"city": "Paris"}, "responses": ["API_call_0"]},
        {"api": "getVolleyballScore", "parameters": {"match_id": "API_call_0"}, "responses": ["API_call_1"]},
        {"api": "getPM2.5Level", "parameters": {"city": "API_call_1"}, "responses": ["API_call_2"]},
    ]
    write_lines(
        folder / "dev.jsonl",
        [
            json.dumps({"id": "dev-easy-0", "query": "Score of match 12?", "calling": calls[1:2]}),
            json.dumps({"id": "dev-difficult-0", "query": "Air in Paris, then...", "calling": calls}),
        ],
    )
    write_lines(folder / "test_in_domain.jsonl", [json.dumps({"id": "test-easy-0", "query": "x", "calling": []})])
    return tmp_path / "Seal-Tools"


@pytest.fixture
def opened(monkeypatch):
    """The paths the converter opens."""
    paths, original = [], Path.open

    def recording(self, *args, **kwargs):
        paths.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", recording)
    return paths


def test_toollens_fixture_maps_to_catalog_and_train_queries(toollens_repo, tmp_path, opened):
    out = tmp_path / "out"
    result = convert.run("toollens", toollens_repo, out)

    catalog = json.loads((out / "catalog.json").read_text(encoding="utf-8"))
    assert catalog[0] == {
        "name": "worldwide_recipes__suggestions",
        "description": "Get Suggestions",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string", "description": ""}},
            "required": ["q"],
        },
        "source": "toollens",
        "original_name": "Worldwide Recipes::Suggestions",
        "category": "Food",
        "tool_name": "Worldwide Recipes",
        "original_id": "0",
    }
    assert catalog[1]["name"] == "nomad_list_cities__oceania"
    assert catalog[1]["description"] == "Get Oceania cities, sorted.\n\nsort: asc | desc, required_params: in the text"
    assert catalog[1]["parameters"] == {
        "type": "object",
        "properties": {
            "day": {
                "type": "string",
                "x-original-type": "DATE (YYYY-MM-DD)",
                "format": "date",
                "description": "The day",
            },
            "limit": {"type": "number", "description": "At most this many"},
            "sort": {"type": "string", "x-original-type": "ENUM", "description": ""},
        },
        "required": ["day"],
    }
    long_name = catalog[2]["name"]
    assert len(long_name) <= 64 and NAME.fullmatch(long_name) and long_name == "a" * 24 + "__" + "b" * 38

    assert jsonl(out / "train.jsonl") == [
        {
            "id": "toollens_train_3",
            "query": "Dive spots in Fiji?",
            "expected_tools": ["nomad_list_cities__oceania", long_name],
            "source": "toollens",
            "subset": "train",
        },
        {
            "id": "toollens_train_7",
            "query": "I'm cooking with tofu.",
            "expected_tools": ["worldwide_recipes__suggestions"],
            "source": "toollens",
            "subset": "train",
        },
    ]
    assert result["tools_per_query"] == {"1": 1, "2": 1}
    assert any("1 duplicate" in note for note in result["notes"])
    assert opened and not any("test" in path.name for path in opened)


def test_sealtools_fixture_maps_to_catalog_and_dev_queries(sealtools_repo, tmp_path, opened):
    out = tmp_path / "out"
    result = convert.run("sealtools", sealtools_repo, out, split="dev", sample_size=1, seed=0)

    catalog = json.loads((out / "catalog.json").read_text(encoding="utf-8"))
    assert catalog[0] == {
        "name": "getVolleyballScore",
        "description": "Retrieve the current score of a volleyball match",
        "parameters": {
            "type": "object",
            "properties": {
                "match_id": {"type": "string", "description": "The ID of the volleyball match"},
                "set_number": {"type": "integer", "description": "The set number", "example": "1"},
                "live": {"type": "boolean", "description": "Live only", "default": True},
            },
            "required": ["match_id"],
        },
        "source": "sealtools",
        "original_name": "getVolleyballScore",
        "category": "Sports/Volleyball",
    }
    renamed = catalog[1]
    assert renamed["original_name"] == "getPM2.5Level" and renamed["name"] == "getPM2_5Level__2"
    assert renamed["parameters"]["properties"]["ratio"]["type"] == "number"
    assert catalog[2]["name"] == "getPM2_5Level"

    assert jsonl(out / "dev.jsonl") == [
        {
            "id": "sealtools_dev-easy-0",
            "query": "Score of match 12?",
            "expected_tools": ["getVolleyballScore"],
            "source": "sealtools",
            "subset": "dev",
            "level": "easy",
        },
        {
            "id": "sealtools_dev-difficult-0",
            "query": "Air in Paris, then...",
            "expected_tools": ["getPM2_5Level__2", "getVolleyballScore"],
            "source": "sealtools",
            "subset": "dev",
            "level": "difficult",
        },
    ]
    assert len(jsonl(out / "dev_sample.jsonl")) == 1
    assert result["tools_per_query"] == {"1": 1, "2": 1}
    assert not any("test" in path.name for path in opened)


def test_a_missing_raw_file_is_named(sealtools_repo, tmp_path, capsys):
    with pytest.raises(convert.ConvertError, match=r"Seal-Tools_Dataset/train\.jsonl.*fairyshine/Seal-Tools"):
        convert.run("sealtools", sealtools_repo, tmp_path / "out", split="train")
    assert convert.main(["toollens", str(sealtools_repo), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: missing raw file") and "datasets/ToolLens/corpus.jsonl" in err
    with pytest.raises(convert.ConvertError, match="only a train split"):
        convert.run("toollens", sealtools_repo, tmp_path / "out", split="dev")


def test_sample_is_deterministic_and_keeps_file_order():
    queries = [{"id": str(i)} for i in range(100)]
    first = convert.sample(queries, 10, seed=0)
    assert first == convert.sample(queries, 10, seed=0) != convert.sample(queries, 10, seed=1)
    assert [int(q["id"]) for q in first] == sorted(int(q["id"]) for q in first)
    assert convert.sample(queries, 500, seed=0) == queries


def committed_catalog(folder: Path) -> list[dict]:
    if (folder / "catalog.json.gz").exists():
        return json.loads(gzip.decompress((folder / "catalog.json.gz").read_bytes()).decode("utf-8"))
    return json.loads((folder / "catalog.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("name", "sample", "tools", "subset"),
    [("toollens", "train_sample.jsonl", 464, "train"), ("sealtools", "dev_sample.jsonl", 4076, "dev")],
)
def test_committed_samples_only_name_tools_of_their_catalog(name, sample, tools, subset):
    folder = DATA / name
    catalog = committed_catalog(folder)
    names = [tool["name"] for tool in catalog]
    assert len(catalog) == tools and len(set(names)) == len(names)
    assert all(NAME.fullmatch(n) for n in names)
    assert all(tool["source"] == name and isinstance(tool["description"], str) for tool in catalog)
    assert all(tool["parameters"]["type"] == "object" for tool in catalog)

    queries = jsonl(folder / sample)
    assert len(queries) == 500 and len({q["id"] for q in queries}) == 500
    assert {q["subset"] for q in queries} == {subset} and {q["source"] for q in queries} == {name}
    known = set(names)
    assert all(q["expected_tools"] and set(q["expected_tools"]) <= known for q in queries)
