"""fusion_study: how to fuse the dense and the lexical ranking, measured on training and development data.

For each data set (a catalog and a queries file) and each embedding model it scores every
query against every tool once (cosine, toolhub's BM25) and then ranks with each fusion:
the dense cosine plus w x BM25 / the query's peak BM25 for a grid of w, both rankings
standardised over the catalog (z-scores) and summed with BM25's weighted by w, reciprocal-rank
fusion (k=60), and either ranking alone; with two models, their cosines summed (the second
weighted by a) plus w x BM25 / peak; with --by-feature, the linear fusion per quartile of
a query feature (its words, its BM25 peak gap, its top cosine); with --self-retrieval, the weight each of
bench.self_retrieval's pseudo-query generators would choose from the catalog alone, beside the one the real queries
want, and the catalog's statistics; with --choose-from N,..., how a weight chosen on N of the set's labelled
queries (a catalog's approved examples, say) does on the others. It prints recall@5, NDCG@10 and completeness@10
per set, model and fusion, and writes them as JSON (--out). Vectors come from the machine's
vector file when TOOLHUB_VECTOR_CACHE is set, so a second run costs seconds.

It tunes nothing itself: catalog.search.index records the choice made from its output.
Feed it training and development splits only.
"""

import json
import random
import time
from pathlib import Path

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from bench import self_retrieval
from bench.evaluation import BenchFileError, load_catalog, load_queries, ndcg_at_k, tool_documents
from catalog.search import embeddings
from catalog.search.index import BM25_WEIGHT, ToolSearchIndex, dense_text

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5)
# z-score fusion: each ranking standardised over the catalog per query, BM25's weighted by w.
Z_WEIGHTS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
RRF_K = 60
# Reciprocal-rank fusion's k, per catalog: does another k than 60 suit a set?
RRF_KS = (5, 20, RRF_K, 200)
# Two models' cosines summed: the second model's weight a (the first's is 1).
ENSEMBLE_WEIGHTS = (0.5, 1.0, 1.5)
DEPTH = 10
# --choose-from: random draws of the labelled queries per size, and by how much (recall@5 on the labelled
# queries) a weight must beat the shipped one to replace it.
CHOICE_ROUNDS = 300
CHOICE_MARGINS = (0.0, 0.03)


