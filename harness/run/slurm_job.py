"""The compute-node side of ``run --launcher slurm``: one planned run as a submitit job (:class:`RunJob`), which runs
the worker (``python -m harness.worker --job JSON --reply PATH``) and reads its reply; SLURM's preemption signal
and requeue through submitit's ``Checkpointable``, and SIGTERM told apart as preemption or cancellation."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import submitit
from submitit.helpers import Checkpointable, DelayedSubmission, TorchDistributedEnvironment

from harness.run.slurm_accounting import CANCELLED_BY_SCANCEL, preempted


class RunJob(Checkpointable):
    """One planned run as a submitit job: runs its worker command and returns how it ended.

    ``argv`` is the worker's command after ``python``. With ``distributed``, every task of the job is one
    process of a torch.distributed run (submitit's TorchDistributedEnvironment gives the torchrun
    variables). ``raise_on_failure`` makes a failed run a failed job (False under the debug executor,
    which would otherwise open a debugger)."""

    def __init__(self, label: str, argv: Sequence[str], distributed: bool = False, raise_on_failure: bool = True):
        self.label, self.argv, self.distributed = label, list(argv), distributed
        self.raise_on_failure = raise_on_failure
        self._process: subprocess.Popen[str] | None = None

    def __getstate__(self) -> dict[str, Any]:  # the running worker stays behind when the job is pickled
        return {**self.__dict__, "_process": None}

    def __call__(self) -> dict[str, Any]:
        self._cancelled = False
        if os.environ.get("SLURM_JOB_ID") and submitit.JobEnvironment().cluster == "slurm":
            self._handle_sigterm()
        env = dict(os.environ)
        if self.distributed:
            TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
            env = dict(os.environ)
        started = time.perf_counter()
        handle, name = tempfile.mkstemp(prefix="swamp-bench-reply-", suffix=".json")  # the worker's answer
        os.close(handle)
        reply = Path(name)
        argv = [*self.argv, "--reply", str(reply)] if self.argv[:2] == ["-m", "harness.worker"] else self.argv
        process = self._process = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True, bufsize=1)
        lines: list[str] = []
        try:
            if process.stdout is None:  # Popen above pipes it
                raise RuntimeError(f"{self.label}: the worker process has no stdout pipe")
            for line in process.stdout:
                print(line, end="", flush=True)  # into the job's log
                lines.append(line.rstrip("\n"))
            code = process.wait()
        finally:
            self._stop()
            answer = _reply(reply)
        if self._cancelled:
            raise RuntimeError(f"{self.label}: {CANCELLED_BY_SCANCEL}")
        error = answer.get("last_line") or next((ln for ln in reversed(lines) if ln.startswith("error:")), "")
        outcome = {"run": self.label, "returncode": code, "error": error if code else "",
                   "seconds": time.perf_counter() - started,
                   "trained": code == 0 and bool(answer.get("trained", "--reply" not in argv)),
                   "results": answer.get("results", [])}
        if code != 0 and self.raise_on_failure:
            raise RuntimeError(f"{self.label}: worker exited with status {code}: {error or (lines or [''])[-1]}")
        return outcome

    def _handle_sigterm(self) -> None:
        """SIGTERM as SLURM sends it: on a cluster without ``SlurmctldParameters=preempt_send_user_signal``, to
        a job preempted with a grace time instead of the job's ``--signal``: then it is handled as that signal
        is (checkpoint and requeue); on ``scancel`` (or at the time limit) the job ends: the worker is
        stopped, nothing is requeued."""
        on_user_signal = signal.getsignal(submitit.JobEnvironment._usr_sig())  # submitit's checkpoint and requeue
        if not callable(on_user_signal):
            return

        def on_sigterm(signum: int, frame: Any) -> None:
            if preempted(os.environ["SLURM_JOB_ID"]):
                on_user_signal(signum, frame)
                return
            self._cancelled = True
            self._stop()

        signal.signal(signal.SIGTERM, on_sigterm)

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Preempted or timed out: stop the worker (its last complete epoch is saved) and requeue this job,
        which resumes the run from that epoch."""
        self._stop()
        return DelayedSubmission(self, *args, **kwargs)

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _reply(path: Path) -> dict[str, Any]:
    """The worker's answer (``python -m harness.worker --job JSON --reply PATH``), the file removed; {} when the worker
    wrote none (it was stopped, or ran another command)."""
    try:
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.stat().st_size else {}
    except (OSError, ValueError):
        found = {}
    path.unlink(missing_ok=True)
    return found
