#!/usr/bin/env bash
# How long `harness reproduce` takes to re-derive the verdicts of the synthetic benchmark's claims (Table 8: the
# two differences and the four absolute values; 10 result files, 5 seeds of contrastive and of SwAMP), from a
# clean checkout, with two worker processes. The target: within 15 minutes on a 2-core machine.
#
#   benchmarks/reproduce_synthetic.sh [LOG]     # default log: results/reproduce/synthetic.log
#
# Run it alone on the machine (the runs' own timings are not what is measured, but a busy machine slows it).
set -euo pipefail
cd "$(dirname "$0")/.."
log="${1:-results/reproduce/synthetic.log}"
mkdir -p "$(dirname "$log")"
scratch="$(mktemp -d)"
TIMEFORMAT="wall %R s, user %U s, sys %S s"
{
    echo "# $(date -u +%FT%TZ); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores;" \
         "commit $(git rev-parse --short HEAD)"
    echo "# python -m harness reproduce synthetic-pair synthetic-class synthetic-contrastive-pair-value" \
         "synthetic-contrastive-class-value synthetic-swamp-pair-value synthetic-swamp-class-value" \
         "--launcher local --jobs 2 --out $scratch --no-progress"
    time python -m harness reproduce synthetic-pair synthetic-class synthetic-contrastive-pair-value \
        synthetic-contrastive-class-value synthetic-swamp-pair-value synthetic-swamp-class-value \
        --launcher local --jobs 2 --out "$scratch" --no-progress
} 2>&1 | grep -v "finished (" | tee "$log"
rm -rf "$scratch"
