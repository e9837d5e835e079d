"""What the prototypes of a trained SwAMP-family model learned (SwAMP paper, cluster figures).

Every item of both modalities of a split goes to its most probable prototype,
argmax_y p(y|x) (paper Eq. 3); the report gives, per modality, how balanced the clusters
are, how often the two halves of a pair land in the same cluster, the class purity when
the data has hidden labels, and for captions the words a cluster's captions share
(the paper's "0818: kite/flying"). Written as ``clusters.md``, a self-contained
``clusters.html`` and ``clusters.json`` (raw numbers, including every assignment).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import numpy as np
import torch

from harness.analysis.restore import method_config, restore_run, run_files, train_settings
from harness.config.registry import METHODS
from harness.config.spec import MODALITIES
from harness.data.paired import PairedData, Split
from harness.data.text import SPECIALS, TokenCaptions
from harness.errors import ConfigError
from harness.method import Method
from harness.run.evaluate import encode_split
from harness.store.io import write_json_atomic
from harness.store.schema import read_result

LARGEST_SHOWN = 30  # rows of the "largest clusters" table
STOP_WORDS = frozenset("""
a an the and or but nor so yet of on in at to for with without by from into onto off out up down over under
above below near next beside behind between through about across along around against among while as than
is are was were be been being am has have had having do does did doing will would can could may might shall
should must this that these those there here it its it's he him his she her hers they them their theirs we us
our you your i me my what which who whom whose when where why how all any both each few more most other some
such no not only own same too very just also then once again further s 's t n't
""".split())


def has_prototypes(cls: type) -> bool:
    """Whether a method class scores embeddings against prototypes (``logits`` or ``log_probs``)."""
    return callable(getattr(cls, "logits", None)) or callable(getattr(cls, "log_probs", None))


def require_prototypes(result: dict[str, Any], where: str) -> None:
    """Stop unless the result's method has prototypes, naming the registered methods that do."""
    kind = method_config(result, where)["method"].get("method", "?")
    if kind in METHODS.names() and has_prototypes(METHODS.get(kind)):
        return
    with_protos = [n for n in METHODS.names() if has_prototypes(METHODS.get(n))]
    raise ConfigError(f"{where}: method {result.get('method', kind)!r} ({kind}) has no prototypes to cluster by; "
                      f"methods with prototypes: {', '.join(with_protos)}")


# ---- assignments and their statistics (pure functions of tensors) ----------------------------------------------

