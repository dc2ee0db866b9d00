#!/bin/sh
# Does fine-tuning beat training from scratch? (issue 32) On Fashion-MNIST, for each seed:
#   1. pretrain a small CNN on classes 0-4 (data.select_classes; a 10-way head);
#   2. fine-tune it on classes 5-9 (train.init_from; the 5-way head is new, its lr x 10);
#   3. train the same model on classes 5-9 from scratch: the same steps, seed and rates (the
#      head's x 10 included), so the start is the only difference.
# Prints each seed's test accuracy (on classes 5-9) and the medians of 2 and 3.
#
#   tests/tools/finetune_experiment.sh [--seeds N] [--pretrain-steps P] [--steps S]
#                                      [--threads T] [--data DIR] [--dtrain BIN]
# Defaults: 5 seeds, 400 pretraining steps, 60 fine-tuning steps (batch 64: 3840 samples, an
# eighth of an epoch of classes 5-9), 1 thread, Debian's dataset-fashion-mnist.
set -eu
SEEDS=5 PRE=400 STEPS=60 THREADS=1 DATA=/usr/share/datasets/fashion-mnist DTRAIN=./dtrain
while [ $# -gt 0 ]; do
    case $1 in
    --seeds) SEEDS=$2 ;;
    --pretrain-steps) PRE=$2 ;;
    --steps) STEPS=$2 ;;
    --threads) THREADS=$2 ;;
    --data) DATA=$2 ;;
    --dtrain) DTRAIN=$2 ;;
    *) echo "usage: $0 [--seeds N] [--pretrain-steps P] [--steps S] [--threads T] [--data DIR] [--dtrain BIN]" >&2
       exit 2 ;;
    esac
    shift 2
done
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

cat >"$W/pre.cfg" <<'EOF2'
data = { dataset = "fashion-mnist"; mean = [ 0.286 ]; std = [ 0.353 ];
         select_classes = [ 0, 1, 2, 3, 4 ]; };
model = { layers = (
  { type = "conv2d"; name = "conv1"; out_channels = 16; kernel = 3; padding = 1; },
  { type = "relu"; },
  { type = "maxpool2d"; kernel = 2; },
  { type = "conv2d"; name = "conv2"; out_channels = 32; kernel = 3; padding = 1; },
  { type = "relu"; },
  { type = "maxpool2d"; kernel = 2; },
  { type = "flatten"; },
  { type = "linear"; name = "fc1"; out_features = 64; },
  { type = "relu"; },
  { type = "linear"; name = "head"; out_features = 10; } ); };
optimizer = { type = "sgd"; lr = 0.05; momentum = 0.9;
              param_groups = ( { match = [ "head" ]; lr_scale = 10.0; } ); };
train = { epochs = 1; batch_size = 64; };
checkpoint = { best = false; };
EOF2
sed -e 's/\[ 0, 1, 2, 3, 4 \]/[ 5, 6, 7, 8, 9 ]/' -e 's/out_features = 10/out_features = 5/' \
    "$W/pre.cfg" >"$W/new.cfg"

# The test accuracy of the run's last evaluation, in percent.
accuracy() {
    "$DTRAIN" train "$@" --json --quiet --threads "$THREADS" --set data.dir="$DATA" |
        sed -n 's/.*"event":"epoch".*"test_accuracy":\([0-9.e-]*\).*/\1/p' | tail -n 1 |
        awk '{ printf "%.2f", $1 * 100 }'
}

printf '%-6s %12s %12s\n' seed fine-tuned scratch
: >"$W/ft" && : >"$W/sc"
s=1
while [ "$s" -le "$SEEDS" ]; do
    "$DTRAIN" train "$W/pre.cfg" --quiet --threads "$THREADS" --set data.dir="$DATA" \
        --set train.seed="${s}L" --set train.max_steps="$PRE" --set checkpoint.dir="$W/pre$s"
    ft=$(accuracy "$W/new.cfg" --set train.seed="${s}L" --set train.max_steps="$STEPS" \
        --set checkpoint.dir="$W/ft$s" --set train.init_from="\"$W/pre$s/last.safetensors\"")
    sc=$(accuracy "$W/new.cfg" --set train.seed="${s}L" --set train.max_steps="$STEPS" \
        --set checkpoint.dir="$W/sc$s")
    printf '%-6s %11s%% %11s%%\n' "$s" "$ft" "$sc"
    echo "$ft" >>"$W/ft"
    echo "$sc" >>"$W/sc"
    s=$((s + 1))
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
printf '%-6s %11s%% %11s%%\n' median "$(median "$W/ft")" "$(median "$W/sc")"
