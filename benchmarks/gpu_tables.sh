#!/usr/bin/env bash
# Every GPU timing table in one command, from a checkout, with PYTHONPATH=. (no install, no asv):
#
#   benchmarks/gpu_tables.sh                 # on a machine with CUDA; results in results/gpu/
#   benchmarks/gpu_tables.sh --smoke         # the same commands at tiny shapes on the CPU (seconds)
#
# Runs, each on the shapes tasks (random data in SCAN's shapes, timing only):
#   flickr30k_shapes  scan, contrastive_par, swamp_par; scan@scorer=original (SCAN's own evaluation,
#                     whole, no budget); the three again under train.precision tf32 and bf16
#   coco_shapes       scan, contrastive_par, swamp_par; scan@scorer=original with time_budget_s=$BUDGET
#                     per protocol (5K and 1K folds; its times are extrapolated and marked so)
#   synthetic         contrastive, swamp (the embedded task, 100 epochs)
# then re-renders each task's tables from all its result files and, when $OUT is set (or --tar PATH),
# packs results, tables and the log into one tarball. Options: --budget S (default 60), --results DIR,
# --tar PATH, --smoke.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"

SMOKE=0
BUDGET=60
RESULTS=results/gpu
TAR="${OUT:+$OUT/gpu_tables.tar.gz}"
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1 ;;
        --budget) BUDGET="$2"; shift ;;
        --results) RESULTS="$2"; shift ;;
        --tar) TAR="$2"; shift ;;
        *) echo "unknown option $1; valid: --smoke, --budget S, --results DIR, --tar PATH" >&2; exit 2 ;;
    esac
    shift
done

DEVICE=cuda
SHAPES=()      # overrides of the image–text shapes tasks
SYNTHETIC=()   # overrides of the synthetic task
if [ "$SMOKE" = 1 ]; then
    DEVICE=cpu
    BUDGET=0.001
    SHAPES=(--set "dataset.images=[32,10,260]" --set dataset.regions=4 --set dataset.feature_dim=16
            --set dataset.vocab_size=40 --set dataset.max_words=8 --set encoders.a.dim=8 --set encoders.b.dim=8
            --set encoders.b.word_dim=8 --set train.eval_batch_size=16)
    SYNTHETIC=(--epochs 1 --set dataset.pairs_per_class=20 --set "dataset.split_sizes=[240,80,80]")
else
    python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: use --smoke on a CPU')"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
fi

mkdir -p "$RESULTS"
LOG="$RESULTS/gpu_tables.log"
run() {  # one harness command, echoed and timed into the log
    echo "+ python -m harness $*" | tee -a "$LOG"
    local start=$SECONDS
    python -m harness "$@" --device "$DEVICE" --out "$RESULTS" --no-progress >>"$LOG" 2>&1
    echo "  ($((SECONDS - start)) s)" | tee -a "$LOG"
}

F=tasks/flickr30k_shapes.yaml
C=tasks/coco_shapes.yaml
run run "$F" --methods scan,contrastive_par,swamp_par "${SHAPES[@]}"
run run "$F" --methods scan --set scan.scorer=original "${SHAPES[@]}"
run run "$F" --methods scan,contrastive_par,swamp_par --sweep train.precision=tf32,bf16 "${SHAPES[@]}"
run run "$C" --methods scan,contrastive_par,swamp_par "${SHAPES[@]}"
run run "$C" --methods scan --set scan.scorer=original --set "scan.time_budget_s=$BUDGET" "${SHAPES[@]}"
run run tasks/synthetic.yaml --methods contrastive,swamp "${SYNTHETIC[@]}"

for task in flickr30k_shapes coco_shapes synthetic; do
    python -m harness table "$RESULTS/$task" --format md >>"$LOG" 2>&1
    echo "tables: $RESULTS/$task/timing.md"
done
if [ -n "$TAR" ]; then
    mkdir -p "$(dirname "$TAR")"
    tar czf "$TAR" --exclude='*.pt' -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
    echo "packed: $TAR"
fi
