#!/bin/sh
# The reference docs against the programs: for every program, the options of
# --help and the items of OPTIONS in its man page are the same, with the same
# short letters and argument names; the other spellings an option table
# accepts are the ones the docs name; every other option OPTIONS mentions is
# refused with a hint or belongs to the program it is written with. For
# gpt-config(5): its KEYS are the keys of gpt-train --list-keys, and the
# default each states is the one gpt-train applies to a key left out. Every
# gpt-train command of the examples (README, the man pages' EXAMPLES and
# other example blocks, the Slurm script's usage), under gpt-launch or not,
# resolves for the ranks it would run on. Bash completion completes each
# alias as the option it spells.
. "$(dirname "$0")/test-lib.sh"

programs=$(cd "$GPT_ROOT/bin" && ls gpt-*)

# Other spellings an option table accepts without listing them in --help
# (entries with no help text), as "program alias option". Each must be one
# of these, named in --help and in OPTIONS, and mean that option.
aliases='gpt-launch --nproc_per_node --nproc-per-node
gpt-launch --node_rank --node-rank
gpt-launch --rank --node-rank
gpt-launch --log_dir --log-dir
gpt-launch --max_restarts --max-restarts
gpt-launch --gpus --devices'

# help_opts PROG: the left column of the option table of --help, one option
# a line, as "-s, --long ARG"
help_opts () {
	"$1" --help | awk '/^  (-[A-Za-z], --|-[A-Za-z] |    --)/ {
		s = $0; sub(/^ +/, "", s); if (match(s, /  /)) s = substr(s, 1, RSTART - 1); print s }' | sort
}

# man_section PAGE NAME: the text of one .SH section, fonts and \- undone
man_section () {
	sed -n "/^\.SH \"\{0,1\}$2\"\{0,1\}\$/,/^\.SH /p" "$1" | sed -e '1d' -e '$d' |
		sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g'
}

# man_opts PROG: the items (.TP tags) of OPTIONS in PROG(1) as man prints
# them: the arguments of .B and .I joined by a space, those of .BR, .BI, ...
# (fonts in turn) by nothing
man_opts () {
	man_section "$GPT_ROOT/man/man1/$1.1" OPTIONS | awk 'tag {
		sep = $1 ~ /^\.[BI]$/ ? " " : ""; s = substr($0, length($1) + 2)
		out = ""; n = 0; arg = ""; inq = 0; have = 0
		for (i = 1; i <= length(s) + 1; i++) {
			c = i <= length(s) ? substr(s, i, 1) : " "
			if (c == "\"") { inq = !inq; have = 1; continue }
			if (c == " " && !inq) {
				if (have) { out = out (n++ ? sep : "") arg; arg = ""; have = 0 }
				continue
			}
			arg = arg c; have = 1
		}
		print out }
		{ tag = /^\.TP/ }' | sort
}

# table_entries PROG: "name id help" for each entry of the option table in
# cmd/PROG.c, help 0 for an entry --help does not list
table_entries () {
	sed -n '/gpt_opt options\[\] = {/,/^};/p' "$GPT_ROOT/cmd/$1.c" |
		sed -n 's/^\t{"\([a-z_-]*\)", [^,]*, [^,]*, \([A-Z_]*\),\(.*\)/--\1 \2 \3/p' |
		awk '{ print $1, $2, ($3 ~ /^NULL/ ? 0 : 1) }'
}

test_expect_success 'the option tables and the alias list were read' '
	echo "$programs" >p && test_line_count = 7 p &&
	help_opts gpt-train >h && grep -x -e "-c, --config FILE" h &&
	help_opts gpt-launch >l && grep -x -e "--heartbeat-timeout SECONDS" l &&
	man_opts gpt-infer >m && grep -x -e "-m, --model MODEL" m && grep -x -e "--stats" m &&
	table_entries gpt-launch >t && grep -x -e "--gpus OPT_DEVICES 0" t
'

