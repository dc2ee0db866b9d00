#!/bin/sh
# Before/after speed of two builds, alternated in one sitting (issue 29's "no speed lost"):
# each round runs ConvNet, CIFAR CNN and ResNet-20 at 1x1, 1x2 and 2x1 once per side, the side
# going first alternating between rounds; one CSV per run under OUT. Each side runs from its own
# checkout so it reads configs it understands (an older binary does not know model.blocks).
#   BEFORE=/path/to/old/checkout (built) AFTER=. CIFAR=/tmp/cifar-full sh bench/sitting/ab.sh
BEFORE=${BEFORE:?a checkout of the earlier commit, built (git worktree add ... && make)}
AFTER=${AFTER:-.}; ROUNDS=${ROUNDS:-3}; STEPS=${STEPS:-30}; OUT=${OUT:-/tmp/ab}
FM=${FM:-/usr/share/datasets/fashion-mnist}; CIFAR=${CIFAR:-/tmp/cifar-full}
mkdir -p "$OUT"
run() { # side root cfg tag round extra...
    side=$1 root=$2 cfg=$3 tag=$4 r=$5; shift 5
    (cd "$root" && ./dtrain bench "$cfg" --grid 1x1,1x2,2x1 --steps "$STEPS" --quiet \
        --csv "$OUT/$tag.$side.$r.csv" "$@" >/dev/null 2>"$OUT/$tag.$side.$r.err") ||
        echo "failed $tag $side $r"
}
for r in $(seq 1 "$ROUNDS"); do
    for m in convnet cnn resnet20; do
        case $m in
        convnet) cfg=configs/fashion-convnet.cfg; x="--set data.dir=$FM" ;;
        cnn) cfg=configs/cifar10-cnn.cfg; x="--set data.dir=$CIFAR" ;;
        resnet20) cfg=configs/cifar10-resnet20.cfg; x="--set data.dir=$CIFAR" ;;
        esac
        if [ $((r % 2)) = 1 ]; then
            run before "$BEFORE" $cfg $m $r $x; run after "$AFTER" $cfg $m $r $x
        else
            run after "$AFTER" $cfg $m $r $x; run before "$BEFORE" $cfg $m $r $x
        fi
    done
done
