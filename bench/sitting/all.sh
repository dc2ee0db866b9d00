#!/bin/sh
# One quiet sitting of this wave's figures (BENCHMARKS.md: issues 29-32), run from the repository
# root with nothing else on the machine; outputs under S. BEFORE: a built checkout of the commit
# before the change (for bench/sitting/ab.sh). The CIFAR archive: tests/fixtures/mkdata.py cifar10
# /tmp/cifar-full --train 50000 --test 10000.
S=${S:-/tmp/sit}; mkdir -p $S
FM=${FM:-/usr/share/datasets/fashion-mnist}; C=${CIFAR:-/tmp/cifar-full}
log() { echo "== $(date +%T) $*"; }
# 1. issue 29 before/after, alternated (3 rounds)
log ab; ROUNDS=3 STEPS=30 OUT=$S/ab FM=$FM CIFAR=$C sh bench/sitting/ab.sh
# 2. run history cost: 5 alternating pairs, ConvNet 1x1, 300 steps
log hist
for i in 1 2 3 4 5; do for every in 0 1; do
  ./dtrain train configs/fashion-convnet.cfg --set data.dir=$FM --instances 1 --threads 1 --quiet --json \
    --set train.epochs=1 --set train.max_steps=300 --log-every $every --overwrite \
    --set checkpoint.dir=/tmp/histcost-$every | grep '"event":"final"' |
    sed 's/.*"samples_per_s":\([0-9.]*\).*/'"$every"' \1/'
done; done > $S/hist.txt
# 3. bf16 vs fp32 (ConvNet, CIFAR CNN, ResNet-20), 1x1 1x2 2x1
log bf16
for cfg in fashion-convnet cifar10-cnn cifar10-resnet20; do
  d=$C; [ $cfg = fashion-convnet ] && d=$FM
  ./dtrain bench configs/$cfg.cfg --set data.dir=$d --grid 1x1,1x2,2x1 --steps 30 --repeat 3 \
     --precision fp32,bf16 > $S/bf16.$cfg.txt 2>&1
done
# 3b. bf16 on the avx512bf16 path (the tile kernels' VDPBF16PS build; Zen 4's default path)
log bf16-avx512bf16
for cfg in fashion-convnet cifar10-resnet20; do
  d=$C; [ $cfg = fashion-convnet ] && d=$FM
  DTRAIN_ISA=avx512bf16 ./dtrain bench configs/$cfg.cfg --set data.dir=$d --grid 1x1 --steps 20 \
     --repeat 3 --precision fp32,bf16 > $S/vdp.$cfg.txt 2>&1
done
make -s build/bench/conv_bf16 >/dev/null 2>&1
for isa in avx512bf16 amx; do
  OMP_NUM_THREADS=1 DTRAIN_ISA=$isa ./build/bench/conv_bf16 5 128 > $S/vdp.kernels.$isa.txt 2>&1
done
# 4. ResNet-56 vs ResNet-20 per MAC
log r56
for c in cifar10-resnet20 cifar10-resnet56; do
  ./dtrain bench configs/$c.cfg --set data.dir=$C --grid 1x1,2x1 --steps 30 --repeat 3 > $S/r56.$c.txt 2>&1
done
# 5. augmentation cost
log aug
make -s build/bench/augment >/dev/null 2>&1; ./build/bench/augment configs/cifar10-resnet20.cfg 11 1 > $S/aug.txt 2>&1
# 5b. run history per logged step
make -s build/bench/history >/dev/null 2>&1; ./build/bench/history configs/fashion-convnet.cfg 2000 7 > $S/history.txt
# 6. instances auto: probe cost vs one epoch, pick vs sweep (ConvNet, CNN, ResNet-20)
log auto
export XDG_CACHE_HOME=$(mktemp -d)
./dtrain train configs/fashion-convnet.cfg --set data.dir=$FM --instances auto --threads auto --overwrite \
    --set checkpoint.dir=/tmp/auto-convnet > $S/auto.convnet.txt 2>&1
cp /tmp/auto-convnet/probe.json $S/probe.convnet.json
./dtrain bench configs/fashion-convnet.cfg --set data.dir=$FM --grid 1x2,2x1 --steps 100 --repeat 3 > $S/sweep.convnet.txt 2>&1
for m in cifar10-cnn cifar10-resnet20; do
  ./dtrain train configs/$m.cfg --set data.dir=$C --instances auto --threads auto --probe-again \
    --set train.max_steps=1 --overwrite --set checkpoint.dir=/tmp/auto-$m > $S/auto.$m.txt 2>&1
  cp /tmp/auto-$m/probe.json $S/probe.$m.json
  ./dtrain bench configs/$m.cfg --set data.dir=$C --grid 1x2,2x1 --steps 40 --repeat 3 > $S/sweep.$m.txt 2>&1
done
log done
