# dtrain — build, test, install.  See README.md.
#
# Sources are discovered by directory, so a new module is one new file: no list to edit here.
# Unit tests are tests/unit/test_*.c, each its own cmocka binary linked with every object but
# main.o; CLI tests are tests/cli/*.sh; tests/run.sh runs them all and prints the summary line.

PREFIX  ?= /usr/local
CC      ?= cc
PKGS    := libconfig zlib libcurl libcrypto libpng libjpeg
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

# BLAS: Debian's OpenMP build of OpenBLAS, named explicitly with an rpath to its directory, so
# the binary runs it (one thread pool shared with our loops) even when update-alternatives
# points libopenblas.so.0 at the pthread build, as installing the latter does. Without the
# OpenMP build, whatever `pkg-config openblas` gives; nn/kernels/fp32/blas.c then keeps BLAS to one thread
# and splits GEMMs over dtrain's own.
MULTIARCH  := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_OMP   := /usr/lib/$(MULTIARCH)/openblas-openmp
ifneq ($(wildcard $(BLAS_OMP)/libopenblas.so),)
BLAS_CFLAGS := -I/usr/include/$(MULTIARCH)/openblas-openmp
BLAS_LIBS   := -L$(BLAS_OMP) -Wl,-rpath,$(BLAS_OMP) -lopenblas
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas)
BLAS_LIBS   := $(shell pkg-config --libs openblas)
endif

# One binary for any x86-64-v2 CPU (2009 on): the wide kernels (conv AVX-512/AVX2, the
# optimizer's FMA loops) are built per instruction set (the kernel room, below) and picked at
# run time (nn/kernels/isa.h, DTRAIN_ISA), so a binary built on one node runs on every node of a cluster.
# Measured as fast as -march=native on the reference models (BENCHMARKS.md, issue 16);
# `make NATIVE=1` still builds for the build host alone.
ifeq ($(NATIVE),1)
OPT      ?= -O3 -march=native
else
OPT      ?= -O3 -march=x86-64-v2 -mtune=generic
endif
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g $(OPT) -fopenmp \
            -I. -DDTRAIN_VERSION='"$(VERSION)"' $(BLAS_CFLAGS) $(shell pkg-config --cflags $(PKGS))
LDLIBS   += $(BLAS_LIBS) $(shell pkg-config --libs $(PKGS)) -lm -lpthread -lrt
LDFLAGS  += -fopenmp

# Optional MPI communicator (`make MPI=1`): builds with Open MPI's compiler wrapper.
ifeq ($(MPI),1)
CC      := mpicc
CFLAGS  += -DDTRAIN_MPI=1
endif

