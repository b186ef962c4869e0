#!/bin/sh
# gpt-preprocess on bad input: clear one-line errors, the right exit codes,
# and never a dataset pair left behind by a failed run, nor an existing one
# spoilt (disk faults from the LD_PRELOAD shim of lib-faultfs.sh).
. "$(dirname "$0")/test-lib.sh"
. "$GPT_ROOT/tests/cli/lib-faultfs.sh"

# no_pair PREFIX: neither file of the pair exists
no_pair () { ! test -e "$1.bin" && ! test -e "$1.idx"; }

test_expect_success 'setup' '
	printf "good text\n" >good.txt &&
	printf "{\"text\": \"ok\"}\n{\"text\": \"broken\"\n{\"text\": 3}\n{\"other\": \"x\"}\n{\"text\": \"fine\"}\n" >bad.jsonl
'

test_expect_success 'a missing vocabulary says how to get one' '
	mkdir novocab &&
	test_expect_code 66 gpt-preprocess --vocab novocab -o out good.txt 2>err &&
	test_grep "^gpt-preprocess: error: novocab: no GPT-2 vocabulary .*make deps.*--vocab DIR.*, or use -t bytes" err &&
	test_line_count = 1 err &&
	no_pair out
'

test_expect_success 'a malformed vocabulary names the file' '
	mkdir badvocab && echo "{" >badvocab/encoder.json && echo "#version: 0.2" >badvocab/vocab.bpe &&
	test_expect_code 65 gpt-preprocess --vocab badvocab -o out good.txt 2>err &&
	test_grep "badvocab/encoder.json:.*not valid JSON" err
'

test_expect_success '--vocab naming a file (as Megatron'"'"'s --vocab-file does) says to name its directory' '
	mkdir mgvocab && echo "{}" >mgvocab/gpt2-vocab.json &&
	test_expect_code 64 gpt-preprocess --vocab mgvocab/gpt2-vocab.json -o out good.txt 2>err &&
	test_grep "^gpt-preprocess: error: mgvocab/gpt2-vocab.json: a file, where the directory holding the vocabulary files is expected: pass --vocab mgvocab$" err &&
	no_pair out
'

test_expect_success 'a missing input file' '
	test_expect_code 66 gpt-preprocess -t bytes -o out good.txt nosuch.txt 2>err &&
	test_grep "^gpt-preprocess: error: nosuch.txt: No such file" err &&
	no_pair out
'

test_expect_success 'standard input named twice is refused before anything is read, a file called - is not' '
	test_expect_code 64 gpt-preprocess -t bytes -o out - good.txt - <good.txt 2>err &&
	test_grep "^gpt-preprocess: error: input .-. \(standard input\) given more than once: it can be read once; give it once" err &&
	no_pair out &&
	cp good.txt ./- &&
	gpt-preprocess -t bytes -o twice - ./- <good.txt &&
	test "$(gpt-preprocess --info twice | sed -n "s/^documents: //p")" = 2
'

test_expect_success 'a directory loop (links to . or a parent) is an error naming both, not a run for ever' '
	mkdir -p loop/sub && cp good.txt loop/sub/a.txt &&
	ln -s . loop/self && ln -s .. loop/sub/up &&
	test_expect_code 65 timeout 60 gpt-preprocess -t bytes -o out loop 2>err &&
	test_grep "^gpt-preprocess: error: loop/self: a directory loop: this is loop again \(a symbolic link to it or to a parent\); remove the link or name the directories to read$" err &&
	no_pair out &&
	rm loop/self &&
	test_expect_code 65 timeout 60 gpt-preprocess -t bytes -o out loop 2>err &&
	test_grep "error: loop/sub/up: a directory loop: this is loop again" err &&
	no_pair out
'

test_expect_success NOT_ROOT 'an unreadable file' '
	cp good.txt secret.txt && chmod 000 secret.txt &&
	test_expect_code 74 gpt-preprocess -t bytes -o out good.txt secret.txt 2>err &&
	test_grep "secret.txt: open: Permission denied" err &&
	no_pair out
'

test_expect_success 'an invalid JSON line names the file and line' '
	test_expect_code 65 gpt-preprocess -t bytes -o out bad.jsonl 2>err &&
	test_grep "^gpt-preprocess: error: bad.jsonl:2: invalid JSON: .*--skip-bad" err &&
	test_line_count = 1 err &&
	no_pair out