test_expect_success 'in --help every description is apart from its option' '
	for p in $programs; do
		$p --help | awk "/^  (-[A-Za-z], --|-[A-Za-z] |    --)/ {
			s = \$0; sub(/^ +/, \"\", s); if (s ~ /  /) next
			if (split(s, w, \" \") > (s ~ /^-[A-Za-z],/ ? 3 : 2)) print }" >bad &&
		if [ -s bad ]; then echo "$p:"; cat bad; exit 1; fi
	done
'

for p in $programs; do
	test_expect_success "$p: --help and the OPTIONS of $p(1) have the same options, letters and arguments" '
		help_opts '$p' >help-opts &&
		man_opts '$p' >man-opts &&
		test_line_count -ge 3 help-opts &&
		test_cmp help-opts man-opts
	'

	test_expect_success "$p: the spellings --help leaves out are the documented aliases" '
		table_entries '$p' >table &&
		awk "\$3 == 0 { print \$1 }" table | sort >hidden &&
		echo "$aliases" | awk -v p='$p' "\$1 == p { print \$2 }" | sort >want &&
		test_cmp want hidden &&
		$p --help >help &&
		man_section "$GPT_ROOT/man/man1/'$p'.1" OPTIONS >man &&
		echo "$aliases" | awk -v p='$p' "\$1 == p { print \$2, \$3 }" >pairs &&
		while read -r a o; do
			id=$(awk -v n=$a "\$1 == n { print \$2 }" table) &&
			awk -v n=$o -v id=$id "\$1 == n && \$2 == id && \$3 == 1 { f = 1 } END { exit !f }" table ||
				{ echo "$a is not another spelling of $o"; exit 1; }
			grep -q -e "$a\\b" help || { echo "$a is not in --help"; exit 1; }
			grep -q -e "$a\\b" man || { echo "$a is not in OPTIONS of '$p'(1)"; exit 1; }
		done <pairs
	'

	test_expect_success "$p: every other option OPTIONS of $p(1) names is refused with a hint, or another program's" '
		man_section "$GPT_ROOT/man/man1/'$p'.1" OPTIONS >man &&
		help_opts '$p' | grep -oE -e "--[a-z][a-z0-9_-]*" >own &&
		echo "$aliases" | awk -v p='$p' "\$1 == p { print \$2 }" >>own &&
		grep -oE -e "--[a-z][a-z0-9_-]*" man | sort -u | grep -v -x -F -f own >others || true &&
		while read -r o; do
			q=$(grep -oE -e "gpt-[a-z-]+ $o\\b" man | sed "s/ .*//" | sort -u | grep -v -x '$p') || true
			if [ -n "$q" ]; then
				$q --help | grep -q -e "$o\\b" || { echo "$q has no $o"; exit 1; }
				continue
			fi
			test_expect_code 64 '$p' $o 1 2>err &&
			test_grep "^'$p': error: unknown option $o \\(.*\\); " err
		done <others
	'
done

test_expect_success 'bash completion completes each documented alias as the option it spells' '
	mkdir comp && mkdir comp/sub && : >comp/file.txt && cd comp &&
	complete_ () {
		bash -c ". \"$GPT_ROOT/contrib/gptkit.bash\" && COMP_WORDS=($1 $2 \"\") && COMP_CWORD=2 &&
			_gptkit && printf \"%s\n\" \"\${COMPREPLY[@]}\"" | sort
	} &&
	echo "$aliases" | while read -r p a o; do
		complete_ $p $a >got && complete_ $p $o >want &&
		test_cmp want got || { echo "$p $a is not completed as $o"; exit 1; }
	done
'

# --print-config of a configuration that sets one key, as "Key<TAB>value"
flat_config () {
	gpt-train -c "$1" --print-config | awk '/^#/ || /^$/ { next }
		{ match($0, /^ */); d = RLENGTH / 2; s = substr($0, RLENGTH + 1)
		  k = s; sub(/:.*/, "", k); path[d] = k
		  if (s !~ /: /) next
		  v = s; sub(/^[^:]*: /, "", v); name = path[0]
		  for (i = 1; i <= d; i++) name = name "." path[i]
		  print name "\t" v }'
}

test_expect_success 'gpt-config(5): the KEYS are the keys of --list-keys' '
	gpt-train --list-keys | cut -f1 | sort >keys &&
	test_line_count -gt 100 keys &&
	man_section "$GPT_ROOT/man/man5/gpt-config.5" KEYS |
		awk "tag { print } { tag = /^\.TP/ }" >tags &&
	sed -n "s/^\.B \([^ ]*\)\$/\1/p" tags | sort >entries &&
	test_line_count = $(wc -l <tags) entries &&
	test_cmp keys entries
'

test_expect_success 'gpt-config(5): each default is what gpt-train gives a key left out' '
	printf "Engine:\n  logging_freq: 3\n" >a.yaml &&
	printf "Global:\n  seed: 7\n" >b.yaml &&
	flat_config a.yaml | grep -v "^Engine\.logging_freq	" >real &&
	flat_config b.yaml | grep "^Engine\.logging_freq	" >>real &&
	gpt-train --list-keys | cut -f1,2 >types &&
	man_section "$GPT_ROOT/man/man5/gpt-config.5" KEYS |
		awk "/^\.TP/ { tag = 1; next } tag { key = \$2; tag = 0; next }
			key && /default [^;]*;/ { d = \$0; sub(/.*default /, \"\", d); sub(/;.*/, \"\", d)
				print key \"\t\" d; key = \"\" }" >stated &&
	test_line_count = $(wc -l <types) stated &&
	awk -F"\t" "FILENAME == ARGV[1] { real[\$1] = \$2; next }
		FILENAME == ARGV[2] { type[\$1] = \$2; next }
		{ k = \$1; d = \$2
		  if (!(k in real)) { print k \": not in --print-config\"; next }
		  r = real[k]; gsub(/[\"\047]/, \"\", r)
		  if (d == \"(derived)\" || d == r) next
		  if (type[k] ~ /list\$/ && d == \"null\" && r == \"[]\") next # null: no list
		  if (d r ~ /^[0-9.e+-]+\$/ && d + 0 == r + 0) next
		  print k \": gpt-config(5) says \" d \", gpt-train gives \" r }" \
		real types stated >bad &&
	if [ -s bad ]; then cat bad; exit 1; fi
'

# doc_commands: the commands of the docs' examples, one a line as
# "FILE<TAB>COMMAND": README's ```sh blocks and the .EX blocks of the man
# pages, continuation lines joined, man escapes and comments undone
doc_commands () {
	for f in "$GPT_ROOT/README.md" "$GPT_ROOT"/man/man1/*.1 "$GPT_ROOT"/man/man5/*.5; do
		case $f in
		*.md) awk '/^```sh/ { on = 1; next } /^```/ { on = 0 } on' "$f" ;;
		*) awk '/^\.EX/ { on = 1; next } /^\.EE/ { on = 0 } on' "$f" |
			sed -e 's/\\-/-/g' -e 's/\\e$/\\/' -e 's/\\\\$/\\/' -e 's/\\f[BIRP]//g' ;;
		esac | sed -e 's/[[:space:]]#.*//' | awk -v f="${f#$GPT_ROOT/}" '
			{ line = line $0 }
			line ~ /\\$/ { sub(/\\$/, " ", line); next }
			{ print f "\t" line; line = "" }'
	done
}

# check_train_example WHERE COMMAND...: COMMAND, a gpt-train command or a
# gpt-launch of one, resolves (gpt-train --dry-run, or the --print-config it
# asks for) for the world size it runs at: the launch's nodes x workers a
# node, else its own --world-size, else the product of its degrees. Skipped when its -c file is not in
# the source tree (configs/NAME is tried for a bare NAME): one made by an
# earlier step of the example, such as a checkpoint's config.yaml.
check_train_example () {
	where=$1 world=
	shift
	case $1 in */gpt-launch | gpt-launch)
		nodes=1 per=1
		shift
		while [ $# -gt 0 ]; do
			case $1 in
			--) shift; break ;;
			--nnodes) nodes=$2; shift 2 ;;
			--nproc-per-node | --nproc_per_node) per=$2; shift 2 ;;
			--devices | --gpus) per=$(echo "$2" | tr ',' '\n' | grep -c .); shift 2 ;;
			-*) shift 2 ;;
			*) break ;;
			esac
		done
		world=$((nodes * per)) ;;
	esac
	case $1 in */gpt-train | gpt-train) shift ;; *) return 0 ;; esac
	args= mode=--dry-run
	while [ $# -gt 0 ]; do
		a=$1
		shift
		case $a in
		"|"*) break ;;
		-c | --config)
			c=$1
			shift
			[ -f "$GPT_ROOT/$c" ] || c=configs/$(basename "$c")
			[ -f "$GPT_ROOT/$c" ] || return 0
			args="$args -c '$GPT_ROOT/$c'"
			continue ;;
		--world-size) world=$1; shift; continue ;;
		--dry-run | --print-config) mode=$a; continue ;;
		esac
		args="$args $(printf "%s" "$a" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
	done
	eval "gpt-train $args ${world:+--world-size $world} $mode" >/dev/null 2>err ||
		{ echo "$where: ${world:-the degrees'"'"'} ranks:" && cat err; return 1; }
	! grep . err || { echo "$where: warns"; return 1; }
}

