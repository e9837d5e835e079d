#!/usr/bin/env bash
# Does the regression gate catch a known slowdown? A clone of this checkout's HEAD with a 20 ms sleep added at the top
# of harness.ops.ot.sinkhorn (committed on top), and `python -m harness bench --against HEAD~1` run in it RUNS times
# in a row; each run's output is kept in OUT/runN.log and one line per run (exit status, seconds) in OUT/summary.txt.
# Every benchmark but time_sinkhorn runs the same code on both sides, so the logs also measure the gate's noise.
#
#   benchmarks/gate_injected.sh OUT [RUNS]      (RUNS defaults to 5; run it on a quiet machine)
set -euo pipefail
out="$(mkdir -p "${1:?usage: benchmarks/gate_injected.sh OUT [RUNS]}" && cd "$1" && pwd)"
runs="${2:-5}"
root="$(cd "$(dirname "$0")/.." && pwd)"
clone="$(mktemp -d)/clone"
trap 'rm -rf "$(dirname "$clone")"' EXIT
git clone -q "$root" "$clone"
cd "$clone"
python - <<'PY'
path = "harness/ops/ot.py"
text = open(path).read()
start = text.index("def sinkhorn(")
end = text.index('"""', text.index('"""', start) + 3) + 3  # the end of its docstring
open(path, "w").write(text[:end] + "\n    import time\n    time.sleep(0.02)" + text[end:])
PY
git -c user.email=gate@localhost -c user.name=gate commit -qam "a 20 ms sleep at the top of sinkhorn"
: > "$out/summary.txt"
for i in $(seq 1 "$runs"); do
    start=$(date +%s)
    status=0
    python -m harness bench --against HEAD~1 > "$out/run$i.log" 2>&1 || status=$?
    echo "run $i: exit $status in $(( $(date +%s) - start )) s" | tee -a "$out/summary.txt"
done