class Command(BaseCommand):
    requires_system_checks = []
    help = "Compare fusions of dense and BM25 ranking on catalogs and queries; writes JSON."

    def add_arguments(self, parser):
        parser.add_argument(
            "--set",
            nargs=3,
            action="append",
            metavar=("NAME", "CATALOG", "QUERIES"),
            required=True,
            help="A data set: its name, catalog JSON (.gz read too) and queries JSONL. Repeatable.",
        )
        parser.add_argument("--models", default=",".join(embeddings.MODEL_NAMES), help="Comma-separated models.")
        parser.add_argument("--sample", type=int, default=0, help="A seeded sample of N queries per set (0: all).")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--out", help="Write the figures here as JSON.")
        parser.add_argument(
            "--by-feature",
            action="store_true",
            help="Also score the linear fusion per quartile of a query feature (words, BM25 peak gap, top cosine): "
            "does any feature of a query tell which weight it wants?",
        )
        parser.add_argument(
            "--choose-from",
            default="",
            help="Comma-separated sizes N: choose the weight on N random labelled queries of the set (ties keep the "
            "shipped weight), score it on the others; repeated CHOICE_ROUNDS times.",
        )
        parser.add_argument(
            "--self-retrieval",
            action="store_true",
            help="Also choose the weight from the catalog alone (pseudo-queries made from its tools, "
            "bench/self_retrieval.py) and print it beside the weight the real queries want.",
        )

    def handle(self, *args, **options):
        models = [m.strip() for m in options["models"].split(",") if m.strip()]
        unknown = [m for m in models if m not in embeddings.MODEL_NAMES]
        if unknown:
            raise CommandError(f"unknown model(s): {', '.join(unknown)}")
        report = {
            "weights": WEIGHTS,
            "z_weights": Z_WEIGHTS,
            "rrf_ks": RRF_KS,
            "sample": options["sample"],
            "seed": options["seed"],
            "sets": {},
        }
        for name, catalog_path, queries_path in options["set"]:
            try:
                tools = load_catalog(catalog_path)
                queries = load_queries(queries_path, known_tools={t["name"] for t in tools})
            except BenchFileError as exc:
                raise CommandError(str(exc)) from None
            if options["sample"] and len(queries) > options["sample"]:
                queries = random.Random(options["seed"]).sample(queries, options["sample"])
            documents = tool_documents(tools)
            lexical_index = ToolSearchIndex(documents)
            lexical = np.vstack([lexical_index.scores(q.query)[0] for q in queries]).astype(np.float32)
            expected = [set(q.expected_tools) for q in queries]
            figures = {"n_tools": len(documents), "n_queries": len(queries), "models": {}}
            model_cosines = {}
            for model in models:
                started = time.perf_counter()
                tool_vectors = embeddings.embed_texts([dense_text(d) for d in documents], model=model)
                query_vectors = embeddings.embed_texts([q.query for q in queries], model=model)
                cosines = query_vectors @ tool_vectors.T
                model_cosines[model] = cosines
                seconds = time.perf_counter() - started
                fusions = self.fusions(cosines, lexical)
                figures["models"][model] = {
                    "embed_s": round(seconds, 1),
                    "fusions": {label: score(s, lexical_index.names, expected) for label, s in fusions},
                }
                self.print_rows(name, model, figures["models"][model]["fusions"])
                if options["choose_from"]:
                    sizes = [int(n) for n in options["choose_from"].split(",") if n.strip()]
                    figures["models"][model]["chosen_from_labelled"] = chosen_from = {
                        f"margin {margin}": weight_from_labelled(
                            cosines, lexical, lexical_index.names, expected, sizes=sizes, seed=options["seed"],
                            margin=margin,
                        )
                        for margin in CHOICE_MARGINS
                    }  # fmt: skip
                    for margin, by_size in chosen_from.items():
                        for size, result in by_size.items():
                            self.stdout.write(f"{name:<12} {model:<22} chosen on {size} labelled, {margin}: {result}")
                if options["self_retrieval"]:
                    figures["models"][model]["self_retrieval"] = chosen = self.self_retrieval(
                        documents, lexical_index, tool_vectors, model, options["seed"]
                    )
                    figures["models"][model]["catalog"] = self_retrieval.catalog_statistics(documents, tool_vectors)
                    self.print_self_retrieval(name, model, chosen, figures["models"][model])
                if options["by_feature"]:
                    features = query_features([q.query for q in queries], cosines, lexical)
                    figures["models"][model]["by_feature"] = by_feature = self.by_feature(
                        features, cosines, lexical, lexical_index.names, expected
                    )
                    for line in feature_lines(name, model, by_feature):
                        self.stdout.write(line)
            if len(model_cosines) == 2:
                (first, first_cosines), (second, second_cosines) = model_cosines.items()
                label = f"{first}+{second}"
                figures["models"][label] = {
                    "fusions": {
                        name_: score(s, lexical_index.names, expected)
                        for name_, s in self.ensembles(first_cosines, second_cosines, lexical)
                    }
                }
                self.print_rows(name, label, figures["models"][label]["fusions"])
            report["sets"][name] = figures
        if options["out"]:
            Path(options["out"]).write_text(json.dumps(report, indent=1) + "\n")
            self.stdout.write(f"wrote {options['out']}")

    def fusions(self, cosines: np.ndarray, lexical: np.ndarray):
        peak = lexical.max(axis=1, keepdims=True)
        normalised = np.divide(lexical, peak, out=np.zeros_like(lexical), where=peak > 0)
        for weight in WEIGHTS:
            yield f"linear w={weight}", cosines + weight * normalised
        dense_z, lexical_z = standardised(cosines), standardised(lexical)
        for weight in Z_WEIGHTS:
            yield f"z w={weight}", dense_z + weight * lexical_z
        yield "bm25 only", lexical
        for k in RRF_KS:
            yield f"rrf k={k}", reciprocal_rank_fusion(cosines, lexical, k=k)

    def self_retrieval(self, documents, lexical_index, tool_vectors, model: str, seed: int) -> dict:
        """{generator: self_retrieval's figures} over the WEIGHTS grid (w=0 included: dense alone may win)."""
        return {
            generator: self_retrieval.self_retrieval(
                documents,
                lexical_index=lexical_index,
                tool_vectors=tool_vectors,
                embed=lambda texts: embeddings.embed_texts(texts, model=model),
                generator=generator,
                weights=WEIGHTS,
                seed=seed,
            )
            for generator in self_retrieval.GENERATORS
        }

    def print_self_retrieval(self, name: str, model: str, chosen: dict, figures: dict):
        linear = {label: values for label, values in figures["fusions"].items() if label.startswith("linear w=")}
        wanted = max(linear, key=lambda label: linear[label]["recall@5"]).removeprefix("linear w=")
        self.stdout.write(f"{name:<12} {model:<22} real queries want w={wanted}; catalog {figures['catalog']}")
        for generator, result in chosen.items():
            figures_ = " ".join(f"{w}:{v['recall@5']:.3f}" for w, v in result["by_weight"].items())
            self.stdout.write(
                f"{name:<12} {model:<22} self-retrieval {generator} ({result['queries']}) chooses "
                f"w={result['chosen']}  {figures_}"
            )

    def ensembles(self, first: np.ndarray, second: np.ndarray, lexical: np.ndarray):
        """Both models' cosines summed (the second weighted by a), plus w x BM25 / the query's peak."""
        peak = lexical.max(axis=1, keepdims=True)
        normalised = np.divide(lexical, peak, out=np.zeros_like(lexical), where=peak > 0)
        for second_weight in ENSEMBLE_WEIGHTS:
            for weight in (0.0, 0.1, 0.2, 0.3):
                yield f"a={second_weight} w={weight}", first + second_weight * second + weight * normalised

    def by_feature(self, features: dict, cosines, lexical, names, expected) -> dict:
        """{feature: [{"range": [low, high], "queries": n, "recall@5": {w: figure}}] per quartile of the feature}."""
        peak = lexical.max(axis=1, keepdims=True)
        normalised = np.divide(lexical, peak, out=np.zeros_like(lexical), where=peak > 0)
        report = {}
        for feature, values in features.items():
            edges = np.quantile(values, [0, 0.25, 0.5, 0.75, 1.0])
            quarters = []
            for low, high in zip(edges[:-1], edges[1:], strict=True):
                rows = np.flatnonzero((values >= low) & (values <= high))
                wanted = [expected[i] for i in rows]
                recall = {
                    str(w): score((cosines + w * normalised)[rows], names, wanted)["recall@5"] for w in WEIGHTS[1:]
                }
                quarters.append({"range": [round(float(low), 3), round(float(high), 3)], "queries": int(rows.size),
                                 "recall@5": recall})  # fmt: skip
            report[feature] = quarters
        return report

    def print_rows(self, name: str, model: str, fusions: dict):
        for label, values in fusions.items():
            self.stdout.write(
                f"{name:<12} {model:<22} {label:<14} recall@5 {values['recall@5']:.3f}  ndcg@10 {values['ndcg@10']:.3f}"
                f"  completeness@10 {values['completeness@10']:.3f}"
            )


