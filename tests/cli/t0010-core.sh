#!/bin/sh
# lib/core through test-tool: atomic files, checksums, log lines, progress.
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'atomic write creates the file and leaves no temporary' '
	test-tool atomic-write out.txt hello &&
	printf hello >expect &&
	test_cmp expect out.txt &&
	test "$(ls -A | grep -c "^\.out\.txt\.tmp")" = 0
'

test_expect_success 'an aborted atomic write leaves the old file as it was' '
	test-tool atomic-abort out.txt changed &&
	test_cmp expect out.txt &&
	test "$(ls -A | grep -c tmp)" = 0
'

test_expect_success 'an atomic write into a read-only directory fails and says where' '
	mkdir ro && test-tool atomic-write ro/f old &&
	chmod a-w ro &&
	if [ "$(id -u)" = 0 ]; then
		echo "root ignores permissions; checking the missing-directory case instead" &&
		test_expect_code 74 test-tool atomic-write missing/f x 2>err
	else
		test_expect_code 74 test-tool atomic-write ro/f new 2>err
	fi &&
	chmod u+w ro &&
	test_grep "^test-tool: error: .*(missing|ro)/" err &&
	printf old >expect-ro && test_cmp expect-ro ro/f
'

test_expect_success 'xxh3 of a file matches a known value' '
	printf "" >empty &&
	test "$(test-tool xxh3 empty)" = 2d06800538d394c2
'

test_expect_success 'a missing input exits 66 with the path in the message' '
	test_expect_code 66 test-tool xxh3 no-such-file 2>err &&
	test_grep "^test-tool: error: no-such-file: No such file" err
'

test_expect_success 'log lines have the FleetX header and no colour off a terminal' '
	test-tool step-line 2>log &&
	test_grep "^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}\] \[    INFO\] - global step 1, epoch: 0, batch: 0, loss: 11.083364487, avg_reader_cost: 0.23392 sec, avg_batch_cost: 2.05344 sec, speed: 0.49 step/s, ips_total: 3989 tokens/s, ips: 499 tokens/s, learning rate: 5.55556e-09$" log &&
	! grep -q "$(printf "\033")" log
'

test_expect_success 'log lines are coloured on a terminal unless NO_COLOR is set' '
	(unset NO_COLOR; script -qec "test-tool log warning hi" /dev/null) >tty.log &&
	grep -q "$(printf "\033")\[33m\[.*\] \[ WARNING\]$(printf "\033")\[0m - hi" tty.log &&
	script -qec "test-tool log info hi" /dev/null >tty2.log &&
	! grep -q "$(printf "\033")" tty2.log
'

test_expect_success 'progress is sparse plain lines off a terminal and a bar on one' '
	GPT_PROGRESS=0 test-tool progress 1000000 250000 2>plain &&
	test_grep "^work \[#####.*\] +[0-9]+% .*MB.*/s, ETA" plain &&
	! grep -q "$(printf "\r")" plain &&
	GPT_PROGRESS=1 test-tool progress 1000000 250000 2>bar &&
	grep -q "$(printf "\r")" bar
'

test_expect_success 'the build describes its backends' '
	test-tool backends >b &&
	test_grep "^cpu: OpenBLAS" b &&
	test_grep "^cuda: " b
'

test_expect_success 'a CUDA build links cudart, cuBLAS(Lt) and NCCL into the programs' '
	if grep -q "^cuda: not built" b; then
		echo "CPU-only build: nothing to check"
	else
		for p in "$GPT_ROOT"/tests/helper/test-tool "$GPT_ROOT"/bin/gpt-*; do
			[ -e "$p" ] || continue
			ldd "$p" >libs &&
			for l in libcudart libcublasLt libcublas libnccl; do
				grep -q "$l\.so" libs || { echo "$p does not link $l" >&2; exit 1; }
			done
		done
	fi
'

test_done
