#!/usr/bin/env bash
# The tuning budget benchmark: a 2-method x 20-trial study (contrastive and SwAMP, harness tune, no tuned runs) on
# the Wikipedia features through the own-features template, which must finish within LIMIT seconds (default 900:
# 15 minutes) on this machine. Run it alone on the machine; it prints the seconds and exits 1 over the limit.
#   python -m benchmarks.own_features_sets --wikipedia WIKI --out OWN
#   benchmarks/tune_wikipedia.sh OWN [LIMIT]
set -euo pipefail
own="${1:?usage: benchmarks/tune_wikipedia.sh OWN_FEATURES_DIR [LIMIT_SECONDS]}"
limit="${2:-900}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
python -m harness tune tasks/own_features_labels.yaml --data-root "$own/wikipedia" --methods contrastive,swamp \
    --trials 20 --no-final --out "$out" --no-progress
end=$(date +%s.%N)
seconds=$(python -c "print(f'{$end - $start:.0f}')")
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "tune benchmark: contrastive,swamp x 20 trials on the Wikipedia features: ${seconds} s (limit ${limit} s); \
$(python -c 'import platform, os; print(platform.processor() or platform.machine(), os.cpu_count(), "cores")'); \
load average at the end ${load}; commit $(git rev-parse --short HEAD)"
python -c "import sys; sys.exit(0 if $seconds <= $limit else 1)"
