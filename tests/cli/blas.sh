# The BLAS dtrain runs: the OpenMP build of OpenBLAS through the binary's rpath even where
# update-alternatives points libopenblas.so.0 at the pthread build; forced onto the pthread
# build (LD_LIBRARY_PATH), BLAS keeps to one thread, dtrain splits the GEMMs itself, and the
# run trains to the same weights within float rounding; --verbose says which.
. tests/cli/lib.sh

FIX="$TMP/fix"
/usr/bin/python3 tests/fixtures/mkdata.py idx "$FIX" --train 256 --test 64
PTHREAD_DIR=/usr/lib/$(cc -print-multiarch)/openblas-pthread
ARGS="configs/fashion-convnet.cfg --threads 2 --set data.dir=$FIX --set train.epochs=2 --verbose"

run "$DTRAIN" train $ARGS --set checkpoint.dir="$TMP/omp"
expect_rc "default: exit 0" 0
expect_err "default: the OpenMP build, named in --verbose" "^dtrain: BLAS: openmp threading, [A-Za-z]+ kernels \\("
check "the binary carries an rpath to the OpenMP build" sh -c \
    "readelf -d '$DTRAIN' | grep -Eq 'R(UN)?PATH.*openblas-openmp'"

if [ -e "$PTHREAD_DIR/libopenblas.so.0" ]; then
    run env LD_LIBRARY_PATH="$PTHREAD_DIR" "$DTRAIN" train $ARGS --set checkpoint.dir="$TMP/pth"
    expect_rc "pthread build: exit 0" 0
    expect_err "pthread build: named in --verbose" "^dtrain: BLAS: pthreads threading, [A-Za-z]+ kernels"
    check "pthread build: the same weights within float rounding" /usr/bin/python3 \
        tests/tools/compare_weights.py --rtol 1e-4 "$TMP/omp/last.safetensors" "$TMP/pth/last.safetensors"
else
    skip "pthread build" "libopenblas0-pthread is not installed"
fi

# An OpenBLAS that does not know this CPU (0.3.21 on a newer Xeon picks its Prescott kernels):
# a preloaded openblas_get_corename() says "Prescott", and dtrain re-executes itself once with
# OPENBLAS_CORETYPE set to the best kernels cpuid allows, then says so in --verbose.
if grep -qw avx2 /proc/cpuinfo && cc -shared -fPIC -o "$TMP/prescott.so" -x c - <<'EOF2'
const char *openblas_get_corename(void) { return "Prescott"; }
EOF2
then
    run env -u OPENBLAS_CORETYPE LD_PRELOAD="$TMP/prescott.so" "$DTRAIN" train $ARGS \
        --set train.max_steps=1 --set checkpoint.dir="$TMP/reexec"
    expect_rc "OpenBLAS on old kernels: exit 0" 0
    expect_err "... re-executed with better kernels, and said" \
        "re-executed: OpenBLAS chose Prescott \\(SSE\\) but the CPU has (AVX2|AVX-512): (SkylakeX|Haswell|Zen) kernels instead"
    expect_err_lines "... one process's output (no second start line)" \
        "$(env -u OPENBLAS_CORETYPE "$DTRAIN" train $ARGS --set train.max_steps=1 \
            --set checkpoint.dir="$TMP/reexec2" 2>&1 >/dev/null | wc -l)"
else
    skip "re-execution on old kernels" "no AVX2 here, or no C compiler for the shim"
fi

# The user's OPENBLAS_CORETYPE is kept, and said
run env OPENBLAS_CORETYPE=Haswell "$DTRAIN" train $ARGS --set train.max_steps=1 \
    --set checkpoint.dir="$TMP/ct"
expect_rc "OPENBLAS_CORETYPE set: exit 0" 0
expect_err "OPENBLAS_CORETYPE set: kept and said" "Haswell kernels \\(OPENBLAS_CORETYPE=Haswell set by the user\\)"

finish