test_expect_success 'the examples of the docs were read' '
	doc_commands >cmds &&
	grep -F "README.md	bin/gpt-launch --nproc-per-node 8 -- bin/gpt-train -c configs/tiny_cpu_bytes.yaml " cmds &&
	grep "^man/man1/gpt-launch.1	gpt-launch --devices 0,1,2,3,4,5,6,7 --nnodes 2 .* gpt-train -c configs/" cmds &&
	grep -F "man/man1/gpt-train.1	gpt-train -c configs/tiny_cpu.yaml --world-size 4 --tensor_parallel_degree 2 --dry-run" cmds
'

test_expect_success 'every gpt-train example of the docs resolves for the ranks it runs on' '
	doc_commands >cmds &&
	n=0 bad=0 &&
	while IFS="	" read -r where cmd; do
		case $cmd in *gpt-train\ *) ;; *) continue ;; esac
		eval "set -- $cmd" &&
		{ check_train_example "$where" "$@" || bad=$((bad + 1)); } &&
		n=$((n + 1))
	done <cmds &&
	test $n -ge 12 && test $bad = 0
'

test_expect_success 'the Slurm script'"'"'s usage example resolves for its nodes x GPUs' '
	s="$GPT_ROOT/contrib/slurm-gptkit.sbatch" &&
	nodes=$(sed -n "s/^#SBATCH --nodes=\([0-9]*\)\$/\1/p" "$s") &&
	gpus=$(sed -n "s/^GPUS_PER_NODE=\${GPUS_PER_NODE:-\([0-9]*\)}\$/\1/p" "$s") &&
	grep -x "#SBATCH --gpus-per-node=$gpus" "$s" &&
	usage=$(sed -n "/^#   sbatch /,/[^\\\\]\$/p" "$s" | sed -e "s/^#   *//" -e "s/\\\\\$//" | tr "\n" " " |
		sed -e "s|^sbatch contrib/slurm-gptkit.sbatch ||" -e "s/ *\[.*//") &&
	test -n "$usage" && test "$nodes" -ge 2 &&
	eval "set -- $usage" &&
	check_train_example "contrib/slurm-gptkit.sbatch" gpt-launch --nnodes "$nodes" --nproc-per-node "$gpus" \
		-- gpt-train -c "$@"
'

test_done
