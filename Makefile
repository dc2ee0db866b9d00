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
# OpenMP build, whatever `pkg-config openblas` gives; nn/blas.c then keeps BLAS to one thread
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
# optimizer's FMA loops) carry their own target attributes and are picked at run time
# (nn/isa.h, DTRAIN_ISA), so a binary built on one node runs on every node of a cluster.
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
                                         dist/*.c train/*.c cmd/*.c cmd/bench/*.c)))

# Kernels written once and built per instruction set: each nn/kernels/*.isa.c is compiled
# once per entry of ISA_BUILDS with that entry's flags, and DT_ISA_FN (nn/kernels/isa_fn.h)
# gives every build its own symbol names. "ctile" is plain C (the tile vocabulary of
# nn/kernels/tile.h emulated) and runs anywhere; "amx" is called only where nn/kernels/amx.c
# finds AMX in the CPU and Linux grants the tile state.
ISA_BUILDS      := ctile amx
ISA_FLAGS_ctile := -DDT_ISA_CTILE
ISA_FLAGS_amx   := -DDT_ISA_AMX -mamx-tile -mamx-bf16 -mavx512f -mavx512bw -mavx512vl \
                   -mavx512dq -mavx512bf16
ISA_SRC := $(sort $(wildcard nn/kernels/*.isa.c))
ISA_OBJ := $(foreach isa,$(ISA_BUILDS),$(ISA_SRC:%.isa.c=$(BUILD)/%.$(isa).o))
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

# sqrtf in the optimizer loops vectorises only without errno (see nn/optim.c).
$(BUILD)/nn/optim.o: CFLAGS += -fno-math-errno

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

# Kernel benchmarks linked from the same objects as dtrain (bench/Makefile has the older ones).
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
