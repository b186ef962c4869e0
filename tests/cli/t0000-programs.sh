#!/bin/sh
# Every program: --help, --version, a usage error on a bad option, and a man
# page whose OPTIONS list matches --help.
. "$(dirname "$0")/test-lib.sh"

programs=$(cd "$GPT_ROOT/bin" && ls gpt-* 2>/dev/null)

test_expect_success 'at least one program was built' '
	test -n "$programs"
'

for p in $programs; do
	test_expect_success "$p --help prints usage and exits 0" '
		$p --help >out 2>err &&
		test_grep "^[Uu]sage: $p" out &&
		test ! -s err
	'
	test_expect_success "$p --version names gptkit" '
		$p --version >out &&
		test_grep "^$p \(gptkit\) [0-9]" out
	'
	test_expect_success "$p --help and --version on a full disk fail with exit 74" '
		test_expect_code 74 $p --help >/dev/full 2>err &&
		test_grep "^$p: error: standard output: No space left on device$" err &&
		test_expect_code 74 $p --version >/dev/full 2>err &&
		test_grep "^$p: error: standard output: No space left on device$" err
	'
	test_expect_success "$p rejects an unknown option with exit 64" '
		test_expect_code 64 $p --no-such-option >out 2>err &&
		test_grep "^$p: error: .*no-such-option" err &&
		test_line_count = 1 err
	'
	test_expect_success "$p has a man page with the usual sections" '
		page="$GPT_ROOT/man/man1/$p.1" &&
		test -f "$page" &&
		for s in NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES "EXIT STATUS" "SEE ALSO"; do
			grep -q "^\.SH \"\?$s\"\?\$" "$page" || { echo "missing section $s" >&2; exit 1; }
		done
	'
	test_expect_success "every long option in $p --help is in its man page" '
		$p --help | grep -oE -- "--[a-z][a-z0-9_-]*" | sort -u >opts &&
		page="$GPT_ROOT/man/man1/$p.1" &&
		missing= &&
		while read -r o; do
			esc=$(printf "%s" "$o" | sed "s/-/\\\\\\\\-/g") &&
			grep -q -e "$o" -e "$esc" "$page" || missing="$missing $o"
		done <opts &&
		if [ -n "$missing" ]; then echo "not in the man page:$missing" >&2; exit 1; fi
	'
	test_expect_success "every long option in the OPTIONS of $p(1) is in --help" '
		$p --help | grep -oE -- "--[a-z][a-z0-9_-]*" | sort -u >opts &&
		sed -n "/^\.SH OPTIONS/,/^\.SH /p" "$GPT_ROOT/man/man1/$p.1" | grep "^\.[BI]" |
			sed "s/\\\\-/-/g" | grep -oE -- "--[a-z][a-z0-9_-]*" | sort -u >man-opts &&
		test_line_count -ge 2 man-opts &&
		comm -13 opts man-opts >extra &&
		if [ -s extra ]; then echo "in $p(1) but not in --help:" $(cat extra) >&2; exit 1; fi
	'
	test_expect_success "bash completion knows $p" '
		grep -q "$p" "$GPT_ROOT/contrib/gptkit.bash"
	'
done

test_expect_success 'every environment variable the code reads by name is in a man page' '
	{ grep -rhoE --include="*.[ch]" --include="*.cu" "getenv\(\"[A-Z][A-Z0-9_]*\"\)" "$GPT_ROOT/lib" "$GPT_ROOT/cmd" &&
	  grep -rhoE --include="*.h" "#define [A-Z_]+_ENV \"[A-Z][A-Z0-9_]*\"" "$GPT_ROOT/lib"; } |
		grep -oE "\"[A-Z][A-Z0-9_]*\"" | tr -d "\"" | sort -u >vars &&
	grep -x GPT_COMM_TIMEOUT vars && grep -x GPT_COMM_BACKEND vars &&
	missing= &&
	while read -r v; do
		cat "$GPT_ROOT"/man/man1/*.1 "$GPT_ROOT"/man/man5/*.5 | grep -q -w -e "$v" ||
			missing="$missing $v"
	done <vars &&
	if [ -n "$missing" ]; then echo "in no man page:$missing" >&2; exit 1; fi
'

test_expect_success 'bash completion offers the --dtype values each program takes' '
	for p in gpt-export gpt-infer gpt-ckpt-merge; do
		$p --help | grep -e "--dtype DTYPE" | grep -oE "\b(fp32|bf16|fp16|int8)\b" | sort -u >want &&
		bash -c ". \"$GPT_ROOT/contrib/gptkit.bash\" && COMP_WORDS=($p --dtype \"\") && COMP_CWORD=2 &&
			_gptkit && printf \"%s\n\" \"\${COMPREPLY[@]}\"" | sort >got &&
		test_cmp want got || { echo "$p"; exit 1; }
	done
'

test_expect_success 'bash completion offers no file names for a number or a string' '
	for w in "gpt-train --tensor_parallel_degree" "gpt-train --virtual_pp_degree" "gpt-infer --batch" \
		 "gpt-infer --threads" "gpt-infer --stop" "gpt-preprocess --json-key" \
		 "gpt-ckpt-merge --micro-batch-size" "gpt-launch --rank"; do
		bash -c ". \"$GPT_ROOT/contrib/gptkit.bash\" && COMP_WORDS=($w \"\") && COMP_CWORD=2 &&
			_gptkit && printf \"%s\n\" \"\${COMPREPLY[@]}\"" >got &&
		test_line_count = 1 got && test "$(cat got)" = "" || { echo "$w:"; cat got; exit 1; }
	done
'

test_expect_success 'man pages render without warnings' '
	for page in "$GPT_ROOT"/man/man1/*.1 "$GPT_ROOT"/man/man5/*.5; do
		[ -e "$page" ] || continue
		LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" >/dev/null 2>warn || true
		if [ -s warn ]; then echo "$page:"; cat warn; exit 1; fi
	done
'

test_done
