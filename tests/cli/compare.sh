# bench/compare.py's precision axis and bench/torch_ref.py's --precision (issue 30): with
# --precision fp32,bf16 the training table has a precision column, one row per precision with
# that precision's dtrain / PyTorch ratio, and dtrain's and PyTorch's bf16 / fp32 ratios on the
# bf16 rows; the default (fp32) prints the table without the precision column, as before.
# torch_ref.py --precision bf16 trains under torch.autocast('cpu', dtype=torch.bfloat16) and
# records its precision; an op that autocast cannot run in bfloat16 ends it with one line naming
# the module (exit 1), with DDP too; bad values are usage errors (exit 2). Without torch, the
# PyTorch side is skipped (--skip-torch) and the dtrain side checked alone. --dtrain-set passes
# a --set to every dtrain run.
. tests/cli/lib.sh
PY=/usr/bin/python3
NUM='[0-9][0-9,]*'
RATIO='[0-9]+\.[0-9]{2}x'

run $PY bench/compare.py --tiny --precision fp16
expect_rc "compare.py --precision fp16: usage error" 2
expect_err "... names the value and the known ones" "unknown precision 'fp16' \\(known: fp32, bf16\\)"

if $PY -c 'import torch' 2>/dev/null; then
    HAVE_TORCH=1
    SKIP=
else
    HAVE_TORCH=
    SKIP=--skip-torch
fi

# ---- the side-by-side table, both precisions (ConvNet on a generated fixture, 3 steps) ----
run $PY bench/compare.py --tiny --models convnet --grid 1x1 --precision fp32,bf16 \
    --no-allreduce $SKIP
expect_rc "compare.py --tiny --precision fp32,bf16: exit 0" 0
expect_out "... the header has the precision and bf16 / fp32 columns" \
    "^\\| instances x threads \\| precision \\| dtrain samples/s \\| PyTorch samples/s \\| ratio \\| dtrain test acc \\| PyTorch test acc \\| dtrain bf16 / fp32 \\| PyTorch bf16 / fp32 \\|$"
expect_out "... names PyTorch's autocast" "torch.autocast\\('cpu', dtype=torch.bfloat16\\)"
if [ -n "$HAVE_TORCH" ]; then
    expect_out "... an fp32 row with both sides and their ratio" \
        "^\\| 1 x 1 \\| fp32 \\| $NUM \\| $NUM \\| $RATIO \\| - \\| - \\|  \\|  \\|$"
    expect_out "... a bf16 row with both sides, their ratio and each side's bf16 / fp32" \
        "^\\| 1 x 1 \\| bf16 \\| $NUM \\| $NUM \\| $RATIO \\| - \\| - \\| $RATIO \\| $RATIO \\|$"
else
    skip "compare.py: the PyTorch columns" "/usr/bin/python3 has no torch"
    expect_out "... without torch: the bf16 row has dtrain's side and bf16 / fp32" \
        "^\\| 1 x 1 \\| bf16 \\| $NUM \\| - \\| - \\| - \\| - \\| $RATIO \\| - \\|$"
fi

# ---- --dtrain-set: a --set for every dtrain run (train.bf16_winograd in the bf16 sitting) ----
run $PY bench/compare.py --tiny --models convnet --grid 1x1 --precision bf16 --no-allreduce \
    --skip-torch --dtrain-set train.bf16_winograd=true
expect_rc "compare.py --dtrain-set train.bf16_winograd=true: exit 0" 0
expect_err "... dtrain runs with the --set" "dtrain bench .* --set train.bf16_winograd=true"
expect_out "... and measures" "^\\| 1 x 1 \\| bf16 \\| $NUM \\|"
run $PY bench/compare.py --tiny --models convnet --grid 1x1 --precision bf16 --no-allreduce \
    --skip-torch --dtrain-set train.no_such=1
expect_err "... a bad key: dtrain's one-line error is shown" "unknown key"

# ---- the default: fp32 alone, no precision column ----
run $PY bench/compare.py --tiny --models convnet --grid 1x1 --no-allreduce $SKIP
expect_rc "compare.py --tiny (fp32 default): exit 0" 0
expect_out "... the table as before, without a precision column" \
    "^\\| instances x threads \\| dtrain samples/s \\| PyTorch samples/s \\| ratio \\| dtrain test acc \\| PyTorch test acc \\|$"
check "... and no autocast note" sh -c "! grep -q autocast '$TMP/out'"

if [ -z "$HAVE_TORCH" ]; then
    skip "torch_ref.py --precision" "/usr/bin/python3 has no torch"
    finish
    exit
fi

# ---- torch_ref.py ----
FIX="$TMP/fashion"
$PY tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 100
run $PY bench/torch_ref.py convnet --steps 2 --precision bf16 --data "$FIX" --eval
expect_rc "torch_ref.py convnet --precision bf16: exit 0" 0
expect_out "... its JSON records the precision" '"precision": "bf16"'
run $PY bench/torch_ref.py convnet --steps 2 --data "$FIX"
expect_out "... fp32 by default" '"precision": "fp32"'
run $PY bench/torch_ref.py convnet --precision fp16
expect_rc "torch_ref.py --precision fp16: usage error" 2
run $PY bench/torch_ref.py allreduce --precision bf16
expect_rc "torch_ref.py allreduce --precision bf16: usage error" 2
expect_err "... says why" "--precision applies to the training models"

# An op autocast cannot run in bfloat16, as torch's own kernels refuse one ("... not implemented
# for 'BFloat16'"), put after the ConvNet's first ReLU; 1 process, then DDP over 2.
cat >"$TMP/unsupported.py" <<'EOF'
import sys
import torch, torch.nn as nn
sys.path.insert(0, "bench")
import torch_ref


class NoBf16(nn.Module):
    def forward(self, x):
        if x.dtype == torch.bfloat16:
            raise RuntimeError("\"no_bf16_op\" not implemented for 'BFloat16'")
        return x


class ConvNetWithIt(torch_ref.ConvNet):
    def __init__(self):
        super().__init__()
        layers = list(self.layers)
        self.layers = nn.Sequential(*layers[:2], NoBf16(), *layers[2:])


torch_ref.ConvNet = ConvNetWithIt
sys.argv = ["torch_ref.py"] + sys.argv[1:]
sys.exit(torch_ref.main())
EOF
for procs in 1 2; do
    run $PY "$TMP/unsupported.py" convnet --steps 2 --procs $procs --precision bf16 --data "$FIX"
    expect_rc "an op autocast cannot run, $procs process(es): exit 1" 1
    expect_err "... names the model, torch, the module and torch's message" \
        "^torch_ref.py: convnet: the CPU autocast of torch [^ ]+ cannot train this model in bfloat16: the forward of layers.2 \\(NoBf16\\) raised: \"no_bf16_op\" not implemented for 'BFloat16'$"
    expect_err_lines "... in one line" 1
done
run $PY "$TMP/unsupported.py" convnet --steps 2 --data "$FIX"
expect_rc "... the same model in fp32 trains (exit 0)" 0
finish
