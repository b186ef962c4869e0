# gptkit: one static library (lib/libgpt.a) and thin programs (bin/gpt-*).
#
#   make [CUDA=auto|0|1] [SANITIZE=1] [DEBUG=1]   build everything
#   make deps                                      install build and test dependencies (Debian, as root)
#   make test                                      build and run the test suite (TAP, via prove)
#   make test-gpu                                  GPU tests (skip cleanly without a GPU)
#   make gpu-pack                                  the CUDA build in one archive for a GPU machine
#                                                  without its libraries (tests/gpu/check.sh there)
#   make bench / bench-gpu                         benchmarks (print figures, never part of test)
#   make install PREFIX=/usr/local [DESTDIR=...]   install programs, man pages, completion
#
# Objects live in build/; a change of flags (CUDA, SANITIZE, DEBUG) rebuilds
# everything, so switching variants never mixes objects.

CUDA ?= auto
SANITIZE ?= 0
DEBUG ?= 0
PREFIX ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
PROVE ?= prove
JOBS ?= 2

CC ?= cc
comma := ,
# V=1 shows the full commands.
ifeq ($(V),1)
  Q :=
  say := @:
else
  Q := @
  say := @printf '  %-6s %s\n'
endif
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })

ifeq ($(CUDA),auto)
  ifneq ($(NVCC),)
    WITH_CUDA := 1
  else
    WITH_CUDA := 0
  endif
else ifeq ($(CUDA),1)
  WITH_CUDA := 1
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found in PATH or $(CUDA_HOME)/bin; install the CUDA Toolkit or build with CUDA=0)
  endif
else ifeq ($(CUDA),0)
  WITH_CUDA := 0
else
  $(error CUDA must be auto, 0 or 1, not '$(CUDA)')
endif

PKGS := yaml-0.1 libarchive libpcre2-8 jansson libxxhash
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lyaml -larchive -lpcre2-8 -ljansson -lxxhash)

# OpenBLAS: the OpenMP build, named explicitly so that whichever variant the
# alternatives system picked, GEMM threads and our OpenMP loops share one pool.
OPENBLAS_DIR ?= $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp))
OPENBLAS_INC ?= $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp))
BLAS_LIBS := $(if $(OPENBLAS_DIR),-L$(OPENBLAS_DIR) -Wl$(comma)-rpath$(comma)$(OPENBLAS_DIR)) -lopenblas
OPT := -O2
ifeq ($(DEBUG),1)
  OPT := -O0
endif
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation \
	-fopenmp -pthread -Ilib $(if $(OPENBLAS_INC),-I$(OPENBLAS_INC)) $(PKG_CFLAGS) -DGPT_HAVE_CUDA=$(WITH_CUDA) $(CFLAGS)
LDFLAGS_ALL := -fopenmp -pthread $(LDFLAGS)
LIBS_ALL := $(PKG_LIBS) $(BLAS_LIBS) -lm

ifeq ($(SANITIZE),1)
  CFLAGS_ALL += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS_ALL += -fsanitize=address,undefined
endif

# Hopper SASS (sm_90: H100, H200, GH200) plus compute_80 PTX that other
# GPUs JIT-compile. No kernel uses sm_90a's own instructions (wgmma,
# setmaxnreg), so an sm_90a image would be the same code a second time, and
# ptxas's time on the attention (the build's long pole) doubled; plain sm_90
# also runs on every 9.x device, sm_90a on 9.0 only.
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
NVCCFLAGS_ALL := -std=c++17 $(OPT) -g -Ilib -DGPT_HAVE_CUDA=1 $(NVCC_ARCH) \
	--compiler-options -Wall,-Wextra,-Wno-unused-parameter,-fPIC -Werror all-warnings $(NVCCFLAGS)
ifeq ($(WITH_CUDA),1)
  # --no-as-needed: every program links the CUDA runtime, cuBLAS and NCCL even
  # when it calls none of them yet (the toolchain may default to --as-needed).
  LIBS_ALL += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -Wl,--no-as-needed -lcublasLt -lcublas -lnccl -lcudart -Wl,--as-needed -lstdc++
endif

MODULES := core config text data logs backend cpu comm model train ckpt infer
ifeq ($(WITH_CUDA),1)
  MODULES += cuda
endif

