#!/bin/sh
# make install puts programs, man pages and completion under PREFIX.
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'make install DESTDIR=... PREFIX=/usr installs every program and page' '
	make -s -C "$GPT_ROOT" install DESTDIR="$PWD/root" PREFIX=/usr >log 2>&1 || { cat log; false; } &&
	for p in "$GPT_ROOT"/bin/gpt-*; do
		[ -e "$p" ] || continue
		n=$(basename "$p") &&
		test -x "root/usr/bin/$n" &&
		test -f "root/usr/share/man/man1/$n.1" &&
		test -L "root/usr/share/bash-completion/completions/$n" || exit 1
	done &&
	test -f root/usr/share/bash-completion/completions/gptkit
'

test_expect_success 'installed programs run' '
	for p in root/usr/bin/gpt-*; do
		[ -e "$p" ] || continue
		"$p" --version >/dev/null || exit 1
	done
'

test_expect_success 'the completion script loads in bash and completes options' '
	bash -c ". \"$GPT_ROOT/contrib/gptkit.bash\" && complete -p gpt-train" >out &&
	test_grep "_gptkit" out
'

test_done
