"""Convert two public tool-retrieval benchmarks to the bench format (stdlib only).

    python bench/datasets/convert.py {toollens,sealtools} SOURCE_DIR OUT_DIR [--split S] [--sample N] [--seed S]

writes OUT_DIR/catalog.json (every tool the benchmark defines), OUT_DIR/<split>.jsonl (every query of the
split) and, with --sample N, OUT_DIR/<split>_sample.jsonl: N queries drawn with random.Random(seed), kept in
file order. SOURCE_DIR is a checkout (or an export keeping the paths) of the repository, or the dataset folder
itself. Test splits are never read: no test file is opened, and a split other than train/dev is refused.

Output format (as /work/shared/bench/README.md): catalog.json is a JSON list, one tool a line, of
{"name" (unique, [A-Za-z0-9_-]{1,64}), "description", "parameters" (JSON Schema object), "source",
"original_name", ...}; the queries JSONL has {"id", "query", "expected_tools", "source", "subset", ...}.

ToolLens (source "toollens")
    From COLT, "Towards Completeness-Oriented Tool Retrieval for Large Language Models" (Qu et al., CIKM 2024,
    arXiv 2405.16089). Repository github.com/quchangle1/COLT, commit bbec292c38cabe3fbae098f50cc31b2e9f7e8fca
    (2024-11-06). Licence: not stated (the repository has no LICENSE file and its README names none; the tools
    are RapidAPI endpoints taken from ToolBench). Files read, under datasets/ToolLens/:
    - corpus.jsonl: the 464 tools, BEIR style {"_id", "text"}, the text being "category_name:C, tool_name:T,
      api_name:A, api_description:D, required_params: [JSON], optional_params: [JSON], return_schema: JSON".
      One tool = one API endpoint: name = slug of "T__A", original_name = "T::A", plus "category",
      "tool_name" and "original_id" (the corpus _id). Parameter types map STRING/NUMBER/... to JSON Schema
      types; a type with no JSON Schema equivalent (ENUM, "DATE (YYYY-MM-DD)") becomes "string" and keeps the
      source's word in "x-original-type" (dates also get "format": "date"). The return schema is dropped.
    - qrels/train.tsv: query-id, corpus-id, score; the train queries and their tools (duplicate rows dropped).
    - queries.jsonl: {"_id", "text"} of every query of all splits in one file; only the lines whose _id is
      in qrels/train.tsv are kept; the other lines (other splits) are parsed and dropped, never kept or counted.
    Not read: qrels/test.tsv, query_*_test.txt, query_*_tune.txt (the same blobs as the test files, so there is
    no separate dev split), query_tool.txt, query_scene_*.txt, scene_tool.txt, ToolLens_data.json.
    Splits: train only.

Seal-Tools (source "sealtools")
    From "Seal-Tools: Self-Instruct Tool Learning Dataset for Agent Tuning and Detailed Benchmark" (Wu et al.,
    NLPCC 2024, arXiv 2405.08355). Repository github.com/fairyshine/Seal-Tools, commit
    ce753ecd60ed08dd376984035de531ab8421f1c6 (2024-11-05). Licence: Apache-2.0 (LICENSE). Files read, under
    Seal-Tools_Dataset/:
    - tool.jsonl: the 4,076 tools {"api_name", "api_description", "field", "parameters", "required",
      "responses"}; name = api_name (characters outside [A-Za-z0-9_-] become "_"), "category" = field. Parameter
      types str/int/float/bool/list/dict map to string/integer/number/boolean/array/object; every other
      key of a parameter (example, unit, default, choices, ...) is kept as given. Responses are dropped.
    - dev.jsonl (--split dev) or train.jsonl (--split train, the default): {"id", "query", "calling":
      [{"api", "parameters", "responses"}]}; expected_tools = the distinct apis called, in call order; "level"
      = easy (one call) or difficult (several, possibly nested) from the id.
    Not read: test_in_domain.jsonl, test_out_domain.jsonl, field.jsonl, dataset_for_finetune/,
    dataset_in_old_format/, DPR_Training/. train.jsonl is in the repository but is over 4 MiB and was missing
    from the snapshot used here, so the committed Seal-Tools data is the dev split; the same command with
    --split train converts train.jsonl when it is present (same format as dev.jsonl).

Regenerate (from /work/main). Export the raw files from clones of the repositories at the commits above, e.g.
    for f in corpus.jsonl queries.jsonl qrels/train.tsv; do mkdir -p var/datasets/toollens/raw/datasets/ToolLens/qrels
        git -C COLT show bbec292:datasets/ToolLens/$f > var/datasets/toollens/raw/datasets/ToolLens/$f; done
    for f in tool.jsonl dev.jsonl; do mkdir -p var/datasets/sealtools/raw/Seal-Tools_Dataset
        git -C Seal-Tools show ce753ec:Seal-Tools_Dataset/$f > var/datasets/sealtools/raw/Seal-Tools_Dataset/$f; done
then
    python bench/datasets/convert.py toollens var/datasets/toollens/raw var/datasets/toollens --sample 500 --seed 0
    python bench/datasets/convert.py sealtools var/datasets/sealtools/raw var/datasets/sealtools --split dev \
        --sample 500 --seed 0
then copy catalog.json (gzip -n -9 when over 1 MB) and the *_sample.jsonl file into bench/data/<name>/.
"""

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")

