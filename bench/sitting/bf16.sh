#!/bin/sh
# One quiet sitting of issue 30's and 31's figures of the bf16 wave (BENCHMARKS.md: "bf16
# training", "train --instances auto"), run from the repository root with nothing else on the
# machine; outputs under S. BEFORE: a built checkout of the commit before the wave (its bf16
# rows show what the wave changed). The CIFAR archive: tests/fixtures/mkdata.py cifar10
# /tmp/cifar-full --train 50000 --test 10000.
S=${S:-/tmp/sit-bf16}; mkdir -p $S
FM=${FM:-/usr/share/datasets/fashion-mnist}; C=${CIFAR:-/tmp/cifar-full}
log() { echo "== $(date +%T) $*"; }
data() { [ $1 = fashion-convnet ] && echo $FM || echo $C; }
# 1. bf16 against fp32, this build: ConvNet, CIFAR CNN, ResNet-20 at 1x1, 1x2, 2x1
log bf16
for cfg in fashion-convnet cifar10-cnn cifar10-resnet20; do
  ./dtrain bench configs/$cfg.cfg --set data.dir=$(data $cfg) --grid 1x1,1x2,2x1 --steps 30 \
     --repeat 3 --precision fp32,bf16 > $S/bf16.$cfg.txt 2>&1
done
# 1b. train.bf16_winograd (bf16 products on Winograd): the same sweep, fp32 rows again beside
#     the mode's bf16 rows (the key changes nothing in fp32)
log bf16_winograd
for cfg in fashion-convnet cifar10-cnn cifar10-resnet20; do
  ./dtrain bench configs/$cfg.cfg --set data.dir=$(data $cfg) --grid 1x1,1x2,2x1 --steps 30 \
     --repeat 3 --precision fp32,bf16 --set train.bf16_winograd=true > $S/wino.$cfg.txt 2>&1
done
# 2. the build before the wave, bf16 at 1x1 (its fp32 is the same code)
if [ -n "${BEFORE:-}" ]; then
  log before
  for cfg in fashion-convnet cifar10-cnn cifar10-resnet20; do
    $BEFORE/dtrain bench configs/$cfg.cfg --set data.dir=$(data $cfg) --grid 1x1 --steps 30 \
       --repeat 3 --precision fp32,bf16 > $S/before.$cfg.txt 2>&1
  done
fi
# 3. peak memory (PSS of every process), ResNet-20 at batch 128, 1 and 2 instances
log memory
for n in 1 2; do for p in fp32 bf16; do
  echo "$p $(bench/memory.sh configs/cifar10-resnet20.cfg $n --set data.dir=$C --set train.max_steps=20 \
     --precision $p)"
done; done > $S/memory.txt
for n in 1 2; do
  echo "bf16_winograd $(bench/memory.sh configs/cifar10-resnet20.cfg $n --set data.dir=$C \
     --set train.max_steps=20 --precision bf16 --set train.bf16_winograd=true)"
done >> $S/memory.txt
# 4. the avx512bf16 path (Zen 4's default) on this CPU, as a proxy
log avx512bf16
for cfg in fashion-convnet cifar10-resnet20; do
  DTRAIN_ISA=avx512bf16 ./dtrain bench configs/$cfg.cfg --set data.dir=$(data $cfg) --grid 1x1 \
     --steps 20 --repeat 3 --precision fp32,bf16 > $S/vdp.$cfg.txt 2>&1
done
# 5. --instances auto: probe cost against the epoch, 3 runs with an empty cache
log auto
for i in 1 2 3; do
  XDG_CACHE_HOME=$(mktemp -d) ./dtrain train configs/fashion-convnet.cfg --set data.dir=$FM \
    --instances auto --threads auto --overwrite --set checkpoint.dir=/tmp/auto-convnet 2>&1 |
    grep -E 'probe took|epoch 1/1'
done > $S/auto.convnet.txt
# 6. bf16 gradients on one host: the all-reduce's time, fp32 against bf16
log grad
for t in fp32 bf16; do
  ./dtrain bench allreduce --backend shm --instances 2 --min-bytes 64K --max-bytes 4M --dtype $t
done > $S/grad.txt 2>&1
# 7. against PyTorch autocast (torch 1.13 CPU, DDP over Gloo), ResNet-20 and the ConvNet
log torch
/usr/bin/python3 bench/compare.py --models resnet20,convnet --grid 1x1,1x2,2x1 --precision fp32,bf16 \
    --steps 60 --cifar-dir $C --no-allreduce --out $S/compare.md > $S/compare.log 2>&1
# 7b. the same for ResNet-20 with train.bf16_winograd, against autocast again
/usr/bin/python3 bench/compare.py --models resnet20 --grid 1x1,1x2,2x1 --precision bf16 \
    --steps 60 --cifar-dir $C --no-allreduce --dtrain-set train.bf16_winograd=true \
    --out $S/compare-wino.md > $S/compare-wino.log 2>&1
log done
