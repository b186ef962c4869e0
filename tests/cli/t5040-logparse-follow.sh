#!/bin/sh
# gpt-logparse --follow: rows of a growing log appear as lines are appended.
. "$(dirname "$0")/test-lib.sh"
D=$GPT_ROOT/tests/cli/data/logparse

# wait_rows N FILE: wait up to 10 s for FILE to have N lines.
wait_rows () {
	i=0
	while [ "$(wc -l <"$2")" -lt "$1" ] && [ $i -lt 100 ]; do
		sleep 0.1; i=$((i + 1))
	done
	test_line_count = "$1" "$2"
}

# stop_follow: stops the gpt-logparse --follow started as $pid.
stop_follow () {
	kill $pid || :
	wait $pid || :
}

# steps_are "1 2 3": the steps of the rows in out, in order.
steps_are () {
	cut -f 3 out | sed 1d | tr "\n" " " >actual &&
	printf "%s " "$1" >expect && test_cmp expect actual
}

test_expect_success 'rows appear as the log grows; a partial line waits for its newline' '
	sed -n 2,3p "$D/fleetx.log" >run.log
	: >out
	gpt-logparse --follow run.log >out 2>err &
	pid=$!
	good=0
	line=$(sed -n 4p "$D/fleetx.log")
	wait_rows 3 out &&
	printf "%s" "$(echo "$line" | cut -c 1-100)" >>run.log &&
	sleep 0.5 &&
	test_line_count = 3 out &&
	printf "%s\n" "$(echo "$line" | cut -c 101-)" >>run.log &&
	wait_rows 4 out &&
	sed -n 5,6p "$D/fleetx.log" >>run.log &&
	wait_rows 6 out &&
	good=1
	stop_follow
	test $good = 1 &&
	steps_are "1 2 3 4 5"
'

test_expect_success 'a followed log that is truncated is read again from its start' '
	sed -n 2,4p "$D/fleetx.log" >run2.log
	: >out
	gpt-logparse --follow run2.log >out 2>/dev/null &
	pid=$!
	good=0
	wait_rows 4 out &&
	sed -n 2p "$D/gptkit.log" >run2.log &&
	wait_rows 5 out &&
	good=1
	stop_follow
	test $good = 1 &&
	tail -n 1 out | cut -f 3,7 >actual &&
	printf "1\t1995\n" >expect && test_cmp expect actual &&
	sed -n 4p out | cut -f 3 >actual && echo 3 >expect && test_cmp expect actual
'

test_expect_success 'a log rewritten longer than before between two looks is read again too' '
	sed -n 2,3p "$D/fleetx.log" >run3.log
	: >out
	gpt-logparse --follow run3.log >out 2>/dev/null &
	pid=$!
	good=0
	wait_rows 3 out &&
	sed -n 2,6p "$D/gptkit.log" >new.log &&
	cat new.log >run3.log &&
	wait_rows 7 out &&
	good=1
	stop_follow
	test $good = 1 &&
	steps_are "1 2 1 2 3 4"
'

test_expect_success 'a followed log: a line another writer ran into is skipped, the rows go on' '
	sed -n 2p "$D/fleetx.log" >run4.log
	: >out
	gpt-logparse --follow run4.log >out 2>/dev/null &
	pid=$!
	good=0
	wait_rows 2 out &&
	line=$(sed -n 3p "$D/fleetx.log") &&
	printf "%s" "$(echo "$line" | cut -c 1-90)" >>run4.log &&
	sleep 0.3 &&
	sed -n 4p "$D/fleetx.log" >>run4.log &&
	echo "$line" | cut -c 91- >>run4.log &&
	sed -n 5p "$D/fleetx.log" >>run4.log &&
	wait_rows 3 out &&
	good=1
	stop_follow
	test $good = 1 &&
	steps_are "1 4"
'

test_expect_success 'following a pipe ends with the pipe' '
	sed -n 2,4p "$D/fleetx.log" | gpt-logparse --follow >out 2>/dev/null &&
	test_line_count = 4 out
'

test_expect_success 'following a pipe: its rows appear as its lines come, not at its end' '
	mkfifo pipe &&
	: >out
	gpt-logparse --follow <pipe >out 2>/dev/null &
	pid=$!
	good=0
	exec 3>pipe &&
	sed -n 2,3p "$D/fleetx.log" >&3 &&
	wait_rows 3 out &&
	sed -n 4p "$D/fleetx.log" >&3 &&
	wait_rows 4 out &&
	good=1
	exec 3>&-
	wait $pid &&
	test $good = 1 &&
	steps_are "1 2 3"
'

test_expect_success 'following two logs from a directory' '
	mkdir log
	: >log/workerlog.0
	: >log/workerlog.1
	: >out
	gpt-logparse -f log >out 2>/dev/null &
	pid=$!
	good=0
	wait_rows 1 out &&
	sed -n 2p "$D/fleetx.log" >>log/workerlog.1 &&
	wait_rows 2 out &&
	sed -n 2p "$D/gptkit.log" >>log/workerlog.0 &&
	wait_rows 3 out &&
	good=1
	stop_follow
	test $good = 1 &&
	cut -f 1 out | sed 1d >actual &&
	printf "log/workerlog.1\nlog/workerlog.0\n" >expect && test_cmp expect actual
'

test_expect_success 'following a directory: worker logs that appear later are read, each row once' '
	mkdir later
	: >out
	gpt-logparse -f later >out 2>err &
	pid=$!
	good=0
	wait_rows 1 out &&
	sed -n 2,3p "$D/fleetx.log" >later/workerlog.1 &&
	wait_rows 3 out &&
	sed -n 2p "$D/gptkit.log" >later/workerlog.0 &&
	wait_rows 4 out &&
	sed -n 4p "$D/fleetx.log" >>later/workerlog.1 &&
	sed -n 3p "$D/gptkit.log" >>later/workerlog.0 &&
	wait_rows 6 out &&
	sleep 0.5 &&
	good=1
	stop_follow
	test $good = 1 &&
	test_line_count = 6 out &&
	cut -f 1,3 out | sed 1d | sort >actual &&
	printf "later/workerlog.0\t1\nlater/workerlog.0\t2\nlater/workerlog.1\t1\nlater/workerlog.1\t2\nlater/workerlog.1\t3\n" >expect &&
	test_cmp expect actual &&
	test ! -s err
'

test_expect_success 'following a directory that is removed and made again: the follower goes on and reads the new logs' '
	mkdir gone && sed -n 2p "$D/fleetx.log" >gone/workerlog.0 &&
	: >out
	gpt-logparse -f gone >out 2>err &
	pid=$!
	good=0
	wait_rows 2 out &&
	rm -r gone &&
	sleep 0.5 &&
	mkdir gone &&
	sed -n 2,3p "$D/gptkit.log" >gone/workerlog.1 &&
	wait_rows 4 out &&
	good=1
	stop_follow
	test $good = 1 &&
	test ! -s err &&
	cut -f 1,3 out | sed 1d >actual &&
	printf "gone/workerlog.0\t1\ngone/workerlog.1\t1\ngone/workerlog.1\t2\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'without --follow, a directory with no workerlog files is still refused' '
	mkdir none &&
	test_expect_code 66 gpt-logparse none 2>err &&
	test_grep "no workerlog" err
'

test_done
