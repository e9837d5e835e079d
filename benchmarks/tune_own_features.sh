#!/usr/bin/env bash
# Tuned against untuned rows of the own-features template (tasks/own_features_labels.yaml) on two real labelled
# two-view sets that benchmarks/own_features_sets.py builds (the Wikipedia features, QuickDraw halves):
#   python -m benchmarks.own_features_sets --wikipedia WIKI --quickdraw QUICKDRAW --out OWN
#   benchmarks/tune_own_features.sh OWN [RESULTS]
# For each set: the methods at the template's settings (harness run, seeds 0-2), then harness tune (20 trials per
# method on validation, the tuned settings trained with seeds 0-2), into RESULTS/<set>/ (default results/tuning).
set -euo pipefail
own="${1:?usage: benchmarks/tune_own_features.sh OWN_FEATURES_DIR [RESULTS]}"
results="${2:-results/tuning}"
methods="${METHODS:-cca,contrastive,swamp}"
for set in wikipedia quickdraw_halves; do
    out="$results/$set"
    start=$(date +%s)
    python -m harness run tasks/own_features_labels.yaml --data-root "$own/$set" --methods "$methods" \
        --seeds 0,1,2 --out "$out" --no-progress --no-tables
    mid=$(date +%s)
    python -m harness tune tasks/own_features_labels.yaml --data-root "$own/$set" --methods "$methods" \
        --trials 20 --seeds 0,1,2 --out "$out" --no-progress
    end=$(date +%s)
    echo "$set: untuned runs $((mid - start)) s, tune (studies and tuned runs) $((end - mid)) s"
done