@torch.no_grad()
def assign(method: Method, emb: torch.Tensor, batch_size: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) argmax prototype of each embedding and (N,) its probability p(y|x), both on the CPU."""
    # a SwAMP-style method's (B, D) -> (B, K) prototype scores: its logits, else its log-probabilities
    scores = cast(Callable[[torch.Tensor], torch.Tensor],
                  method.logits if callable(getattr(method, "logits", None)) else method.log_probs)
    best = [scores(chunk).float().softmax(1).max(1) for chunk in torch.split(emb, batch_size)]  # (B, K) -> (B,)
    return torch.cat([b.indices for b in best]).cpu(), torch.cat([b.values for b in best]).cpu()


def normalized_entropy(sizes: torch.Tensor) -> float:
    """Entropy of the cluster-size distribution over log K: 1 when all K clusters are equal, 0 when one holds all."""
    if len(sizes) < 2 or sizes.sum() == 0:
        return 1.0
    p = sizes.double() / sizes.sum()
    p = p[p > 0]
    return max(0.0, float(-(p * p.log()).sum() / math.log(len(sizes))))


def purity(clusters: torch.Tensor, labels: torch.Tensor, k: int) -> tuple[float, list[int | None], list[float | None]]:
    """Size-weighted mean purity (share of each cluster's majority class), and per cluster its majority class
    and purity (None for empty clusters); ties go to the smallest class."""
    classes, label_idx = torch.unique(labels, return_inverse=True)
    joint = torch.zeros(k, len(classes), dtype=torch.long).index_put_(
        (clusters, label_idx), torch.ones_like(clusters), accumulate=True)  # (K, C)
    top, majority = joint.max(1)
    sizes = joint.sum(1)
    share = [float(t / s) if s else None for t, s in zip(top, sizes)]
    cls = [int(classes[m]) if s else None for m, s in zip(majority, sizes)]
    return float(top.sum() / sizes.sum()), cls, share


def pair_agreement(clusters_a: torch.Tensor, clusters_b: torch.Tensor, b_to_a: torch.Tensor) -> float:
    """Share of pairs (a item b_to_a[j], b item j) whose two items share a cluster."""
    return float((clusters_a[b_to_a] == clusters_b).double().mean())


def balance(clusters: torch.Tensor, k: int) -> dict[str, Any]:
    """Cluster sizes (K,) and their summary: clusters used, largest, median of the used ones, entropy."""
    sizes = torch.bincount(clusters, minlength=k)
    used = sizes[sizes > 0]
    return {"used": len(used), "largest": int(sizes.max()), "median": float(np.median(used.numpy())),
            "entropy": normalized_entropy(sizes), "sizes": sizes.tolist()}


def content_words(words: Sequence[str]) -> torch.Tensor:
    """(V,) mask of the vocabulary entries worth listing: no special token, stop word or punctuation."""
    return torch.tensor([i >= len(SPECIALS) and w not in STOP_WORDS and any(c.isalnum() for c in w)
                         for i, w in enumerate(words)], dtype=torch.bool)


def top_words(captions: TokenCaptions, clusters: torch.Tensor, words: Sequence[str],
              n: int) -> dict[int, list[tuple[str, int]]]:
    """Per non-empty cluster, its ``n`` content words found in the most member captions (word, captions)."""
    v = len(words)
    ids = captions.tokens.long()
    caption = torch.repeat_interleave(torch.arange(len(captions)), captions.lengths)  # caption of each token
    keep = content_words(words)[ids]
    once = torch.unique(caption[keep] * v + ids[keep])  # each word once per caption
    keys, counts = torch.unique(clusters[once // v] * v + once % v, return_counts=True)
    order = np.lexsort((keys.numpy() % v, -counts.numpy(), keys.numpy() // v))  # cluster, count desc, id
    out: dict[int, list[tuple[str, int]]] = {int(c): [] for c in torch.unique(clusters)}
    for key, count in zip(keys.numpy()[order], counts.numpy()[order]):
        listed = out[int(key // v)]
        if len(listed) < n:
            listed.append((words[int(key % v)], int(count)))
    return out


def vocabulary(data: PairedData, captions: TokenCaptions) -> list[str]:
    """Id -> word: the vocabulary file the source names (scan_precomp); generated captions (synthetic_precomp)
    have no words, so their ids are shown as w<id>."""
    path = data.info.get("vocab_file")
    if path and Path(path).exists():
        listed: list[str] = json.loads(Path(path).read_text())["words"]
        return listed
    return [*SPECIALS, *(f"w{i}" for i in range(len(SPECIALS), captions.vocab_size))]


def members(clusters: torch.Tensor, confidence: torch.Tensor, cluster: int, n: int) -> list[int]:
    """Ids of the ``n`` members of ``cluster`` with the highest p(cluster|x)."""
    idx = (clusters == cluster).nonzero().squeeze(1)
    return idx[confidence[idx].argsort(descending=True, stable=True)[:n]].tolist()


# ---- the report --------------------------------------------------------------------------------------------------

def analyse(split: Split, clusters: dict[str, torch.Tensor], confidence: dict[str, torch.Tensor], k: int, *,
            words: Sequence[str] | None, n_words: int, n_members: int) -> dict[str, Any]:
    """The report's numbers from each modality's (N,) assignments and their probabilities."""
    stats = {}
    for m in MODALITIES:
        stats[m] = balance(clusters[m], k)
        labels = getattr(split, f"labels_{m}")
        if labels is not None:
            stats[m]["purity"], stats[m]["majority"], stats[m]["cluster_purity"] = purity(clusters[m], labels, k)
        stats[m]["assignments"] = clusters[m].tolist()
    text = [m for m in MODALITIES if isinstance(getattr(split, m), TokenCaptions)] if words else []
    found = {m: top_words(getattr(split, m), clusters[m], words, n_words) for m in text} if words else {}
    total = [sum(stats[m]["sizes"][c] for m in MODALITIES) for c in range(k)]
    order = sorted((c for c in range(k) if total[c]), key=lambda c: (-total[c], c))[:LARGEST_SHOWN]
    rows = [{"cluster": c, "size": {m: stats[m]["sizes"][c] for m in MODALITIES},
             "majority": {m: stats[m]["majority"][c] for m in MODALITIES if "majority" in stats[m]},
             "purity": {m: stats[m]["cluster_purity"][c] for m in MODALITIES if "majority" in stats[m]},
             "words": {m: [w for w, _ in found[m].get(c, [])] for m in text},
             "members": {m: members(clusters[m], confidence[m], c, n_members) for m in MODALITIES}} for c in order]
    agreement = None if split.b_to_a is None else pair_agreement(clusters["a"], clusters["b"], split.b_to_a)
    return {"agreement": agreement, "modalities": stats,
            "clusters_used": sum(1 for t in total if t),
            "top_words": {m: {str(c): ws for c, ws in f.items()} for m, f in found.items()}, "largest": rows}


Table = tuple[str, str, list[str], list[list[str]]]  # title, note, header, rows


def _class_cell(row: dict[str, Any], m: str) -> str:
    cls = row["majority"].get(m)
    return "" if cls is None else f"{cls} ({row['purity'][m]:.0%})"


def tables(report: dict[str, Any]) -> list[Table]:
    """The report as titled tables of strings, shared by the Markdown and the HTML rendering."""
    r, stats, k = report, report["modalities"], report["K"]

    def cid(c: int) -> str:
        return f"{c:0{len(str(k - 1))}d}"

    labelled = [m for m in MODALITIES if "purity" in stats[m]]
    text = list(r["top_words"])
    about = [["task", r["task"]], ["run", r["run"]], ["method", r["method"]], ["seed", str(r["seed"])],
             ["result", r["result"]], ["checkpoint", r["checkpoint"]], ["prototypes (K)", str(k)],
             ["split", r["split"]], ["items", ", ".join(f"{m}: {n}" for m, n in r["items"].items())],
             ["prototypes used", ", ".join(f"{m}: {stats[m]['used']} of {k}" for m in MODALITIES)]]
    bal = [[m, str(r["items"][m]), str(s["used"]), str(s["largest"]), f"{s['median']:g}", f"{s['entropy']:.3f}"]
           + ([f"{s['purity']:.3f}" if "purity" in s else ""] if labelled else []) for m, s in stats.items()]
    agree = (f"Pairs whose two items share a cluster: {r['agreement']:.1%} of {r['items']['b']} pairs."
             if r["agreement"] is not None else "The split has no pairing (class-only), so no pair agreement.")
    head = ["cluster", *(f"{m} items" for m in MODALITIES), *(f"class {m} (purity)" for m in labelled),
            *(f"top words ({m})" for m in text), *(f"members {m}" for m in MODALITIES)]
    rows = [[cid(row["cluster"]), *(str(row["size"][m]) for m in MODALITIES), *(_class_cell(row, m) for m in labelled),
             *(", ".join(row["words"][m]) for m in text), *(", ".join(map(str, row["members"][m])) for m in MODALITIES)]
            for row in r["largest"]]
    return [("Run", "", ["", ""], about),
            ("Balance", agree + " Size entropy is normalised by log K (1 = all clusters equal); median over used "
             "clusters.", ["modality", "items", "clusters used", "largest", "median", "size entropy",
                           *(["class purity"] if labelled else [])], bal),
            (f"Largest clusters ({len(rows)} of {r['clusters_used']} used by either modality)",
             "Members: item ids, most confident first.", head, rows)]


def title(report: dict[str, Any]) -> str:
    """One line naming the run."""
    return f"Clusters of {report['run']} (task {report['task']}, seed {report['seed']}, {report['split']} split)"


def _render(report: dict[str, Any], fmt: str) -> str:
    from harness.report.templating import environment

    return str(environment(fmt).get_template(f"clusters.{fmt}").render(title=title(report), tables=tables(report)))


def to_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (the template ``clusters.md``: a heading and a table per part)."""
    return _render(report, "md")


def to_html(report: dict[str, Any]) -> str:
    """The report as one self-contained HTML page (the template ``clusters.html``: inline CSS, no scripts, no
    external files)."""
    return _render(report, "html")


def summary(report: dict[str, Any]) -> list[str]:
    """A few console lines: sizes, balance and purity per modality, agreement, the largest clusters."""
    k, stats = report["K"], report["modalities"]
    lines = [f"{title(report)}: K = {k}, " + ", ".join(f"{n} {m}-items" for m, n in report["items"].items())]
    for m, s in stats.items():
        pure = f", class purity {s['purity']:.3f}" if "purity" in s else ""
        lines.append(f"  {m}: {s['used']} of {k} prototypes used, largest {s['largest']}, median {s['median']:g}, "
                     f"size entropy {s['entropy']:.3f}{pure}")
    if report["agreement"] is not None:
        lines.append(f"  pairs sharing a cluster: {report['agreement']:.1%}")
    for row in report["largest"][:3]:
        words = "; ".join(", ".join(ws) for ws in row["words"].values() if ws)
        sizes = ", ".join(f"{n} {m}" for m, n in row["size"].items())
        lines.append(f"  cluster {row['cluster']:0{len(str(k - 1))}d}: {sizes}" + (f": {words}" if words else ""))
    return lines


def write_report(report: dict[str, Any], folder: Path) -> list[Path]:
    """clusters.md, clusters.html and clusters.json in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "clusters.md").write_text(to_markdown(report))
    (folder / "clusters.html").write_text(to_html(report))
    write_json_atomic(folder / "clusters.json", report)
    return [folder / f"clusters.{ext}" for ext in ("md", "html", "json")]


@dataclass(frozen=True)
class ClusterOptions:
    """What ``python -m harness clusters`` asks for: the run (its result file or checkpoint), the report's folder
    (None: beside the result, ``<run>/clusters-seed<k>``), the split whose items are assigned, the words listed per
    text cluster and the member ids listed per cluster and modality, the device, and where the data lies when not
    where the run found it."""

    target: Path
    out: Path | None = None
    split: str = "test"
    top_words: int = 5
    members: int = 5
    device: str = "auto"
    data_root: str | None = None


def report_clusters(options: ClusterOptions) -> list[Path]:
    """Assign the split's items of a trained run to its prototypes, write the report (clusters.md, .html and .json)
    and print its summary; return the files written.

    >>> report_clusters(ClusterOptions(Path("results/synthetic/swamp/seed0.json"), out=Path("runs/clusters")))
    ... # doctest: +SKIP
    """
    from harness.run.build import resolve_device

    if options.top_words < 0 or options.members < 0:
        raise ConfigError(f"--top-words ({options.top_words}) and --members ({options.members}) must be >= 0")
    result_file, checkpoint = run_files(Path(options.target))
    require_prototypes(read_result(result_file), str(result_file))
    device = resolve_device(options.device)
    method, data, result = restore_run(options.target, device, options.data_root)
    split = data[options.split]
    batch = train_settings(result, str(result_file)).eval_batch_size
    emb = dict(zip(MODALITIES, encode_split(method, split, device, batch)))
    clusters, confidence = {}, {}
    for m in MODALITIES:
        clusters[m], confidence[m] = assign(method, emb[m], batch)
    text = next((getattr(split, m) for m in MODALITIES if isinstance(getattr(split, m), TokenCaptions)), None)
    k = len(method.get_parameter("prototypes"))
    report = {"task": result.get("task", ""), "run": result.get("run_name", ""), "seed": result.get("seed"),
              "method": result["config"]["method"]["method"], "result": str(result_file),
              "checkpoint": str(checkpoint), "K": k, "split": options.split,
              "items": {m: len(getattr(split, m)) for m in MODALITIES},
              **analyse(split, clusters, confidence, k, words=vocabulary(data, text) if text is not None else None,
                        n_words=options.top_words, n_members=options.members)}
    out = Path(options.out) if options.out else result_file.parent / f"clusters-seed{result.get('seed', 0)}"
    paths = write_report(report, out)
    print("\n".join(summary(report)))
    print("report: " + "\n        ".join(str(p) for p in paths))
    return paths
