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
#   sketchy_shapes    doodle2search, doodle2search_swamp (VGG-16-BN with attention, 224 px, the whole
#                     21-class test split: 12,679 sketches × 12,264 photos)
#   msrvtt_shapes     contrastive, swamp (HowTo100M-protocol shapes, 1K-A test)
#   synthetic         contrastive, swamp (the embedded task, 100 epochs)
# then re-renders each task's tables from all its result files and, when $OUT is set (or --tar PATH),
# packs results, tables and the log into one tarball. Options: --budget S (default 60), --results DIR,
# --tar PATH, --smoke, --deadline S (start no run after S seconds; the skipped ones are logged, and the
# tables and tarball are still written).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"

SMOKE=0
BUDGET=60
DEADLINE=0
RESULTS=results/gpu
TAR="${OUT:+$OUT/gpu_tables.tar.gz}"
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) SMOKE=1 ;;
        --budget) BUDGET="$2"; shift ;;
        --results) RESULTS="$2"; shift ;;
        --tar) TAR="$2"; shift ;;
        --deadline) DEADLINE="$2"; shift ;;
        *) echo "unknown option $1; valid: --smoke, --budget S, --results DIR, --tar PATH, --deadline S" >&2; exit 2 ;;
    esac
    shift
done

DEVICE=cuda
SHAPES=()      # overrides of the image–text shapes tasks
SYNTHETIC=()   # overrides of the synthetic task
SKETCH=()      # overrides of the sketch shapes task
VIDEO=()       # overrides of the text–video shapes task
if [ "$SMOKE" = 1 ]; then
    DEVICE=cpu
    BUDGET=0.001
    SHAPES=(--set "dataset.images=[32,10,260]" --set dataset.regions=4 --set dataset.feature_dim=16
            --set dataset.vocab_size=40 --set dataset.max_words=8 --set encoders.a.dim=8 --set encoders.b.dim=8
            --set encoders.b.word_dim=8 --set train.eval_batch_size=16)
    SYNTHETIC=(--epochs 1 --set dataset.pairs_per_class=20 --set "dataset.split_sizes=[240,80,80]" --set swamp.K=16 --set swamp.queue=64)
    SKETCH=(--set "dataset.classes=[4,2,3]" --set "dataset.sketches=[40,8,12]" --set "dataset.photos=[40,8,15]"
            --set dataset.image_size=16 --set dataset.word_dim=6 --set encoders.a.arch=small
            --set encoders.b.arch=small --set "encoders.a.widths=[4,8]" --set "encoders.b.widths=[4,8]"
            --set train.batch_size=8 --set doodle2search_swamp.K=6 --set doodle2search_swamp.queue=16)
    VIDEO=(--set "dataset.videos=[64,16,32]" --set dataset.train_captions_per_video=2 --set dataset.feature_dim=32
           --set dataset.word_dim=8 --set dataset.vocab_size=50 --set encoders.a.dim=8 --set encoders.b.dim=8
           --set encoders.b.word_dim=8
           --set swamp.K=8 --set swamp.queue=32)
else
    python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: use --smoke on a CPU')"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
fi

mkdir -p "$RESULTS"
LOG="$RESULTS/gpu_tables.log"
run() {  # one harness command, echoed and timed into the log (skipped past the --deadline)
    if [ "$DEADLINE" != 0 ] && [ "$SECONDS" -ge "$DEADLINE" ]; then
        echo "- skipped (past --deadline $DEADLINE s): python -m harness $*" | tee -a "$LOG"
        return 0
    fi
    echo "+ python -m harness $*" | tee -a "$LOG"
    local start=$SECONDS status=0
    python -m harness "$@" --device "$DEVICE" --out "$RESULTS" --no-progress >>"$LOG" 2>&1 || status=$?
    if [ "$status" != 0 ]; then  # go on with the other runs; the script exits 1 after packing
        FAILED=$((FAILED + 1))
        echo "  FAILED with exit status $status after $((SECONDS - start)) s (the log has its error)" | tee -a "$LOG"
    else
        echo "  ($((SECONDS - start)) s)" | tee -a "$LOG"
    fi
}
FAILED=0

F=tasks/flickr30k_shapes.yaml
C=tasks/coco_shapes.yaml
run run "$F" --methods scan,contrastive_par,swamp_par "${SHAPES[@]}"
run run "$F" --methods scan --set scan.scorer=original "${SHAPES[@]}"
run run "$F" --methods scan,contrastive_par,swamp_par --sweep train.precision=tf32,bf16 "${SHAPES[@]}"
run run "$C" --methods scan,contrastive_par,swamp_par "${SHAPES[@]}"
run run "$C" --methods scan --set scan.scorer=original --set "scan.time_budget_s=$BUDGET" "${SHAPES[@]}"
run run tasks/sketchy_shapes.yaml --methods doodle2search,doodle2search_swamp "${SKETCH[@]}"
run run tasks/msrvtt_shapes.yaml --methods contrastive,swamp "${VIDEO[@]}"
run run tasks/synthetic.yaml --methods contrastive,swamp "${SYNTHETIC[@]}"

for task in flickr30k_shapes coco_shapes synthetic sketchy_shapes msrvtt_shapes; do
    [ -d "$RESULTS/$task" ] || continue
    python -m harness table "$RESULTS/$task" --format md >>"$LOG" 2>&1
    echo "tables: $RESULTS/$task/timing.md"
done
if [ -n "$TAR" ]; then
    mkdir -p "$(dirname "$TAR")"
    tar czf "$TAR" --exclude='*.pt' -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
    echo "packed: $TAR"
fi
if [ "$FAILED" != 0 ]; then
    echo "$FAILED run(s) failed: see $LOG" >&2
    exit 1
fi
