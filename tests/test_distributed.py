"""harness.run.distributed and the distributed SwAMP pieces: two CPU processes (gloo) against one process.

Each multi-process test spawns two workers that join a gloo group through a file:// rendezvous in
the test's tmp_path, run one scenario (a module-level function of this file) and save what it
returns to ``rank<r>.pt``; the test compares that with the same computation in one process. A
worker's exception comes back as the test's error, with the worker's traceback, and a group
that does not finish within the time limit is killed and fails the test.
"""
from __future__ import annotations

import math
import os
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from baselines.contrastive import hinge_max_violation
from baselines.swamp import swamp_loss
from harness.config.registry import ENCODERS, METHODS
from harness.ops.ot import sinkhorn
from harness.run import distributed as hd
from tests.test_methods import tiny_method_for

WORLD = 2
TIMEOUT_S = 240.0


# ---------------------------------------------------------------- running scenarios on several processes

def _worker(rank: int, world_size: int, out_dir: str, scenario: Callable[..., Any], kwargs: dict) -> None:
    out = Path(out_dir)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    try:
        info = hd.init_from_env("cpu", init_method=f"file://{out}/rendezvous", timeout=timedelta(seconds=60))
        torch.save(scenario(info, **kwargs), out / f"rank{rank}.pt")
    except BaseException:
        (out / f"rank{rank}.error").write_text(traceback.format_exc())  # before shutdown, which fails the peers
        raise
    finally:
        hd.shutdown()