BUILD   ?= build
LIB_SRC := $(sort $(filter-out %.isa.c,$(wildcard util/*.c data/*.c nn/*.c nn/kernels/*.c \
                                         nn/kernels/*/*.c dist/*.c train/*.c cmd/*.c cmd/bench/*.c)))

# The kernel room (nn/kernels/, docs/kernels.md). A kernel written once and built per
# instruction set is nn/kernels/<family>/NAME.isa.c: it is compiled once per ISA of its ISA set,
# with -DDT_BUILD_<X> and ISA_FLAGS_<isa>, into $(BUILD)/.../NAME.<isa>.o, and DT_ISA_FN
# (nn/kernels/isa_fn.h) gives every build its own symbol names; nn/kernels/isa.c picks the build
# that runs. A file's ISA set is ISA_SET_<NAME> where one is set here, else its folder's:
#   fp32/: generic (the binary's own x86-64-v2), avx2 (AVX2 + FMA), avx512 (AVX-512F);
#   bf16/: ctile (plain C, the tile vocabulary of nn/kernels/bf16/tile.h emulated; runs
#          anywhere), avx512bf16 (each tile product as VDPBF16PS on zmm registers; called only
#          where the CPU has AVX512-BF16) and amx (called only where nn/kernels/bf16/amx.c finds
#          AMX in the CPU and Linux grants the tile state).
# The flags are the ones the kernels' target attributes had, so each build's code is the same.
ISA_SET_fp32          := generic avx2 avx512
ISA_SET_bf16          := ctile avx512bf16 amx
ISA_SET_conv_winograd := avx2 avx512 avx512bf16 # 8 and 16 lanes (+ VDPBF16PS); no generic build
ISA_SET_optim_steps   := generic avx2  # the AVX-512 path runs the avx2 build (isa.c)
ISA_SET_conv_bf16_layout := avx512bf16 amx # AVX-512 layout passes; other paths run conv_bf16.c's C
ISA_SET_conv_s2_bf16_layout := avx512bf16 amx # the same for stride 2 (conv_s2_bf16.c's C)
ISA_FLAGS_generic := -DDT_BUILD_GENERIC
ISA_FLAGS_avx2    := -DDT_BUILD_AVX2 -mavx2 -mfma
ISA_FLAGS_avx512  := -DDT_BUILD_AVX512 -mavx512f
ISA_FLAGS_ctile   := -DDT_BUILD_CTILE
ISA_FLAGS_avx512bf16 := -DDT_BUILD_AVX512BF16 -mavx512f -mavx512bw -mavx512vl -mavx512dq \
                        -mavx512bf16
ISA_FLAGS_amx     := -DDT_BUILD_AMX -mamx-tile -mamx-bf16 -mavx512f -mavx512bw -mavx512vl \
                     -mavx512dq -mavx512bf16
# util/ and dist/ have array loops of their own built the same way (the bf16 conversions and
# the bf16 all-reduce's sums, util/vec_isa.h), at the fp32 levels; AVX-512 with BW/VL/DQ too,
# which dt_cpu_features' avx512 always includes, for 16-bit packing at full width.
ISA_SET_util := generic avx2 avx512
ISA_SET_dist := generic avx2 avx512
ISA_BUILDS := $(sort $(ISA_SET_fp32) $(ISA_SET_bf16))
ISA_SRC    := $(sort $(wildcard nn/kernels/*/*.isa.c util/*.isa.c dist/*.isa.c))
isa_set     = $(or $(ISA_SET_$(notdir $(1:.isa.c=))),$(ISA_SET_$(notdir $(patsubst %/,%,$(dir $(1))))))
ISA_OBJ    := $(foreach src,$(ISA_SRC),$(foreach isa,$(call isa_set,$(src)),$(BUILD)/$(src:.isa.c=.$(isa).o)))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(ISA_OBJ)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TEST_CFLAGS = $(shell pkg-config --cflags cmocka)
TEST_LIBS   = $(shell pkg-config --libs cmocka)

.PHONY: all test unit check-asan install deps demo clean format format-check dtrain-mpi fuzz \
        fuzz-bins

all: dtrain

dtrain: $(BUILD)/main.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The same program with the MPI communicator (--backend mpi), in its own tree: build-mpi/dtrain.
dtrain-mpi:
	@$(MAKE) --no-print-directory MPI=1 BUILD=build-mpi build-mpi/dtrain

$(BUILD)/dtrain: $(BUILD)/main.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

define isa_rule
$$(BUILD)/%.$(1).o: %.isa.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(ISA_FLAGS_$(1)) -MMD -MP -c -o $$@ $$<
endef
$(foreach isa,$(ISA_BUILDS),$(eval $(call isa_rule,$(isa))))

# sqrtf in the optimizer loops vectorises only without errno (nn/kernels/fp32/optim_steps.isa.c);
# nn/optim.c keeps the flag it was always built with.
$(BUILD)/nn/kernels/fp32/optim_steps.%.o: CFLAGS += -fno-math-errno
$(BUILD)/nn/optim.o: CFLAGS += -fno-math-errno
# batchnorm's AVX-512 loops convert and mask with AVX-512 BW/VL/DQ as well as F.
$(BUILD)/nn/kernels/fp32/batchnorm.avx512.o: CFLAGS += -mavx512bw -mavx512vl -mavx512dq
$(BUILD)/util/%.avx512.o $(BUILD)/dist/%.avx512.o: CFLAGS += -mavx512bw -mavx512vl -mavx512dq

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(TEST_LIBS) $(LDLIBS)

unit: $(UNIT_BIN)

# `make test`: checks its own needs first (tests/check-deps.sh installs them when root).
test:
	@sh tests/check-deps.sh
	@$(MAKE) --no-print-directory dtrain unit
	@if command -v mpicc >/dev/null; then $(MAKE) --no-print-directory dtrain-mpi; fi
	@BUILD=$(BUILD) sh tests/run.sh

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, in a separate build tree,
# and tests/cli/predict.sh against dtrain-asan: predict's file walk, decode and forward pass
# (train/predict*.c) are reached through the command (the folder loader and the decoders are
# covered by test_image).
check-asan:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer \
	  -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	  LDFLAGS="-fopenmp -fsanitize=address,undefined" dtrain-asan unit
	@BUILD=build-asan DTRAIN_BIN=./build-asan/dtrain-asan ASAN_OPTIONS=detect_leaks=1 \
	  UNIT_ONLY=1 CLI_ALSO=predict sh tests/run.sh

dtrain-asan: $(BUILD)/main.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $(BUILD)/dtrain-asan $^ $(LDLIBS)

# Fuzzing: libFuzzer harnesses (tests/fuzz/fuzz_*.c) built with clang, ASan and UBSan into
# build-fuzz/, each run FUZZ_SECONDS from a generated seed corpus (tests/fuzz/run.sh).
FUZZ_SECONDS ?= 60
FUZZ_BIN := $(patsubst tests/fuzz/%.c,build-fuzz/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))

fuzz:
	@$(MAKE) --no-print-directory CC=clang BUILD=build-fuzz \
	  OPT="-O1 -g -fno-omit-frame-pointer -Wno-error -Wno-pass-failed -fsanitize=address,undefined,fuzzer-no-link" \
	  LDFLAGS="-fopenmp -fsanitize=address,undefined" fuzz-bins
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS)

fuzz-bins: $(FUZZ_BIN)

build-fuzz/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_common.h $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/fuzz -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

# Kernel benchmarks (bench/conv_kernels.c, bench/conv_bf16.c) linked from the same objects as
# dtrain; bench/Makefile forwards here.
$(BUILD)/bench/%: bench/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

install: dtrain
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/dtrain/configs
	install -m 755 dtrain $(DESTDIR)$(PREFIX)/bin/dtrain
	install -m 644 configs/*.cfg $(DESTDIR)$(PREFIX)/share/dtrain/configs/

deps:
	@sh tests/check-deps.sh --install

# The newcomer's first command: dependencies, build, Fashion-MNIST from Debian's package (no
# network), one epoch of the reference ConvNet.
demo:
	@sh tests/check-deps.sh --install
	@$(MAKE) --no-print-directory dtrain
	./dtrain fetch fashion-mnist
	./dtrain train configs/fashion-convnet.cfg

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-mpi build-fuzz dtrain

-include $(LIB_OBJ:.o=.d) $(BUILD)/main.d