'

test_expect_success 'a wrong value type and a missing key are errors too' '
	sed -n "1p;3p" bad.jsonl >type.jsonl &&
	test_expect_code 65 gpt-preprocess -t bytes -o out type.jsonl 2>err &&
	test_grep "type.jsonl:2: .text. is a number, expected a string" err &&
	sed -n "4p" bad.jsonl >key.jsonl &&
	test_expect_code 65 gpt-preprocess -t bytes -o out key.jsonl 2>err &&
	test_grep "key.jsonl:1: the record has no key .text.; choose the key with --json-key" err
'

test_expect_success 'a list under the key holding a non-string names the file, line, key and place' '
	printf "{\"text\": [\"a\"]}\n{\"body\": [\"a\", [\"b\"]]}\n" >list.jsonl &&
	test_expect_code 65 gpt-preprocess -t bytes --json-key body --json-key text -o out list.jsonl 2>err &&
	test_grep "^gpt-preprocess: error: list.jsonl:2: .body.\[1\] is an array; a list under the key must hold only strings; fix the record or pass --skip-bad$" err &&
	no_pair out &&
	gpt-preprocess -t bytes --skip-bad --json-key body --json-key text -o listskip list.jsonl 2>err &&
	test_grep "skipped 1 bad JSON record \(first: list.jsonl:2\)" err
'

test_expect_success 'a .json file that is one JSON array says so and how to convert it, --skip-bad or not' '
	printf "[\n  {\"text\": \"a\"},\n  {\"text\": \"b\"}\n]\n" >array.json &&
	printf "\357\273\277 [{\"text\": \"a\"}]\n" >array1.json &&
	for f in array.json array1.json; do
		for o in "" --skip-bad; do
			test_expect_code 65 gpt-preprocess -t bytes $o -o out $f 2>err &&
			test_grep "^gpt-preprocess: error: $f:1: a JSON array, where JSON lines \(one object per line\) are expected; convert the file first, e\.g\. jq -c .\.\[\]. FILE >FILE\.jsonl$" err &&
			test_line_count = 1 err || return 1
		done
	done &&
	no_pair out
'

test_expect_success '--skip-bad skips bad records and counts them' '
	gpt-preprocess -t bytes --skip-bad -o skip bad.jsonl 2>err &&
	test_grep "warning: skipped 3 bad JSON records \(first: bad.jsonl:2\)" err &&
	gpt-preprocess --info skip >info && test_grep "^documents: 2$" info
'

test_expect_success 'an error inside an archive names the member and line' '
	tar -czf bad.tar.gz good.txt bad.jsonl &&
	test_expect_code 65 gpt-preprocess -t bytes -o out bad.tar.gz 2>err &&
	test_grep "bad.tar.gz:bad.jsonl:2: invalid JSON" err
'

test_expect_success 'a corrupt or truncated archive is an error' '
	seq 1 20000 >big.txt && tar -czf t.tar.gz big.txt good.txt &&
	head -c 2000 t.tar.gz >trunc.tar.gz &&
	test_expect_code 65 gpt-preprocess -t bytes -o out trunc.tar.gz 2>err &&
	test_grep "trunc.tar.gz.*(corrupt|truncated)" err &&
	no_pair out &&
	printf "PK\003\004garbage garbage garbage" >bad.zip &&
	test_expect_code 65 gpt-preprocess -t bytes -o out bad.zip 2>err &&
	test_grep "bad.zip" err &&
	printf "plain text, not gzip" >fake.gz &&
	test_expect_code 65 gpt-preprocess -t bytes -o out fake.gz 2>err &&
	test_grep "fake.gz: not a gz stream" err &&
	no_pair out
'

