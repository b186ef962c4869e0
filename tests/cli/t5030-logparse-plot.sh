#!/bin/sh
# gpt-logparse --plot: a standalone SVG that renders.
. "$(dirname "$0")/test-lib.sh"
D=$GPT_ROOT/tests/cli/data/logparse

command -v rsvg-convert >/dev/null 2>&1 && test_set_prereq RSVG

test_expect_success 'an SVG of several logs, rows still on stdout' '
	gpt-logparse --plot curves.svg "$D/gptkit.log" "$D/fleetx.log" "$D/llmc.log" >rows 2>/dev/null &&
	test_line_count = 24 rows &&
	head -c 200 curves.svg | grep -q "<svg xmlns=\"http://www.w3.org/2000/svg\"" &&
	test "$(grep -c "<polyline" curves.svg)" = 6 &&
	grep -q ">gptkit.log</text>" curves.svg &&
	tail -n 1 curves.svg | grep -q "^</svg>$"
'

test_expect_success RSVG 'the SVG renders to a PNG of the stated size' '
	rsvg-convert -o curves.png curves.svg &&
	printf "\211PNG" >magic && head -c 4 curves.png >actual && test_cmp magic actual &&
	# width and height are big-endian at bytes 16..23 of the IHDR chunk
	od -An -tu1 -j16 -N8 curves.png | awk "{ print \$1*16777216+\$2*65536+\$3*256+\$4, \$5*16777216+\$6*65536+\$7*256+\$8 }" >actual &&
	echo "960 696" >expect && test_cmp expect actual
'

test_expect_success RSVG 'a plot with --summary, a log without steps, odd names' '
	: >"a&b<c>.log" &&
	gpt-logparse --summary --plot empty.svg "a&b<c>.log" >/dev/null 2>&1 &&
	grep -q "no data" empty.svg &&
	grep -q "a&amp;b&lt;c&gt;.log" empty.svg &&
	rsvg-convert -o empty.png empty.svg
'

test_expect_success 'an unwritable plot path is an I/O error and leaves no file' '
	test_expect_code 74 gpt-logparse --plot no-such-dir/x.svg "$D/gptkit.log" >/dev/null 2>err &&
	test_grep "^gpt-logparse: error: --plot: cannot write no-such-dir/x.svg: " err &&
	! test -e no-such-dir
'

test_expect_success 'a FIFO, a symbolic link or a directory as the plot is refused before any log is read' '
	mkfifo fifo.svg && ln -s real.svg link.svg && mkdir dir.svg &&
	test_expect_code 64 gpt-logparse --plot fifo.svg "$D/gptkit.log" >rows 2>err &&
	test_grep "^gpt-logparse: error: fifo.svg: is a FIFO, not a regular file; the output would be renamed over it" err &&
	test_expect_code 64 gpt-logparse --plot link.svg "$D/gptkit.log" >>rows 2>err &&
	test_grep "^gpt-logparse: error: link.svg: is a symbolic link \(to real.svg\)" err &&
	test_expect_code 64 gpt-logparse --plot dir.svg "$D/gptkit.log" >>rows 2>err &&
	test_grep "^gpt-logparse: error: dir.svg: is a directory" err &&
	! test -s rows &&
	test -p fifo.svg && test -L link.svg && ! test -e real.svg
'

test_done