def query_features(texts: list[str], cosines: np.ndarray, lexical: np.ndarray) -> dict[str, np.ndarray]:
    """Per query: its words, how far its best BM25 score stands above its fifth (relative), its best cosine."""
    ordered = np.sort(lexical, axis=1)
    top, fifth = ordered[:, -1], ordered[:, -min(5, ordered.shape[1])]
    return {
        "words": np.array([len(text.split()) for text in texts], dtype=np.float32),
        "bm25_gap": np.divide(top - fifth, top, out=np.zeros_like(top), where=top > 0),
        "top_cosine": cosines.max(axis=1),
    }


def feature_lines(name: str, model: str, by_feature: dict) -> list[str]:
    lines = []
    for feature, quarters in by_feature.items():
        for quarter in quarters:
            best = max(quarter["recall@5"], key=quarter["recall@5"].get)
            figures = " ".join(f"{w}:{r:.3f}" for w, r in quarter["recall@5"].items())
            low, high = quarter["range"]
            lines.append(f"{name:<12} {model:<22} {feature} {low:g}-{high:g} ({quarter['queries']}) best w={best}  "
                         f"{figures}")  # fmt: skip
    return lines


def standardised(scores: np.ndarray) -> np.ndarray:
    """Each row's scores as z-scores over the catalog (mean 0, standard deviation 1; a flat row stays 0)."""
    spread = scores.std(axis=1, keepdims=True)
    centred = scores - scores.mean(axis=1, keepdims=True)
    return np.divide(centred, spread, out=np.zeros_like(centred), where=spread > 0)