TOOLLENS = {
    "source": "toollens",
    "repo": "quchangle1/COLT",
    "commit": "bbec292c38cabe3fbae098f50cc31b2e9f7e8fca",
    "folder": "datasets/ToolLens",
    "splits": ("train",),
}
SEALTOOLS = {
    "source": "sealtools",
    "repo": "fairyshine/Seal-Tools",
    "commit": "ce753ecd60ed08dd376984035de531ab8421f1c6",
    "folder": "Seal-Tools_Dataset",
    "splits": ("train", "dev"),
}
BENCHMARKS = {"toollens": TOOLLENS, "sealtools": SEALTOOLS}


class ConvertError(Exception):
    """A missing or malformed raw file; the message names the file."""


# --- shared helpers -----------------------------------------------------------------------------------


def raw_file(source_dir: Path, spec: dict, relative: str) -> Path:
    """The raw file `relative` (inside the dataset folder), from a repository checkout or the folder itself."""
    for base in (source_dir / spec["folder"], source_dir):
        if (base / relative).is_file():
            return base / relative
    raise ConvertError(
        f"missing raw file {source_dir / spec['folder'] / relative}: export {spec['folder']}/{relative} from "
        f"github.com/{spec['repo']} (commit {spec['commit'][:12]}) into {source_dir}, keeping its path"
    )


