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

# The user's OPENBLAS_CORETYPE is kept, and said
run env OPENBLAS_CORETYPE=Haswell "$DTRAIN" train $ARGS --set train.max_steps=1 \
    --set checkpoint.dir="$TMP/ct"
expect_rc "OPENBLAS_CORETYPE set: exit 0" 0
expect_err "OPENBLAS_CORETYPE set: kept and said" "Haswell kernels \\(OPENBLAS_CORETYPE=Haswell set by the user\\)"

finish
