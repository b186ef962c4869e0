#!/bin/sh
# The libFuzzer harnesses of tests/fuzz: built with clang (make fuzz-build,
# reused when up to date), each replays its seed corpus and every input that
# once crashed it (tests/fuzz/regress/NAME/), then fuzzes for a few seconds
# from a fixed seed. Skips when clang or its libFuzzer runtime is missing.
. "$(dirname "$0")/test-lib.sh"

FUZZ_CC=${FUZZ_CC:-clang}
fuzz_skip () {
	echo "1..0 # SKIP $1"
	cd / && rm -rf "$GPT_TRASH"
	exit 0
}
command -v "$FUZZ_CC" >/dev/null 2>&1 ||
	fuzz_skip "no $FUZZ_CC (install clang and libclang-rt-14-dev, or run 'make deps')"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >probe.c
"$FUZZ_CC" -fsanitize=fuzzer,address,undefined probe.c -o probe >probe.log 2>&1 ||
	fuzz_skip "$FUZZ_CC cannot link -fsanitize=fuzzer: no libFuzzer runtime (Debian: libclang-rt-14-dev)"

# The sub-make is not part of the make that may have started this test.
unset MAKEFLAGS MFLAGS MAKELEVEL
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# checkpoints are fsynced: keep the harnesses' scratch files in memory
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	mkdir -p /dev/shm/"$(basename "$GPT_TRASH")" && TMPDIR=/dev/shm/$(basename "$GPT_TRASH")
	export TMPDIR
fi

test_expect_success 'the harnesses build with clang (make fuzz-build)' '
	make -s -C "$GPT_ROOT" -j2 FUZZ_CC="$FUZZ_CC" fuzz-build >build.log 2>&1 ||
		{ cat build.log; false; }
'

FUZZ_DIR=$GPT_ROOT/build/fuzz
for src in "$GPT_ROOT"/tests/fuzz/fuzz-*.c; do
	name=$(basename "$src" .c)
	name=${name#fuzz-}
	test_expect_success "fuzz-$name: the seed corpus and past crashes run clean" "
		\"\$FUZZ_DIR/fuzz-$name\" -runs=0 \"\$GPT_ROOT/tests/fuzz/corpus/$name\" \
			>replay-$name.log 2>&1 ||
			{ tail -n 40 replay-$name.log; false; }
		for f in \"\$GPT_ROOT/tests/fuzz/regress/$name\"/*; do
			[ -f \"\$f\" ] || continue
			\"\$FUZZ_DIR/fuzz-$name\" \"\$f\" >regress-$name.log 2>&1 ||
				{ echo \"\$f\"; tail -n 40 regress-$name.log; false; }
		done
	"
	test_expect_success "fuzz-$name: 5 seconds of fuzzing find nothing" "
		mkdir -p corpus-$name art-$name &&
		cp \"\$GPT_ROOT/tests/fuzz/corpus/$name\"/* corpus-$name/ &&
		dict= &&
		if [ -f \"\$GPT_ROOT/tests/fuzz/$name.dict\" ]; then dict=-dict=\$GPT_ROOT/tests/fuzz/$name.dict; fi &&
		\"\$FUZZ_DIR/fuzz-$name\" -seed=1 -max_total_time=5 -timeout=25 -rss_limit_mb=2560 \
			-max_len=65536 -artifact_prefix=art-$name/ \$dict corpus-$name >run-$name.log 2>&1 ||
			{ tail -n 40 run-$name.log; false; }
	"
done

[ -n "${TMPDIR:-}" ] && case "$TMPDIR" in /dev/shm/gptkit-*) rm -rf "$TMPDIR" ;; esac
test_done
