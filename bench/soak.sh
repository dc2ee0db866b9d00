#!/bin/sh
# Soak: N consecutive short training jobs (2 instances, shared memory), each killed at a random
# moment by a random signal aimed at a random process (the parent or one rank), some with
# --max-restarts. After every job: no dtrain process, no /dev/shm segment and no checkpoint
# temp file may be left. Prints one line per leak and a summary; exits 1 on any leak.
#   bench/soak.sh [N]        (default 200)
N=${1:-200}
DTRAIN=${DTRAIN:-./dtrain}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
/usr/bin/python3 tests/fixtures/mkdata.py idx "$TMP/fix" --train 256 --test 64 || exit 1
leaks=0
i=0
while [ $i -lt "$N" ]; do
    i=$((i + 1))
    r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
    restarts=$((r % 2))
    "$DTRAIN" train configs/fashion-convnet.cfg --threads 1 --instances 2 --quiet --overwrite \
        --set data.dir="$TMP/fix" --set train.batch_size=32 --set train.epochs=20 \
        --set checkpoint.dir="$TMP/run" --set checkpoint.every_steps=7 \
        --max-restarts $restarts >/dev/null 2>&1 &
    pid=$!
    sleep "0.$((r % 10))$((r / 10 % 10))"
    case $((r % 5)) in
    0) kill -TERM $pid 2>/dev/null ;;
    1) kill -INT $pid 2>/dev/null ;;
    2) kill -9 "$(pgrep -P $pid | head -n 1)" 2>/dev/null ;;
    3) kill -9 $pid 2>/dev/null ;;
    4) kill -USR1 $pid 2>/dev/null ;;
    esac
    wait $pid 2>/dev/null
    # A SIGKILLed parent's ranks die with it (PR_SET_PDEATHSIG): give them a moment.
    j=0
    while pgrep -f "$TMP/fix" >/dev/null && [ $j -lt 50 ]; do sleep 0.1; j=$((j + 1)); done
    if pgrep -f "$TMP/fix" >/dev/null; then
        echo "job $i: processes left: $(pgrep -f "$TMP/fix" | tr '\n' ' ')"
        pkill -9 -f "$TMP/fix"
        leaks=$((leaks + 1))
    fi
    # Segments are named after the process that made them (the job's parent): other jobs
    # on the machine do not count.
    if ls /dev/shm | grep -q "^dtrain-$pid-"; then
        echo "job $i: /dev/shm segment left: $(ls /dev/shm | grep "^dtrain-$pid-" | tr '\n' ' ')"
        leaks=$((leaks + 1))
    fi
    # A write that was itself killed may leave a temp file: the next run removes it (below).
done
# The last word on temp files: a fresh run removes whatever a killed write left.
"$DTRAIN" train configs/fashion-convnet.cfg --threads 1 --quiet --overwrite --set data.dir="$TMP/fix" \
    --set train.max_steps=1 --set checkpoint.dir="$TMP/run" >/dev/null 2>&1
if ls "$TMP/run" | grep -q '\.tmp\.'; then
    echo "temp files survive a new run: $(ls "$TMP/run")"
    leaks=$((leaks + 1))
fi
echo "soak: $N jobs, $leaks leaks"
[ "$leaks" -eq 0 ]