def run_on_ranks(scenario: Callable[..., Any], folder: Path, **kwargs: Any) -> list[Any]:
    """``scenario(info, **kwargs)`` on WORLD spawned processes; what each rank returned, in rank order.

    Fails the test with every failed rank's traceback, earliest first (usually the cause; the
    others are its echo in the collectives), or after TIMEOUT_S.
    """
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the spawned workers
    context = mp.start_processes(_worker, args=(WORLD, str(folder), scenario, kwargs), nprocs=WORLD,
                                 join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not context.join(timeout=1.0):
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.kill()
                    process.join()
                pytest.fail(f"{scenario.__name__} on {WORLD} processes did not finish within {TIMEOUT_S:.0f} s")
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as err:
        reports = [f"--- rank {path.stem[4:]}\n{path.read_text()}"
                   for path in sorted(folder.glob("rank*.error"), key=lambda p: p.stat().st_mtime_ns)]
        pytest.fail(f"{scenario.__name__} failed on {WORLD} processes:\n" + ("\n".join(reports) or str(err)),
                    pytrace=False)
    return [torch.load(folder / f"rank{r}.pt") for r in range(WORLD)]


# ---------------------------------------------------------------- single process: nothing distributed

def test_single_process_without_torchrun_variables(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert hd.init_from_env("cpu") == hd.DistInfo(0, 1, 0, None)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    info = hd.init_from_env("cpu")
    assert info.is_main and info.world_size == 1 and not hd.is_distributed()
    assert not torch.distributed.is_initialized()


def test_unknown_device_type_is_an_error():
    with pytest.raises(ValueError, match=r"\['cpu', 'cuda'\].*'mps'"):
        hd.init_from_env("mps")


@pytest.mark.parametrize("n", [0, 1, 7, 8, 1003])
@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_chunk_bounds_and_shard_follow_tensor_split(n, world_size):
    index = torch.arange(n) * 10
    chunks = index.tensor_split(world_size)
    for rank in range(world_size):
        start, stop = hd.chunk_bounds(n, rank, world_size)
        assert torch.equal(index[start:stop], chunks[rank])
        assert torch.equal(hd.shard(index, hd.DistInfo(rank, world_size)), chunks[rank])


def test_single_process_helpers_pass_through():
    t = torch.randn(4, 3, requires_grad=True)
    gathered = hd.gather_rows(t)
    assert torch.equal(gathered, t) and not gathered.requires_grad
    assert hd.rank_and_world() == (0, 1)
    assert hd.DistInfo().is_main and not hd.DistInfo(1, 2, 1, "gloo").is_main
    method = _build("swamp", {})[0]
    module = hd.wrap_ddp(method, hd.DistInfo(), torch.device("cpu"))
    assert isinstance(module, hd.LossModule) and module.method is method


def test_distributed_sinkhorn_needs_a_process_group():
    with pytest.raises(RuntimeError, match="process group"):
        sinkhorn(torch.zeros(3, 2), 1.0, distributed=True)


@pytest.mark.parametrize("kind", [k for k in METHODS.names() if METHODS.get(k).trains_by_gradient])
def test_every_parameter_gets_a_gradient(kind, tiny_task, tiny_image_text_task, tiny_video_text_task,
                                      tiny_sketch_task):
    # wrap_ddp sets find_unused_parameters=False: that is only right if every loss reaches every parameter.
    _, _, data, method = tiny_method_for(kind, tiny_task, tiny_image_text_task, tiny_video_text_task,
                                        tiny_sketch_task)
    loss, _ = method.loss(*data["train"].pair_batch(torch.arange(16)))
    loss.backward()
    assert [n for n, p in method.named_parameters() if p.requires_grad and p.grad is None] == []


# ---------------------------------------------------------------- sinkhorn and gather_rows on two processes

def _sinkhorn_scenario(info: hd.DistInfo, cases: list[tuple[torch.Tensor, list[int], float]]) -> list[torch.Tensor]:
    return [sinkhorn(logits.split(sizes)[info.rank], eta, 3, distributed=True) for logits, sizes, eta in cases]


def _paper_regime_logits(n: int, k: int) -> torch.Tensor:
    """log p(y|x) of unit vectors against unit prototypes at tau = 0.01: entries down to about -300."""
    g = torch.Generator().manual_seed(1)
    emb = F.normalize(torch.randn(n, 5, generator=g), dim=1)
    protos = F.normalize(torch.randn(k, 5, generator=g), dim=1)
    return torch.log_softmax(emb @ protos.T / 0.01, dim=1)


@pytest.mark.slow  # seconds: spawns gloo process groups
def test_distributed_sinkhorn_equals_sinkhorn_of_all_rows(tmp_path):
    g = torch.Generator().manual_seed(0)
    moderate = torch.log_softmax(torch.randn(14, 6, generator=g) * 2, dim=1)
    paper = _paper_regime_logits(300, 40)
    cases = [(moderate, [7, 7], 3.0), (moderate, [3, 11], 3.0), (moderate, [0, 14], 3.0),
             (paper, [128, 172], 20.0)]
    per_rank = run_on_ranks(_sinkhorn_scenario, tmp_path, cases=cases)
    for i, (logits, sizes, eta) in enumerate(cases):
        expected = sinkhorn(logits, eta, 3).split(sizes)
        for rank in range(WORLD):
            torch.testing.assert_close(per_rank[rank][i], expected[rank], atol=1e-5, rtol=0,
                                       msg=lambda m, i=i, sizes=sizes, rank=rank:
                                           f"case {i} (rows {sizes}), rank {rank}: {m}")


def _gather_scenario(info: hd.DistInfo, cases: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    return [hd.gather_rows(parts[info.rank]) for parts in cases]


@pytest.mark.slow  # seconds: spawns gloo process groups
def test_gather_rows_with_unequal_row_counts(tmp_path):
    def rows(n: int, offset: int, *shape: int) -> torch.Tensor:  # (n, *shape), distinct values
        return torch.arange(n * math.prod(shape), dtype=torch.float32).view(n, *shape) + offset

    cases = [[rows(2, 0, 3), rows(5, 100, 3)],  # e.g. the last batch of an epoch
             [rows(4, 0, 3), rows(4, 100, 3)],
             [rows(0, 0, 3), rows(3, 100, 3)],
             [rows(3, 0, 2, 2), rows(1, 100, 2, 2)],
             [torch.arange(3), torch.arange(2) + 50]]
    per_rank = run_on_ranks(_gather_scenario, tmp_path, cases=cases)
    for i, parts in enumerate(cases):
        for rank in range(WORLD):
            assert torch.equal(per_rank[rank][i], torch.cat(parts)), f"case {i}, rank {rank}"


# ---------------------------------------------------------------- SwAMP: targets, queue and a DDP step

QUEUE, PREFILLED = 20, 15


def _build(kind: str, overrides: dict[str, Any]) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """The same method, partly filled queue and 24 training pairs in every process that calls it."""
    torch.manual_seed(0)
    if kind == "swamp":
        enc, item_shape, extra = ENCODERS.get("mlp"), (3,), {}
        enc_params = enc.Params(hidden=(8,), dim=4)
    else:  # swamp_par: sets of 5 regions, pooled by PAR into p·D = 8 dimensions
        enc, item_shape, extra = ENCODERS.get("region_projection"), (5, 3), {"p": 2, "T": 0.5, "H": 1}
        enc_params = enc.Params(dim=4)
    cls = METHODS.get(kind)
    params = cls.Params(K=6, queue=QUEUE, tau=0.05, eta=10.0, **{"contrastive_weight": 0.0, **extra, **overrides})
    method = cls({m: enc.build(item_shape, enc_params) for m in ("a", "b")}, params)
    g = torch.Generator().manual_seed(1)
    queued = [F.normalize(torch.randn(PREFILLED, method.embed_dim, generator=g), dim=1) for _ in range(2)]
    method.queue.push(*queued)
    x_a, x_b = torch.randn(2, 24, *item_shape, generator=g)
    return method, x_a, x_b


def _queue_state(method: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in method.queue.state_dict().items()}


TARGET_BATCHES = [torch.arange(10), torch.arange(10, 17)]  # 5 + 5 rows, then 4 + 3 (an epoch's last batch)
KINDS = ["swamp", "swamp_par"]


def _targets_scenario(info: hd.DistInfo, kinds: list[str], batches: list[torch.Tensor]) -> dict[str, Any]:
    """Per method and global batch: this rank's targets through the real code path, then the step's queue push."""
    results = {}
    for kind in kinds:
        method, x_a, x_b = _build(kind, {})
        targets = []
        for batch in batches:
            index = hd.shard(batch, info)
            emb_a, emb_b = method.encode("a", x_a[index]), method.encode("b", x_b[index])
            targets.append(method.targets(emb_a, emb_b, distributed=hd.is_distributed()))
            method.loss(x_a[index], x_b[index])
        results[kind] = {"targets": targets, "queue": _queue_state(method)}
    return results


@pytest.fixture(scope="module")
def targets_per_rank(tmp_path_factory) -> list[dict[str, Any]]:
    """Both methods in one pair of processes (each spawn costs seconds of imports)."""
    return run_on_ranks(_targets_scenario, tmp_path_factory.mktemp("targets"), kinds=KINDS, batches=TARGET_BATCHES)


@pytest.mark.slow  # seconds: spawns gloo process groups
@pytest.mark.parametrize("kind", KINDS)
def test_swamp_targets_and_queue_match_one_process_on_the_global_batch(kind, targets_per_rank):
    per_rank = [results[kind] for results in targets_per_rank]
    batches = TARGET_BATCHES
    method, x_a, x_b = _build(kind, {})
    for step, batch in enumerate(batches):
        emb_a, emb_b = method.encode("a", x_a[batch]), method.encode("b", x_b[batch])
        q_a, q_b = method.targets(emb_a, emb_b, distributed=False)  # (B, K), the whole global batch
        for rank in range(WORLD):
            rows = hd.shard(torch.arange(len(batch)), hd.DistInfo(rank, WORLD))
            got_a, got_b = per_rank[rank]["targets"][step]
            torch.testing.assert_close(got_a, q_a[rows], atol=1e-5, rtol=0, msg=f"q_a, step {step}, rank {rank}")
            torch.testing.assert_close(got_b, q_b[rows], atol=1e-5, rtol=0, msg=f"q_b, step {step}, rank {rank}")
        method.loss(x_a[batch], x_b[batch])
    assert int(method.queue.filled) == QUEUE  # the second step wrapped around
    for rank in range(WORLD):
        for name, expected in _queue_state(method).items():
            torch.testing.assert_close(per_rank[rank]["queue"][name], expected, atol=1e-6, rtol=0,
                                       msg=f"queue.{name}, rank {rank}")


def _sgd_steps(module: Callable[..., tuple[torch.Tensor, dict]], method: torch.nn.Module, x_a: torch.Tensor,
               x_b: torch.Tensor, batches: list[torch.Tensor], info: hd.DistInfo) -> dict[str, Any]:
    """Plain SGD (Adam would amplify float noise in near-zero gradients) through ``module``; the final state."""
    optimizer = torch.optim.SGD(method.parameters(), lr=0.1)
    for batch in batches:
        index = hd.shard(batch, info)
        loss, _ = module(x_a[index], x_b[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return {"params": {n: p.detach().clone() for n, p in method.named_parameters()}, "queue": _queue_state(method)}


DDP_CASES = {
    "swamp": ("swamp", {}),
    "swamp+hinge": ("swamp", {"contrastive_weight": 1.0}),
    "hinge only": ("swamp", {"lam": 0.0, "contrastive_weight": 1.0}),  # prototypes get zero gradients, not none
    "swamp_par+hinge": ("swamp_par", {"contrastive_weight": 1.0}),
}
DDP_BATCHES = [torch.arange(10), torch.arange(10, 18)]  # equal shards: the mean of the shard means is the mean


def _ddp_scenario(info: hd.DistInfo, cases: dict[str, tuple[str, dict]], batches: list[torch.Tensor]) -> dict:
    results = {}
    for case, (kind, overrides) in cases.items():
        method, x_a, x_b = _build(kind, overrides)
        module = hd.wrap_ddp(method, info, torch.device("cpu"))
        assert isinstance(module, torch.nn.parallel.DistributedDataParallel)
        results[case] = _sgd_steps(module, method, x_a, x_b, batches, info)
    return results


@pytest.fixture(scope="module")
def ddp_per_rank(tmp_path_factory) -> list[dict[str, Any]]:
    """Every case in one pair of processes (the first DDP construction alone imports for seconds)."""
    return run_on_ranks(_ddp_scenario, tmp_path_factory.mktemp("ddp"), cases=DDP_CASES, batches=DDP_BATCHES)


def _reference_loss(method: torch.nn.Module, x_a: torch.Tensor, x_b: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """One process, the whole batch: L_s over all rows, the hinge summed over the ranks' shards."""
    p = method.params
    emb_a, emb_b = method.encode("a", x_a), method.encode("b", x_b)
    q_a, q_b = method.targets(emb_a, emb_b)
    l_s = swamp_loss(method.log_probs(emb_a), method.log_probs(emb_b), q_a, q_b)
    method.remember(emb_a, emb_b)
    shards = torch.arange(len(x_a)).tensor_split(WORLD)
    l_c = sum(hinge_max_violation(emb_a[rows], emb_b[rows], p.margin) for rows in shards)
    return p.lam * l_s + p.contrastive_weight * l_c, {}


@pytest.mark.slow  # seconds: spawns gloo process groups
@pytest.mark.parametrize("case", DDP_CASES)
def test_ddp_steps_match_one_process_on_the_global_batch(case, ddp_per_rank):
    kind, overrides = DDP_CASES[case]
    batches = DDP_BATCHES
    per_rank = [results[case] for results in ddp_per_rank]
    for name, value in per_rank[0]["params"].items():
        assert torch.equal(value, per_rank[1]["params"][name]), f"{name} differs between the ranks"
    method, x_a, x_b = _build(kind, overrides)
    if overrides.get("contrastive_weight", 0.0) == 0.0:  # the real single-process path
        expected = _sgd_steps(hd.wrap_ddp(method, hd.DistInfo(), torch.device("cpu")), method, x_a, x_b, batches,
                              hd.DistInfo())
    else:  # the hinge's negatives come from each rank's shard: the reference says so explicitly
        expected = _sgd_steps(lambda a, b: _reference_loss(method, a, b), method, x_a, x_b, batches, hd.DistInfo())
    for name, value in expected["params"].items():
        torch.testing.assert_close(per_rank[0]["params"][name], value, atol=1e-5, rtol=0, msg=name)
    for name, value in expected["queue"].items():
        torch.testing.assert_close(per_rank[0]["queue"][name], value, atol=1e-5, rtol=0, msg=f"queue.{name}")


@pytest.mark.slow
def test_torchrun_trains_on_two_processes_and_writes_one_result(tiny_task, tmp_path):
    """`torchrun --standalone` (a free port) with gloo: both processes train, rank 0 alone tests and writes."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "harness",
           "run", str(tiny_task), "--methods", "swamp", "--epochs", "2", "--device", "cpu", "--out", str(out),
           "--no-progress"]
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = sorted(out.rglob("seed*.json"))
    assert [p.relative_to(out).as_posix() for p in results] == ["tiny/swamp/seed0.json"]
    result = json.loads(results[0].read_text())
    assert result["distributed"] == {"world_size": 2, "backend": "gloo", "batch_per_process": 16}
    assert len(result["history"]) == 2 and all(math.isfinite(h["loss"]) for h in result["history"])
    # the other rank is the run's own work, not contention: its thread counts among the run's
    assert result["profile"]["contention"]["train"]["threads"] == 2
    assert done.stdout.count("Accuracy (test split") == 1  # tables printed once, by rank 0
    assert not list(out.rglob("*.resume.pt"))
    # made again from its result file by two processes: the same metrics, checked and printed once
    again = [*cmd[:cmd.index("harness") + 1], "rerun", str(results[0]), "--out", str(tmp_path / "again"),
             "--device", "cpu", "--check", "--no-progress"]
    rerun = subprocess.run(again, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    closing = "1 of 1 run(s) made on this kind of machine reproduced their recorded test metrics exactly"
    assert rerun.stdout.count(closing) == 1
    assert "warning" not in rerun.stderr