test_expect_success 'a gzip file cut inside its 8-byte trailer: named, said to end early, nothing written' '
	seq 1 20000 | sed "s/.*/{\"text\": \"&\"}/" >recs.jsonl && gzip -c recs.jsonl >whole.jsonl.gz &&
	gpt-preprocess -t bytes -o keep whole.jsonl.gz 2>/dev/null && cp keep.bin keep.bin.orig &&
	size=$(wc -c <whole.jsonl.gz) &&
	for cut in 1 4 8; do
		head -c $((size - cut)) whole.jsonl.gz >cut.jsonl.gz &&
		test_expect_code 65 gpt-preprocess -t bytes -o keep cut.jsonl.gz 2>err &&
		test_grep "^gpt-preprocess: error: cut.jsonl.gz: cannot read: the gzip stream ends early; the file is corrupt or truncated; nothing was written to keep.bin and keep.idx$" err &&
		cmp keep.bin keep.bin.orig || return 1
	done &&
	tar -cf cut.tar cut.jsonl.gz && tar -czf cutmember.tar.gz recs.jsonl &&
	head -c $(($(wc -c <cutmember.tar.gz) - 2)) cutmember.tar.gz >cut.tar.gz &&
	for f in cut.tar cut.tar.gz; do
		test_expect_code 65 gpt-preprocess -t bytes -j 2 -o new $f 2>err &&
		test_grep "^gpt-preprocess: error: $f:(cut|recs).jsonl(.gz)?: cannot read: the gzip stream ends early; the file is corrupt or truncated; nothing was written to new.bin and new.idx$" err &&
		no_pair new || return 1
	done
'

test_expect_success 'an encrypted zip member is named as such, not as corrupt' '
	zip -q -P secret enc.zip good.txt &&
	test_expect_code 65 gpt-preprocess -t bytes -o enc enc.zip 2>err &&
	test_grep "error: enc.zip:good.txt: encrypted; decrypt the archive first" err &&
	! grep -q corrupt err && no_pair enc
'

test_expect_success 'a binary file is tokenized with a warning, or skipped with --skip-binary' '
	printf "text\000with a NUL byte" >blob.bin &&
	gpt-preprocess -t bytes -o bin good.txt blob.bin 2>err &&
	test_grep "warning: tokenized 1 file that looks binary \(first: blob.bin\); --skip-binary leaves them out" err &&
	gpt-preprocess --info bin >info && test_grep "^documents: 2$" info &&
	gpt-preprocess -t bytes --decode bin --doc 1 | cmp - blob.bin &&
	gpt-preprocess -t bytes --skip-binary -o bin good.txt blob.bin 2>err &&
	test_grep "warning: skipped 1 file that looks binary \(first: blob.bin\)$" err &&
	gpt-preprocess --info bin >info && test_grep "^documents: 1$" info
'

test_expect_success 'with --format lines too' '
	{ printf "line\000one\n" && head -c 9000 /dev/zero && printf "\nlast\n"; } >blob.lines &&
	gpt-preprocess -t bytes --format lines -o bin good.txt blob.lines 2>err &&
	test_grep "warning: tokenized 1 file that looks binary \(first: blob.lines\)" err &&
	gpt-preprocess --info bin >info && test_grep "^documents: 4$" info &&
	gpt-preprocess -t bytes --format lines --skip-binary -o bin good.txt blob.lines 2>err &&
	test_grep "warning: skipped 1 file that looks binary \(first: blob.lines\)$" err &&
	gpt-preprocess --info bin >info && test_grep "^documents: 1$" info
'

test_expect_success 'empty input is an error and writes nothing' '
	: >empty.txt &&
	test_expect_code 65 gpt-preprocess -t bytes -o out empty.txt 2>err &&
	test_grep "no documents in the input \(1 empty\); nothing written" err &&
	test_expect_code 65 gpt-preprocess -t bytes --skip-binary -o out blob.bin </dev/null 2>err &&
	test_grep "no documents in the input \(0 empty, binary ones skipped\); nothing written" err &&
	test_expect_code 65 gpt-preprocess -t bytes -o out - </dev/null 2>err &&
	no_pair out
'

test_expect_success 'a failed run keeps an existing pair intact' '
	gpt-preprocess -t bytes -o keep good.txt &&
	cp keep.bin keep.bin.orig && cp keep.idx keep.idx.orig &&
	test_expect_code 65 gpt-preprocess -t bytes -o keep good.txt bad.jsonl 2>err &&
	cmp keep.bin keep.bin.orig && cmp keep.idx keep.idx.orig &&
	! ls -a | grep "\.tmp\."
'