LIB_C := $(sort $(foreach m,$(MODULES),$(wildcard lib/$(m)/*.c)))
LIB_CU := $(if $(filter 1,$(WITH_CUDA)),$(sort $(wildcard lib/cuda/*.cu)))
LIB_OBJ := $(LIB_C:%.c=build/%.o) $(LIB_CU:%.cu=build/%.cu.o)
CMD_C := $(sort $(wildcard cmd/gpt-*.c))
PROGRAMS := $(CMD_C:cmd/%.c=bin/%)
UNIT_C := $(sort $(wildcard tests/unit/test-*.c))
UNIT_BIN := $(UNIT_C:tests/unit/%.c=build/tests/unit/%)
GPU_C := $(if $(filter 1,$(WITH_CUDA)),$(sort $(wildcard tests/gpu/test-*.c)))
GPU_BIN := $(GPU_C:tests/gpu/%.c=build/tests/gpu/%)
GPU_BENCH := $(if $(filter 1,$(WITH_CUDA)),build/bench/gpu-ops)
# prove -j starts tests in this order: the longest first (prove --timer on
# two cores), so that none of them runs alone at the end with a core idle
CLI_LONG := $(wildcard tests/cli/t4063-cuda-emulated.sh tests/cli/t9000-fuzz.sh \
	tests/cli/t4064-gpu-check.sh tests/cli/t4020-train-parallel.sh tests/cli/t4010-train.sh \
	tests/cli/t2030-preprocess-dataset.sh tests/cli/t7030-ckpt-convert.sh)
CLI_REST := $(filter-out $(CLI_LONG),$(sort $(wildcard tests/cli/t[0-9]*.sh)))
CLI_TESTS := $(CLI_LONG) $(CLI_REST)
HELPER := tests/helper/test-tool
MAN := $(sort $(wildcard man/man1/*.1 man/man5/*.5))

.PHONY: all lib programs clean install deps test test-unit test-cli test-gpu gpu-pack bench bench-gpu check-flags
.DEFAULT_GOAL := all
.SECONDARY:

all: lib programs $(HELPER) $(GPU_BENCH)
lib: lib/libgpt.a
programs: $(PROGRAMS)

# Rebuild everything when the flags change (git's GIT-CFLAGS trick).
FLAGS_STAMP := build/FLAGS
FLAGS_NOW := $(CC) $(CFLAGS_ALL) | $(NVCC) $(NVCCFLAGS_ALL) | $(LDFLAGS_ALL) $(LIBS_ALL) | $(WITH_CUDA)
$(FLAGS_STAMP): check-flags
	@:
check-flags:
	@mkdir -p build
	@if [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" != '$(FLAGS_NOW)' ]; then \
		echo '$(FLAGS_NOW)' > $(FLAGS_STAMP); fi

build/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

build/%.cu.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(say) NVCC $<
	$(Q)$(NVCC) $(NVCCFLAGS_ALL) -MMD -MP -c -o $@ $<

lib/libgpt.a: $(LIB_OBJ)
	$(say) AR $@
	@rm -f $@
	$(Q)ar rcs $@ $^

bin/%: build/cmd/%.o lib/libgpt.a
	@mkdir -p bin
	$(say) LINK $@
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $< lib/libgpt.a $(LIBS_ALL)

$(HELPER): build/tests/helper/test-tool.o lib/libgpt.a
	$(say) LINK $@
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $< lib/libgpt.a $(LIBS_ALL)

build/tests/unit/%: build/tests/unit/%.o lib/libgpt.a
	$(say) LINK $@
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $< lib/libgpt.a $(LIBS_ALL)

build/tests/gpu/%: build/tests/gpu/%.o lib/libgpt.a
	$(say) LINK $@
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $< lib/libgpt.a $(LIBS_ALL)

build/bench/gpu-ops: build/bench/gpu/gpu-ops.o lib/libgpt.a
	$(say) LINK $@
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $< lib/libgpt.a $(LIBS_ALL)

-include $(shell find build -name '*.d' 2>/dev/null)

# ---- tests ------------------------------------------------------------------

test: all $(UNIT_BIN)
	$(PROVE) -j$(JOBS) $(CLI_LONG) $(UNIT_BIN) $(CLI_REST)

test-unit: all $(UNIT_BIN)
	$(PROVE) -j$(JOBS) $(UNIT_BIN)

test-cli: all
	$(PROVE) -j$(JOBS) $(CLI_TESTS)

test-gpu: all $(GPU_BIN)
ifeq ($(WITH_CUDA),1)
	$(PROVE) $(GPU_BIN) $(wildcard tests/gpu/t[0-9]*.sh)
else
	@echo "test-gpu: skipped: this build has no CUDA backend (CUDA=0 or no nvcc)"
endif

# The programs and GPU tests with the libraries they need beyond glibc, GCC's
# runtime, cuBLAS and NCCL, for a GPU machine without the build's libraries:
# tests/gpu/check.sh runs the GPU checks there from this archive.
gpu-pack: all $(GPU_BIN)
ifeq ($(WITH_CUDA),1)
	@sh tests/gpu/pack.sh $(PROGRAMS) $(GPU_BIN) $(GPU_BENCH) $(HELPER)
else
	@echo "gpu-pack: this build has no CUDA backend (CUDA=0 or no nvcc)" >&2; exit 1
endif

bench: all
	@sh bench/run.sh

bench-gpu: all
	@sh bench/run-gpu.sh

# ---- installation -----------------------------------------------------------

deps:
	@sh deps/install.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions
	for f in $(PROGRAMS); do install -m 755 $$f $(DESTDIR)$(PREFIX)/bin/ || exit 1; done
	for f in $(wildcard man/man1/*.1); do install -m 644 $$f $(DESTDIR)$(PREFIX)/share/man/man1/ || exit 1; done
	for f in $(wildcard man/man5/*.5); do install -m 644 $$f $(DESTDIR)$(PREFIX)/share/man/man5/ || exit 1; done
	install -m 644 contrib/gptkit.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/gptkit
	for p in $(PROGRAMS:bin/%=%); do \
		ln -sf gptkit $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$p; done
	if [ -d share/gpt2 ]; then install -d $(DESTDIR)$(PREFIX)/share/gptkit/gpt2 && \
		install -m 644 share/gpt2/* $(DESTDIR)$(PREFIX)/share/gptkit/gpt2/; fi

clean:
	rm -rf build bin lib/libgpt.a $(HELPER)
-include tests/fuzz/fuzz.mk
