"""What the index reads of a tool: every field of its schema (nested ones, descriptions, enum values), its title."""

from catalog.search.index import (
    DENSE_ENUM_VALUES,
    LEXICAL_ENUM_VALUES,
    MAX_PARAMETER_PHRASES,
    ToolDocument,
    ToolSearchIndex,
    dense_text,
    full_text,
    lexical_tokens,
)

BOX = {
    "type": "object",
    "properties": {
        "bbox": {
            "type": "object",
            "description": "The area to search.",
            "properties": {
                "min_lon": {"type": "number", "description": "Bottom left longitude."},
                "max_lat": {"type": "number", "description": "Top right latitude."},
            },
        },
        "kinds": {"type": "array", "items": {"type": "string", "enum": ["cafe", "museum", "park"]}},
        "stops": {
            "type": "array",
            "items": {"type": "object", "properties": {"iata": {"type": "string", "description": "IATA airport code"}}},
        },
    },
}


def test_nested_fields_descriptions_and_enum_values_are_read():
    document = ToolDocument.of("places_in_box", "Places inside a rectangle.", BOX)
    assert document.parameter_names == ("bbox", "kinds", "stops")
    fields = {field: (said, values) for field, said, values in document.parameters}
    assert fields["min lon"] == ("Bottom left longitude.", ())
    assert fields["kinds"] == ("", ("cafe", "museum", "park"))
    assert fields["iata"] == ("IATA airport code", ())
    text = dense_text(document)
    assert "min lon (Bottom left longitude)" in text and "kinds one of cafe, museum, park" in text
    assert {"longitude", "latitude", "museum", "iata", "airport"} <= set(lexical_tokens(document))


def test_a_request_naming_a_parameters_description_finds_its_tool():
    documents = [
        ToolDocument.of("places_in_box", "Places inside a rectangle.", BOX),
        ToolDocument.of("places_near", "Places near a point.", {"type": "object", "properties": {"radius": {}}}),
        ToolDocument.of("flight_status", "Status of a flight.", {"type": "object", "properties": {"flight": {}}}),
    ]
    index = ToolSearchIndex(documents)
    assert index.search("what is at bottom left longitude 2.1", allowed=None).names[0] == "places_in_box"
    assert index.search("museum listings", allowed=None).names == ["places_in_box"]


def test_the_mcp_title_or_annotation_title_is_read():
    titled = ToolDocument.of("q1", "Runs a query.", {}, title="Database Query")
    annotated = ToolDocument.of("q2", "Runs a query.", {}, annotations={"title": "Ledger Lookup", "readOnlyHint": True})
    assert "(Database Query)" in dense_text(titled) and "Ledger Lookup" in full_text(annotated)


def test_malformed_and_huge_schemas_index_without_error():
    huge = {"type": "object", "properties": {"code": {"type": "string", "enum": [f"C{n}" for n in range(500)]}}}
    wide = {"type": "object", "properties": {f"p{n}": {"type": "string"} for n in range(500)}}
    deep: dict = {"type": "object", "properties": {}}
    node = deep
    for _ in range(50):
        node["properties"]["next"] = {"type": "object", "properties": {}}
        node = node["properties"]["next"]
    documents = [
        ToolDocument.of("enum_500", "", huge),
        ToolDocument.of("wide", "Many fields.", wide),
        ToolDocument.of("deep", "Deep.", deep),
        ToolDocument.of("bad", "Bad schema.", {"properties": ["not", "a", "dict"], "items": 3, "anyOf": "x"}),
        ToolDocument.of("none", "No schema.", None),
        ToolDocument.of("odd", "Odd fields.", {"properties": {"a": 3, "b": {"enum": "x"}, "c": {"items": [1]}}}),
    ]
    assert dense_text(documents[0]).count(", C") == DENSE_ENUM_VALUES - 1  # the embedded text keeps a few values
    tokens = lexical_tokens(documents[0])  # BM25 reads the first LEXICAL_ENUM_VALUES
    assert f"c{LEXICAL_ENUM_VALUES - 1}" in tokens and f"c{LEXICAL_ENUM_VALUES}" not in tokens
    assert len(documents[1].parameters) == MAX_PARAMETER_PHRASES
    assert len(documents[2].parameters) < 10
    assert documents[3].parameters == () and documents[4].parameters == ()
    index = ToolSearchIndex(documents)
    assert index.search("code C199", allowed=None).names[0] == "enum_500"
