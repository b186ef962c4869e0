# libFuzzer harnesses (tests/fuzz/fuzz-*.c), included from the Makefile.
#
#   make fuzz-build                    build every harness into build/fuzz/
#   make fuzz [FUZZ_SECONDS=60]        build, then run each harness for that
#                                      long on a copy of its seed corpus and
#                                      print executions, coverage and crashes
#   make fuzz FUZZ_ONLY='config idx'   only these harnesses
#
# The harnesses are built with clang (-fsanitize=fuzzer,address,undefined)
# from the library sources of the CPU modules, compiled again into
# build/fuzz/obj: never the gcc lib/libgpt.a, and never CUDA.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ONLY ?=
FUZZ_DIR := build/fuzz
FUZZ_MODULES := core config text data logs backend cpu model ckpt infer
FUZZ_LIB_C := $(sort $(foreach m,$(FUZZ_MODULES),$(wildcard lib/$(m)/*.c)))
FUZZ_LIB_OBJ := $(FUZZ_LIB_C:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz-*.c))
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/%.c=%)
FUZZ_BIN := $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -gline-tables-only -Wall -Wextra -Wno-unused-parameter \
	-Wno-unknown-pragmas $(FUZZ_SAN) -fsanitize=fuzzer-no-link -fopenmp -pthread -Ilib \
	$(if $(OPENBLAS_INC),-I$(OPENBLAS_INC)) $(PKG_CFLAGS) -DGPT_HAVE_CUDA=0
FUZZ_LIBS := $(PKG_LIBS) $(BLAS_LIBS) -lm

.PHONY: fuzz fuzz-build

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@sh tests/fuzz/run.sh -t $(FUZZ_SECONDS) $(if $(FUZZ_ONLY),$(FUZZ_ONLY),$(FUZZ_NAMES:fuzz-%=%))

# The AVX-512 kernels' unrolled intrinsics take clang over a minute under
# ASan and UBSan at -O1 (two seconds without them); at -O0 they compile in
# seconds, still instrumented, and the harnesses only reach them for a few
# tiny rows.
$(FUZZ_DIR)/obj/lib/infer/qkernel_avx512.o: FUZZ_CFLAGS += -O0

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(say) CLANG $<
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_DIR)/libgpt-fuzz.a: $(FUZZ_LIB_OBJ)
	$(say) AR $@
	@rm -f $@
	$(Q)ar rcs $@ $^

$(FUZZ_DIR)/fuzz-%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz-%.o $(FUZZ_DIR)/libgpt-fuzz.a
	$(say) LINK $@
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -fopenmp -pthread -o $@ $< $(FUZZ_DIR)/libgpt-fuzz.a $(FUZZ_LIBS)