test_expect_success 'a disk failing while the new pair is made durable keeps the old pair' '
	build_faultfs &&
	for f in bin:fsync idx:fsync idx:write; do
		test_expect_code 74 with_faults FAULT_MATCH="*keep.${f%:*}.tmp*" FAULT_OPS=${f#*:} FAULT_ERRNO=EIO -- \
			gpt-preprocess -t bytes -o keep good.txt good.txt 2>err &&
		test_grep "^gpt-preprocess: error: keep\.(bin|idx): (fsync|write): Input/output error$" err &&
		cmp keep.bin keep.bin.orig && cmp keep.idx keep.idx.orig &&
		! ls -a | grep "\.tmp\." || return 1
	done
'

# one rename of the commit fails (FAULT_SKIP=k: the renames before it go
# through): the old .idx and .bin aside, the new .bin, the new .idx
test_expect_success 'a rename failing anywhere in the commit puts the old pair back, nothing left over' '
	for k in 0 1 2 3; do
		test_expect_code 74 with_faults FAULT_MATCH="*keep.*" FAULT_OPS=rename FAULT_SKIP=$k FAULT_TIMES=1 \
			FAULT_ERRNO=EIO -- gpt-preprocess -t bytes -o keep good.txt good.txt 2>err &&
		test_grep "^gpt-preprocess: error: keep\.(bin|idx): (move the old file aside|rename into place): Input/output error$" err &&
		cmp keep.bin keep.bin.orig && cmp keep.idx keep.idx.orig &&
		! ls -a | grep "^\.keep\." || return 1
	done &&
	with_faults FAULT_MATCH="*keep.*" FAULT_OPS=rename FAULT_SKIP=4 FAULT_TIMES=1 -- \
		gpt-preprocess -t bytes -o new good.txt &&
	gpt-preprocess --info new >info && test_grep "^documents: 1$" info
'

test_expect_success 'when putting the old pair back fails too: no new .bin beside an old .idx, the old files named' '
	for k in 2 3; do
		cp keep.bin.orig keep.bin && cp keep.idx.orig keep.idx &&
		test_expect_code 74 with_faults FAULT_MATCH="*keep.*" FAULT_OPS=rename FAULT_SKIP=$k FAULT_ERRNO=EIO -- \
			gpt-preprocess -t bytes -o keep good.txt good.txt 2>err &&
		test_grep "^gpt-preprocess: error: keep\.(bin|idx): rename into place: Input/output error; putting the old files back failed too \(Input/output error\): rename \./\.keep\.bin\.old\.[0-9]+\.0 to keep\.bin and \./\.keep\.idx\.old\.[0-9]+\.0 to keep\.idx$" err &&
		! test -e keep.idx &&
		cmp .keep.bin.old.* keep.bin.orig && cmp .keep.idx.old.* keep.idx.orig &&
		test $(ls -a | grep -c "^\.keep\.") = 2 &&
		rm .keep.* || return 1
	done &&
	cp keep.bin.orig keep.bin && cp keep.idx.orig keep.idx
'

test_expect_success 'SIGTERM during the renames: the new pair whole, then the signal' '
	for k in 0 1 2 3; do
		cp keep.bin.orig keep.bin && cp keep.idx.orig keep.idx &&
		rc=0 && with_faults FAULT_MATCH="*keep.*" FAULT_OPS=rename FAULT_SKIP=$k FAULT_SIGNAL=15 -- \
			gpt-preprocess -t bytes -o keep good.txt good.txt || rc=$? &&
		test $rc = 143 &&
		gpt-preprocess --info keep >info && test_grep "^documents: 2$" info &&
		! ls -a | grep "^\.keep\." || return 1
	done &&
	cp keep.bin.orig keep.bin && cp keep.idx.orig keep.idx
'

test_expect_success 'a directory that cannot be synced after the renames: the new pair whole, both named' '
	mkdir od &&
	gpt-preprocess -t bytes -o od/keep good.txt &&
	test_expect_code 74 with_faults FAULT_MATCH="*/od" FAULT_OPS=fsync FAULT_ERRNO=EIO -- \
		gpt-preprocess -t bytes -o od/keep good.txt good.txt 2>err &&
	test_grep "^gpt-preprocess: error: od/keep.bin and od/keep.idx: written in full, but syncing the directory od failed: Input/output error; .*check the disk, then write it again" err &&
	gpt-preprocess --info od/keep >info &&
	test_grep "^documents: 2$" info &&
	! ls -a od | grep "\.tmp\."
'

test_expect_success 'a file size limit (ulimit -f) is an error naming the file, not death by SIGXFSZ' '
	for i in $(seq 40); do cat good.txt bad.jsonl good.txt; done >many.txt &&
	for i in $(seq 60); do cat many.txt; done >big.txt &&
	code=0 &&
	(ulimit -f 8 && exec gpt-preprocess -t bytes -o keep big.txt) 2>err || code=$? &&
	test $code = 74 &&
	test_grep "^gpt-preprocess: error: keep\.bin: write: File too large$" err &&
	cmp keep.bin keep.bin.orig && cmp keep.idx keep.idx.orig &&
	! ls -a | grep "\.tmp\."
'

# SIGHUP only where it was not ignored when the tests started (nohup make
# test): gpt-preprocess leaves an ignored signal ignored, and would wait on
# its input for ever
hup=HUP:129
test "$(( 0x$(sed -n "s/^SigIgn:[[:space:]]*//p" /proc/$$/status 2>/dev/null || echo 0) & 1 ))" = 0 || hup=

test_expect_success 'SIGTERM or SIGHUP mid-run: no temporary left, the old pair kept' '
	for s in TERM:143 $hup; do
		rm -f fifo && mkfifo fifo &&
		{ gpt-preprocess -t bytes -o keep - <fifo 2>err & } &&
		p=$! &&
		exec 9>fifo && printf "more text\n" >&9 &&
		n=0 && while ! ls -a | grep -q "^\.keep\.bin\.tmp\." && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done &&
		kill -${s%:*} $p && rc=0 && { wait $p || rc=$?; } && exec 9>&- &&
		test $rc = ${s#*:} &&
		! ls -a | grep "\.tmp\." &&
		cmp keep.bin keep.bin.orig && cmp keep.idx keep.idx.orig || return 1
	done
'

test_expect_success 'an output directory that does not exist' '
	test_expect_code 66 gpt-preprocess -t bytes -o nodir/out good.txt 2>err &&
	test_grep "nodir/" err
'

test_expect_success 'a .bin or .idx name that is a directory is refused before the input is read' '
	for d in dirout.bin dirout.idx; do
		mkdir $d &&
		test_expect_code 64 gpt-preprocess -t bytes -o dirout good.txt 2>err &&
		test_grep "^gpt-preprocess: error: $d: is a directory; name a file to write, or remove the directory$" err &&
		test_line_count = 1 err &&
		rmdir $d &&
		! ls -a | grep "dirout" || return 1
	done
'

test_expect_success 'usage errors' '
	test_expect_code 64 gpt-preprocess -t bytes good.txt 2>err && test_grep "no output" err &&
	test_expect_code 64 gpt-preprocess -t bytes -o out 2>err && test_grep "no input" err &&
	test_expect_code 64 gpt-preprocess -t nope -o out good.txt 2>err && test_grep "unknown tokenizer" err &&
	test_expect_code 64 gpt-preprocess -t bytes -j 0 -o out good.txt 2>err && test_grep "thread count" err &&
	test_expect_code 64 gpt-preprocess -t bytes --format csv -o out good.txt 2>err &&
	test_expect_code 64 gpt-preprocess --doc 1 -o out good.txt 2>err && test_grep "only with --decode" err &&
	test_expect_code 64 gpt-preprocess -t bytes --vocab . -o out good.txt 2>err &&
	test_grep "error: --vocab: -t bytes needs no vocabulary; leave one of them out$" err &&
	test_expect_code 64 gpt-preprocess --vocab . --decode out -t bytes 2>err && test_grep "needs no vocabulary" err &&
	test_expect_code 64 gpt-preprocess -t bytes --json-key "" -o out good.txt 2>err &&
	test_grep "error: --json-key: expected a key name, found an empty one$" err && ! test -e out.idx &&
	test_expect_code 64 gpt-preprocess -t bytes --json-key body --format text -o out good.txt 2>err &&
	test_grep "error: --json-key: --format text reads no JSON; leave it out or use --format jsonl or auto$" err &&
	test_expect_code 64 gpt-preprocess -t bytes --format lines --skip-bad -o out good.txt 2>err &&
	test_grep "error: --skip-bad: --format lines reads no JSON" err &&
	no_pair out &&
	test_expect_code 64 gpt-preprocess --bogus 2>err && test_grep "unknown option --bogus" err &&
	gpt-preprocess -t bytes -o ds good.txt &&
	test_expect_code 64 gpt-preprocess --info ds -j 2 2>err && test_grep "apply to tokenizing input" err &&
	test_expect_code 64 gpt-preprocess --decode ds --no-append-eod -t bytes 2>err && test_grep "apply to tokenizing input" err &&
	test_expect_code 64 gpt-preprocess --info ds -t bytes 2>err && test_grep "info reads no tokens" err &&
	gpt-preprocess --decode ds -t bytes --doc 0 >dec && test_grep "^good text" dec &&
	mkdir -p pdir && for o in "" pdir/ . pdir/..; do
		test_expect_code 64 gpt-preprocess -t bytes -o "$o" good.txt 2>err &&
		test_grep "output .$o.: expected a file name prefix PREFIX, for PREFIX.bin and PREFIX.idx" err || return 1
	done &&
	! ls -a . pdir | grep "^\.\(bin\|idx\)$"
'

test_expect_success 'the options of Megatron-LM and FleetX preprocess_data.py say what to give instead' '
	test_expect_code 64 gpt-preprocess --input good.txt -o out 2>err &&
	test_grep "^gpt-preprocess: error: unknown option --input \(Megatron-LM.s\); give the input files, directories or - \(stdin\) as arguments$" err &&
	test_expect_code 64 gpt-preprocess -t bytes --workers 4 -o out good.txt 2>err &&
	test_grep "error: unknown option --workers \(Megatron-LM.s and PaddleFleetX.s\); give -j N" err &&
	test_expect_code 64 gpt-preprocess -t bytes --output-prefix=out good.txt 2>err &&
	test_grep "error: unknown option --output-prefix \(Megatron-LM.s\); give -o PREFIX" err &&
	test_expect_code 64 gpt-preprocess -t bytes --json_key text -o out good.txt 2>err &&
	test_grep "error: unknown option --json_key \(PaddleFleetX.s\); give --json-key KEY$" err &&
	test_expect_code 64 gpt-preprocess --vocab-file gpt2-vocab.json -o out good.txt 2>err &&
	test_grep "error: unknown option --vocab-file \(Megatron-LM.s\); give --vocab DIR" err &&
	# the command of FleetX (ppfleetx/data/data_tools/gpt/README) starts so
	test_expect_code 64 gpt-preprocess --model_name gpt2 --tokenizer_name GPTTokenizer --data_format JSON \
		--input_path good.jsonl --append_eos --output_prefix out --workers 4 --log_interval 1000 2>err &&
	test_grep "error: unknown option --model_name \(PaddleFleetX.s\); the tokenizer is -t gpt2" err &&
	# and every other option of it at once, so that it is mended in one go
	test_grep "^gpt-preprocess: error: also unknown option --input_path \(PaddleFleetX.s\); give the input files" err &&
	test_grep "^gpt-preprocess: error: also unknown option --log_interval \(PaddleFleetX.s\)" err &&
	test "$(grep -c "^gpt-preprocess: error: also unknown option --" err)" = 7 &&
	test_expect_code 64 gpt-preprocess -t bytes --data_format JSON -o out good.txt 2>err &&
	test_grep "error: unknown option --data_format \(PaddleFleetX.s\); JSON lines are read by name" err &&
	test_expect_code 64 gpt-preprocess -t bytes --chinese -o out good.txt 2>err &&
	test_grep "error: unknown option --chinese \(PaddleFleetX.s\); gpt-preprocess does no Chinese word segmentation" err &&
	test_expect_code 64 gpt-preprocess -t bytes --workersx 4 -o out good.txt 2>err &&
	test_grep "error: unknown option --workersx; see --help$" err &&
	no_pair out
'

test_expect_success '--help and the man page list the same options' '
	gpt-preprocess --help >help &&
	sed -e "s/[\\\\]-/-/g" -e "s/[\\\\]f[BIRP]//g" "$GPT_ROOT/man/man1/gpt-preprocess.1" >man.txt &&
	grep -o -e "--[a-z][a-z-]*" help | sort -u >help.opts &&
	grep -o -e "--[a-z][a-z-]*" man.txt | sort -u >man.opts &&
	test_cmp help.opts man.opts
'

test_done
