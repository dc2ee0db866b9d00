# Early stopping: train.early_stop = { metric; patience; min_delta; } ends training when the
# metric has not improved by more than min_delta for `patience` epochs; the final event and the
# last line say why; every rank stops after the same epoch; the counter survives a resume; bad
# values and unknown keys are config errors naming file and key.
. tests/cli/lib.sh

PY=/usr/bin/python3
$PY tests/fixtures/mkdata.py idx "$TMP/d" --train 64 --test 20 >/dev/null
CFG=configs/fashion-convnet.cfg
# 64 samples in batches of 16: 4 steps an epoch
BASE="--set data.dir=$TMP/d --set train.batch_size=16 --set train.drop_last=false --threads 1"
# min_delta this large: no epoch after the first improves, so the run stops after 1 + patience
NEVER="--set train.early_stop.metric=train_loss --set train.early_stop.min_delta=1000"

final() { # KEY of the final event in $TMP/out
    $PY -c 'import json,sys
e=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
f=[x for x in e if x["event"]=="final"][-1]
v=f
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$TMP/out" "$1"
}

run "$DTRAIN" train $CFG $BASE $NEVER --set train.early_stop.patience=2 \
    --set train.epochs=20 --set checkpoint.dir="$TMP/es" --json
expect_rc "early stop: exit 0" 0
check "stops after epoch 3 (1 + patience 2): 12 steps" test "$(final steps)" = 12
check "the final event's stop_reason is early_stop" test "$(final stop_reason)" = early_stop
check "...with the rule and the best epoch" test "$(final early_stop.best_epoch)" = 1
final early_stop.reason >"$TMP/reason"
check "...and its reason" grep -Eq '^train_loss did not improve by more than 1000 for 2 epochs \(best [0-9.]+ at epoch 1\)$' "$TMP/reason"
expect_err "the last line says so" "early stop after epoch 3/20: train_loss did not improve by more than 1000 for 2 epochs \(best [0-9.e+-]+ at epoch 1\); $TMP/es/last.safetensors holds step 12"
step_of() { # the step in a checkpoint's metadata
    $PY -c 'import json,struct,sys
f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"]["step"])' "$1"
}
check "last.safetensors is the stopping step's" test "$(step_of "$TMP/es/last.safetensors")" = 12
run "$DTRAIN" train $CFG $BASE --set train.epochs=2 --set checkpoint.dir="$TMP/plain" --json
check "a run that does all its epochs: stop_reason epochs" test "$(final stop_reason)" = epochs
check "...and no early_stop member when it is off" sh -c "! grep -q '\"early_stop\"' '$TMP/out'"
run "$DTRAIN" train $CFG $BASE --set train.epochs=2 --set train.max_steps=5 \
    --set checkpoint.dir="$TMP/ms" --json
check "a run cut by max_steps: stop_reason max_steps" test "$(final stop_reason)" = max_steps

# Every rank stops after the same epoch: 2 instances end cleanly (a rank going on alone would
# hang in its next collective and fail on the timeout).
run "$DTRAIN" train $CFG $BASE $NEVER --set train.early_stop.patience=1 --set train.epochs=50 \
    --instances 2 --timeout 20 --set checkpoint.dir="$TMP/es2" --json
expect_rc "2 instances stop together: exit 0" 0
check "...after epoch 2" test "$(final steps)" = 8

# On validation accuracy, with a held-out split.
run "$DTRAIN" train $CFG $BASE --set data.val_fraction=0.25 --set train.early_stop.metric=val_accuracy \
    --set train.early_stop.min_delta=2 --set train.early_stop.patience=1 --set train.epochs=9 \
    --set checkpoint.dir="$TMP/val" --json
expect_rc "val_accuracy with data.val_fraction: exit 0" 0
check "...stops after epoch 2" test "$(final stop_reason)" = early_stop

# The counter survives a resume: 2 epochs (1 without improvement) cut by max_steps, then resumed
# with patience 3: it stops after epoch 4, as the uninterrupted run does (a counter starting
# afresh would go on to epoch 5).
run "$DTRAIN" train $CFG $BASE $NEVER --set train.early_stop.patience=3 --set train.epochs=20 \
    --set train.max_steps=8 --set checkpoint.dir="$TMP/res" --json
expect_rc "resume: the first part ends at max_steps" 0
run "$DTRAIN" train $CFG $BASE $NEVER --set train.early_stop.patience=3 --set train.epochs=20 \
    --set checkpoint.dir="$TMP/res" --resume "$TMP/res/last.safetensors" --json
expect_rc "resume: exit 0" 0
check "the resumed run stops after epoch 4 (16 steps), counting on" test "$(final steps)" = 16
check "...on the first part's best epoch" test "$(final early_stop.best_epoch)" = 1
run "$DTRAIN" train $CFG $BASE $NEVER --set train.early_stop.patience=3 --set train.epochs=20 \
    --set checkpoint.dir="$TMP/res" --resume "$TMP/res/last.safetensors" --json
expect_rc "resuming a run that stopped early: exit 0" 0
expect_err "...trains nothing and says why" "the run stopped early \(train_loss did not improve by more than 1000 for 3 epochs.*\): nothing left to train"
check "...its final event says early_stop" test "$(final stop_reason)" = early_stop
run "$DTRAIN" train $CFG $BASE $NEVER --set train.early_stop.patience=4 --set train.epochs=20 \
    --set checkpoint.dir="$TMP/res" --resume "$TMP/res/last.safetensors" --json
check "a larger patience on resume goes on for one more epoch" test "$(final steps)" = 20

# ---- bad values ----
bad() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    run "$DTRAIN" train $CFG $BASE "$@" --dry-run
    expect_rc "$name: exit 2" 2
    expect_err "$name: names the key" "$pat"
    expect_err_lines "$name: one line" 1
}
bad "unknown metric" "train.early_stop.metric: unknown metric \"accuracy\"" --set train.early_stop.metric=accuracy
bad "a test-set metric" "train.early_stop.metric: \"test_accuracy\": the test set is not offered.*val_accuracy" \
    --set train.early_stop.metric=test_accuracy
bad "val metric without a validation split" "train.early_stop.metric: val_loss needs a validation split" \
    --set train.early_stop.metric=val_loss
bad "patience 0" "train.early_stop.patience" --set train.early_stop.patience=0
bad "negative min_delta" "train.early_stop.min_delta" --set train.early_stop.min_delta=-0.1
bad "min_delta as a string" "train.early_stop.min_delta" --set 'train.early_stop.min_delta="x"'
bad "unknown key" "train.early_stop.patient" --set train.early_stop.patient=3
sed 's/^  seed = 1L;.*/  seed = 1L; early_stop = { metric = "train_loss"; paitence = 2; };/' "$CFG" >"$TMP/bad.cfg"
run "$DTRAIN" train "$TMP/bad.cfg" $BASE --dry-run
expect_rc "a misspelt key in the file: exit 2" 2
expect_err "...with file and line" "bad.cfg:[0-9]+: .*train.early_stop.paitence"
sed 's/^  seed = 1L;.*/  seed = 1L; early_stop = 3;/' "$CFG" >"$TMP/bad.cfg"
run "$DTRAIN" train "$TMP/bad.cfg" $BASE --dry-run
expect_rc "early_stop not a group: exit 2" 2
expect_err "...says a group was expected" "train.early_stop: expected a group"
run "$DTRAIN" train $CFG $BASE --set train.early_stop.metric=val_accuracy --set train.epochs=1 \
    --set checkpoint.dir="$TMP/x" --print-config
expect_rc "print-config with a val metric and no split: exit 2" 2

finish