def read_jsonl(path: Path):
    """Yield (line number, object) for each non-blank line."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConvertError(f"{path}, line {number}: not valid JSON ({exc.msg})") from None


def shorten(name: str, limit: int = 64) -> str:
    """`name` cut to `limit` characters, at the last "_" when that keeps at least half of it."""
    if len(name) <= limit:
        return name
    cut = name[: limit + 1].rfind("_")
    return (name[:cut] if cut >= limit // 2 else name[:limit]).rstrip("_")


def unique_name(base: str, taken: set[str]) -> str:
    """`base` shortened to 64 characters, with __2, __3, ... when already taken; the result is added to taken."""
    base = shorten(base) or "tool"
    name, copy = base, 1
    while name in taken:
        copy += 1
        suffix = f"__{copy}"
        name = shorten(base, 64 - len(suffix)) + suffix
    taken.add(name)
    return name


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def object_schema(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required}


# --- ToolLens -----------------------------------------------------------------------------------------

TOOLLENS_FIELDS = ("category_name:", ", tool_name:", ", api_name:", ", api_description:")
TOOLLENS_TYPES = {
    "STRING": "string",
    "NUMBER": "number",
    "INTEGER": "integer",
    "INT": "integer",
    "FLOAT": "number",
    "BOOLEAN": "boolean",
    "BOOL": "boolean",
    "OBJECT": "object",
    "ARRAY": "array",
    "LIST": "array",
}


def parse_toollens_text(text: str) -> dict:
    """Split a corpus.jsonl text into its fields; raise ValueError when it does not have the expected shape."""
    values, position = [], 0
    for index, field in enumerate(TOOLLENS_FIELDS):
        start = text.find(field, position)
        if start < 0 or (index == 0 and start != 0):
            raise ValueError(f"no {field.strip(', ')!r} field")
        if index:
            values.append(text[position:start])
        position = start + len(field)
    decoder = json.JSONDecoder()
    marker = ", required_params: "
    start = text.find(marker, position)
    while start >= 0:  # the description may contain the marker itself: take the first split that parses
        try:
            required, at = decoder.raw_decode(text, start + len(marker))
            if not text.startswith(", optional_params: ", at):
                raise ValueError("no optional_params")
            optional, at = decoder.raw_decode(text, at + len(", optional_params: "))
            if not text.startswith(", return_schema: ", at):
                raise ValueError("no return_schema")
            returns, at = decoder.raw_decode(text, at + len(", return_schema: "))
            if text[at:].strip():
                raise ValueError("text after return_schema")
        except ValueError:
            start = text.find(marker, start + 1)
            continue
        if not isinstance(required, list) or not isinstance(optional, list):
            raise ValueError("required_params and optional_params must be JSON lists")
        category, tool, api = values
        return {
            "category": category.strip(),
            "tool_name": tool.strip(),
            "api_name": api.strip(),
            "description": text[position:start].strip(),
            "required": required,
            "optional": optional,
            "returns": returns,
        }
    raise ValueError("no parsable required_params / optional_params / return_schema")


def toollens_parameter(param: dict) -> dict:
    source_type = str(param.get("type", "")).strip()
    upper = source_type.upper()
    schema = {"type": TOOLLENS_TYPES.get(upper, "string")}
    if upper not in TOOLLENS_TYPES:
        schema["x-original-type"] = source_type
        if upper.startswith("DATE"):
            schema["format"] = "date"
    for key, value in param.items():
        if key not in ("name", "type"):
            schema[key] = value
    return schema


def toollens_base(tool: str, api: str) -> str:
    """ "tool__api", each part shortened at word boundaries when the whole is over 64 characters."""
    if not tool or not api:
        return tool or api
    if len(tool) + 2 + len(api) > 64:
        tool = shorten(tool, max(24, 62 - len(api)))
        api = shorten(api, 62 - len(tool))
    return f"{tool}__{api}"


def toollens_catalog(corpus: Path) -> tuple[list[dict], dict[str, str], list[str]]:
    """(tools, corpus _id -> tool name, notes)."""
    tools, by_id, taken, notes, shortened = [], {}, set(), [], 0
    for number, row in read_jsonl(corpus):
        corpus_id, text = str(row.get("_id", "")), row.get("text")
        if not corpus_id or not isinstance(text, str):
            raise ConvertError(f"{corpus}, line {number}: a corpus line needs '_id' and 'text'")
        if corpus_id in by_id:
            raise ConvertError(f"{corpus}, line {number}: corpus _id {corpus_id} appears twice")
        try:
            parsed = parse_toollens_text(text)
        except ValueError as exc:
            raise ConvertError(f"{corpus}, line {number} (_id {corpus_id}): {exc}") from None
        properties, required = {}, []
        for group, is_required in ((parsed["required"], True), (parsed["optional"], False)):
            for param in group:
                if not isinstance(param, dict) or not isinstance(param.get("name"), str):
                    raise ConvertError(f"{corpus}, line {number}: a parameter without a name")
                if param["name"] in properties:
                    notes.append(f"_id {corpus_id}: parameter {param['name']!r} listed twice, first kept")
                    continue
                properties[param["name"]] = toollens_parameter(param)
                if is_required:
                    required.append(param["name"])
        tool_slug, api_slug = slug(parsed["tool_name"]), slug(parsed["api_name"])
        base = toollens_base(tool_slug, api_slug)
        name = unique_name(base or f"api_{corpus_id}", taken)
        if name != base:
            notes.append(f"_id {corpus_id}: named {name!r}, {base!r} being taken")
        if len(tool_slug) + len(api_slug) + 2 > 64:
            shortened += 1
        if not parsed["description"]:
            notes.append(f"_id {corpus_id} ({name}): empty description")
        by_id[corpus_id] = name
        tools.append(
            {
                "name": name,
                "description": parsed["description"],
                "parameters": object_schema(properties, required),
                "source": TOOLLENS["source"],
                "original_name": f"{parsed['tool_name']}::{parsed['api_name']}",
                "category": parsed["category"],
                "tool_name": parsed["tool_name"],
                "original_id": corpus_id,
            }
        )
    if shortened:
        notes.append(f"{shortened} names over 64 characters shortened at word boundaries")
    return tools, by_id, notes


def read_qrels(path: Path) -> tuple[dict[str, list[str]], int]:
    """query-id -> corpus-ids with a positive score, in file order; and the number of duplicate rows dropped."""
    relevant: dict[str, list[str]] = {}
    duplicates = 0
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            cells = line.rstrip("\n").split("\t")
            if number == 1 and cells[0] == "query-id":
                continue
            if not line.strip():
                continue
            if len(cells) != 3:
                raise ConvertError(f"{path}, line {number}: expected query-id, corpus-id, score separated by tabs")
            query_id, corpus_id, score = cells
            try:
                if float(score) <= 0:
                    continue
            except ValueError:
                raise ConvertError(f"{path}, line {number}: score {score!r} is not a number") from None
            tools = relevant.setdefault(query_id, [])
            if corpus_id in tools:
                duplicates += 1
            else:
                tools.append(corpus_id)
    return relevant, duplicates


def convert_toollens(source_dir: Path, split: str = "train") -> tuple[list[dict], list[dict], list[str]]:
    if split != "train":
        raise ConvertError("ToolLens has only a train split here (its tune files are its test files)")
    corpus = raw_file(source_dir, TOOLLENS, "corpus.jsonl")
    qrels_path = raw_file(source_dir, TOOLLENS, "qrels/train.tsv")
    queries_path = raw_file(source_dir, TOOLLENS, "queries.jsonl")
    tools, by_id, notes = toollens_catalog(corpus)
    relevant, duplicates = read_qrels(qrels_path)
    if duplicates:
        notes.append(f"qrels/train.tsv: {duplicates} duplicate (query, tool) rows dropped")
    unknown = sorted({c for ids in relevant.values() for c in ids if c not in by_id}, key=str)
    if unknown:
        raise ConvertError(f"{qrels_path}: corpus ids not in corpus.jsonl: {', '.join(unknown[:10])}")
    texts: dict[str, str] = {}
    for number, row in read_jsonl(queries_path):
        query_id = str(row.get("_id", ""))
        if query_id not in relevant:
            continue  # a query of another split: skipped unused
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ConvertError(f"{queries_path}, line {number}: query {query_id} has no text")
        if query_id in texts:
            raise ConvertError(f"{queries_path}, line {number}: query _id {query_id} appears twice")
        texts[query_id] = text.strip()
    missing = [q for q in relevant if q not in texts]
    if missing:
        raise ConvertError(f"{queries_path}: train queries with no text: {', '.join(missing[:10])}")
    queries = [
        {
            "id": f"toollens_train_{query_id}",
            "query": texts[query_id],
            "expected_tools": [by_id[c] for c in corpus_ids],
            "source": TOOLLENS["source"],
            "subset": "train",
        }
        for query_id, corpus_ids in relevant.items()
    ]
    return tools, queries, notes


# --- Seal-Tools ---------------------------------------------------------------------------------------

SEAL_TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "array": "array",
    "dict": "object",
    "object": "object",
}


def seal_parameter(param) -> dict:
    """A Seal-Tools parameter as a JSON Schema: its type mapped, nested properties/items likewise, the rest kept."""
    if not isinstance(param, dict):
        return {"description": str(param)}
    schema = {}
    for key, value in param.items():
        if key == "type" and isinstance(value, str):
            mapped = SEAL_TYPES.get(value.strip().lower())
            schema["type"] = mapped or "string"
            if mapped is None:
                schema["x-original-type"] = value
        elif key == "properties" and isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
            schema[key] = {k: seal_parameter(v) for k, v in value.items()}
        elif key == "items" and isinstance(value, dict):
            schema[key] = seal_parameter(value)
        else:
            schema[key] = value
    return schema


def sealtools_catalog(path: Path) -> tuple[list[dict], dict[str, str], list[str]]:
    """(tools, api_name -> tool name, notes)."""
    tools, by_api, taken, notes = [], {}, set(), []
    rows = list(read_jsonl(path))
    valid = {row.get("api_name") for _, row in rows if NAME_PATTERN.fullmatch(str(row.get("api_name", "")))}
    taken.update(valid)  # valid source names keep their name; renamed ones must not take one of them
    for number, row in rows:
        api, description = row.get("api_name"), row.get("api_description")
        if not isinstance(api, str) or not api.strip():
            raise ConvertError(f"{path}, line {number}: a tool without 'api_name'")
        if api in by_api:
            raise ConvertError(f"{path}, line {number}: api_name {api!r} appears twice")
        if api in valid:
            name = api
        else:
            name = unique_name(re.sub(r"[^A-Za-z0-9_-]+", "_", api.strip()).strip("_"), taken)
            notes.append(f"{api!r} renamed {name!r}")
        if not isinstance(description, str):
            description = ""
        if not description.strip():
            notes.append(f"{name}: empty description")
        parameters = row.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise ConvertError(f"{path}, line {number}: 'parameters' of {api!r} is not an object")
        required = row.get("required") or []
        stray = [r for r in required if r not in parameters]
        if stray:
            notes.append(f"{name}: required {stray} not among its parameters")
        by_api[api] = name
        tools.append(
            {
                "name": name,
                "description": description.strip(),
                "parameters": object_schema({k: seal_parameter(v) for k, v in parameters.items()}, list(required)),
                "source": SEALTOOLS["source"],
                "original_name": api,
                "category": row.get("field", ""),
            }
        )
    return tools, by_api, notes


def convert_sealtools(source_dir: Path, split: str = "train") -> tuple[list[dict], list[dict], list[str]]:
    if split not in SEALTOOLS["splits"]:
        raise ConvertError(f"Seal-Tools split must be one of {', '.join(SEALTOOLS['splits'])}, not {split!r}")
    tool_path = raw_file(source_dir, SEALTOOLS, "tool.jsonl")
    split_path = raw_file(source_dir, SEALTOOLS, f"{split}.jsonl")
    tools, by_api, notes = sealtools_catalog(tool_path)
    queries, seen = [], set()
    for number, row in read_jsonl(split_path):
        query_id, text, calling = row.get("id"), row.get("query"), row.get("calling")
        if not isinstance(query_id, str) or not isinstance(text, str) or not isinstance(calling, list):
            raise ConvertError(f"{split_path}, line {number}: a query needs 'id', 'query' and a 'calling' list")
        if query_id in seen:
            raise ConvertError(f"{split_path}, line {number}: id {query_id!r} appears twice")
        seen.add(query_id)
        expected = []
        for call in calling:
            api = call.get("api") if isinstance(call, dict) else None
            if api not in by_api:
                raise ConvertError(f"{split_path}, line {number}: {query_id} calls {api!r}, not in tool.jsonl")
            if by_api[api] not in expected:
                expected.append(by_api[api])
        if not expected:
            raise ConvertError(f"{split_path}, line {number}: {query_id} calls no tool")
        level = query_id.split("-")[1] if query_id.count("-") >= 2 else ""
        queries.append(
            {
                "id": f"sealtools_{query_id}",
                "query": text.strip(),
                "expected_tools": expected,
                "source": SEALTOOLS["source"],
                "subset": split,
                "level": level,
            }
        )
    return tools, queries, notes


# --- output -------------------------------------------------------------------------------------------

CONVERTERS = {"toollens": convert_toollens, "sealtools": convert_sealtools}


def write_catalog(path: Path, tools: list[dict]) -> None:
    lines = ",\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    path.write_text(f"[\n{lines}\n]\n" if tools else "[]\n", encoding="utf-8")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def sample(queries: list[dict], size: int, seed: int) -> list[dict]:
    """`size` queries drawn with random.Random(seed), in their file order (all of them when fewer)."""
    if size >= len(queries):
        return list(queries)
    picked = sorted(random.Random(seed).sample(range(len(queries)), size))
    return [queries[i] for i in picked]


def summary(tools: list[dict], queries: list[dict]) -> dict:
    per_query = Counter(len(q["expected_tools"]) for q in queries)
    words = [len(q["query"].split()) for q in queries]
    used = {name for q in queries for name in q["expected_tools"]}
    return {
        "tools": len(tools),
        "queries": len(queries),
        "tools_used_by_queries": len(used),
        "tools_per_query": {str(k): per_query[k] for k in sorted(per_query)},
        "mean_query_words": round(sum(words) / len(words), 2) if words else 0.0,
        "empty_descriptions": sum(1 for t in tools if not t["description"]),
    }


def run(benchmark: str, source_dir, out_dir, *, split: str = "train", sample_size=None, seed: int = 0) -> dict:
    """Convert, write the files, and return the summary (with the notes and the paths written)."""
    source_dir, out_dir = Path(source_dir), Path(out_dir)
    if not source_dir.is_dir():
        raise ConvertError(f"SOURCE_DIR {source_dir} is not a directory")
    tools, queries, notes = CONVERTERS[benchmark](source_dir, split)
    names = [t["name"] for t in tools]
    bad = [n for n in names if not NAME_PATTERN.fullmatch(n)]
    if bad or len(set(names)) != len(names):
        raise ConvertError(f"internal error: invalid or repeated tool names {bad[:5]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "catalog.json", out_dir / f"{split}.jsonl"]
    write_catalog(written[0], tools)
    write_jsonl(written[1], queries)
    if sample_size is not None:
        written.append(out_dir / f"{split}_sample.jsonl")
        write_jsonl(written[2], sample(queries, sample_size, seed))
    return {**summary(tools, queries), "notes": notes, "written": [str(p) for p in written]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", choices=sorted(CONVERTERS))
    parser.add_argument("source_dir", type=Path, help="checkout or export of the benchmark's repository")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--split", default="train", choices=("train", "dev"), help="train (default) or dev")
    parser.add_argument("--sample", type=int, default=None, metavar="N", help="also write N random queries")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    try:
        result = run(
            args.benchmark, args.source_dir, args.out_dir, split=args.split, sample_size=args.sample, seed=args.seed
        )
    except ConvertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    notes = result.pop("notes")
    print(json.dumps(result, indent=1))
    for note in notes[:50]:
        print(f"note: {note}", file=sys.stderr)
    if len(notes) > 50:
        print(f"note: ... and {len(notes) - 50} more", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
