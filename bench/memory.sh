#!/bin/sh
# Peak memory of a training run, the way the kernel accounts for shared pages: the sum of the
# proportional set size (PSS) of dtrain's parent and every rank, sampled every 0.1 s, plus
# the same sum of RSS for comparison (RSS counts the shared dataset pages once per rank).
#
#   bench/memory.sh CONFIG INSTANCES [dtrain train options...]
#   bench/memory.sh configs/cifar10-cnn.cfg 4 --set data.dir=/tmp/cifar-full --set train.max_steps=200
#
# Prints one line: instances, peak total PSS MiB, peak total RSS MiB.
set -u
cfg=$1 n=$2
shift 2
DTRAIN=${DTRAIN_BIN:-./dtrain}
out=$(mktemp -d)
"$DTRAIN" train "$cfg" --instances "$n" --threads 1 --quiet --set checkpoint.dir="$out/ck" "$@" &
pid=$!
peak_pss=0 peak_rss=0
while kill -0 $pid 2>/dev/null; do
    pss=0 rss=0
    for p in $pid $(pgrep -P $pid); do
        v=$(awk '/^Pss:/ {print $2}' /proc/$p/smaps_rollup 2>/dev/null)
        r=$(awk '/^Rss:/ {print $2}' /proc/$p/smaps_rollup 2>/dev/null)
        pss=$((pss + ${v:-0}))
        rss=$((rss + ${r:-0}))
    done
    [ $pss -gt $peak_pss ] && peak_pss=$pss
    [ $rss -gt $peak_rss ] && peak_rss=$rss
    sleep 0.1
done
wait $pid
rc=$?
rm -rf "$out"
echo "instances=$n peak_pss_mib=$((peak_pss / 1024)) peak_rss_mib=$((peak_rss / 1024)) exit=$rc"