def reciprocal_rank_fusion(*score_matrices: np.ndarray, k: int = RRF_K) -> np.ndarray:
    """Sum over the rankings of 1 / (k + rank), rank 1 the best; per row (query)."""
    fused = np.zeros(score_matrices[0].shape, dtype=np.float64)
    for scores in score_matrices:
        ranks = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1) + 1
        fused += 1.0 / (k + ranks)
    return fused


def weight_from_labelled(cosines, lexical, names, expected, *, sizes, seed: int = 0, margin: float = 0.0) -> dict:
    """{N: recall@5 on the other queries of the weight that is best on N random labelled ones (it replaces the
    shipped BM25_WEIGHT only when better there by more than `margin`): its mean, its gain over BM25_WEIGHT (mean,
    10th percentile), how often each w was chosen}."""
    peak = lexical.max(axis=1, keepdims=True)
    normalised = np.divide(lexical, peak, out=np.zeros_like(lexical), where=peak > 0)
    position = {name: i for i, name in enumerate(names)}
    recall = np.zeros((len(WEIGHTS), len(expected)))  # per weight and query
    for row, weight in enumerate(WEIGHTS):
        top = np.argsort(-(cosines + weight * normalised), axis=1, kind="stable")[:, :5]
        for query, wanted in enumerate(expected):
            recall[row, query] = len({position[n] for n in wanted} & set(top[query].tolist())) / len(wanted)
    default = WEIGHTS.index(BM25_WEIGHT)
    rng = np.random.default_rng(seed)
    report = {}
    for size in sizes:
        if not 0 < size < len(expected):
            continue
        gains, recalls, wins = [], [], dict.fromkeys(WEIGHTS, 0)
        for _ in range(CHOICE_ROUNDS):
            order = rng.permutation(len(expected))
            labelled, others = order[:size], order[size:]
            on_labelled = recall[:, labelled].mean(axis=1)
            best = default if on_labelled[default] + margin >= on_labelled.max() else int(np.argmax(on_labelled))
            wins[WEIGHTS[best]] += 1
            recalls.append(recall[best, others].mean())
            gains.append(recall[best, others].mean() - recall[default, others].mean())
        report[size] = {
            "recall@5": round(float(np.mean(recalls)), 4),
            "gain": round(float(np.mean(gains)), 4),
            "gain_p10": round(float(np.percentile(gains, 10)), 4),
            "chosen": {str(w): n for w, n in wins.items() if n},
        }
    return report


def score(scores: np.ndarray, names: list[str], expected: list[set[str]]) -> dict:
    """recall@5, NDCG@10 and completeness@10 of the rows' top tools."""
    top = np.argpartition(-scores, DEPTH - 1, axis=1)[:, :DEPTH] if scores.shape[1] > DEPTH else None
    recall = ndcg = complete = 0.0
    for row, wanted in enumerate(expected):
        candidates = top[row] if top is not None else np.arange(scores.shape[1])
        order = candidates[np.argsort(-scores[row, candidates], kind="stable")][:DEPTH]
        ranked = [names[i] for i in order]
        recall += sum(n in ranked[:5] for n in wanted) / len(wanted)
        ndcg += ndcg_at_k(ranked, wanted, DEPTH)
        complete += all(n in ranked for n in wanted)
    count = max(1, len(expected))
    return {
        "recall@5": round(recall / count, 4),
        "ndcg@10": round(ndcg / count, 4),
        "completeness@10": round(complete / count, 4),
    }
