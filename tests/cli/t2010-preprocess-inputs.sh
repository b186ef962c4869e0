#!/bin/sh
# gpt-preprocess input kinds: files, directories, stdin, JSON lines, lines,
# and archives/compressed streams in any mix (byte tokenizer: no vocabulary).
. "$(dirname "$0")/test-lib.sh"

# docs PREFIX: prints "N" documents of the dataset
docs () { gpt-preprocess --info "$1" | sed -n 's/^documents: //p'; }
# doc PREFIX N: document N as text
doc () { gpt-preprocess -t bytes --decode "$1" --doc "$2"; }

test_expect_success 'setup' '
	printf "first document\n" >a.txt &&
	printf "second\ndocument" >b.txt &&
	printf "{\"text\": \"json one\"}\n\n{\"text\": \"json \\\\u00e9 two\", \"id\": 2}\n" >c.jsonl &&
	printf "{\"content\": \"alt key\"}\n{\"text\": \"main key\", \"content\": \"x\"}\n" >d.jsonl
'

test_expect_success 'a plain file is one document, ended by end-of-text' '
	gpt-preprocess -t bytes -o one a.txt &&
	test "$(docs one)" = 1 &&
	gpt-preprocess --info one >info &&
	test_grep "^tokens: 16$" info &&
	test_grep "^dtype: uint16$" info &&
	doc one 0 >out && test_cmp a.txt out
'

test_expect_success '--no-append-eod leaves the end-of-text out' '
	gpt-preprocess -t bytes --no-append-eod -o noeod a.txt &&
	gpt-preprocess --info noeod >info &&
	test_grep "^tokens: 15$" info &&
	test "$(wc -c <noeod.bin)" = 30
'

test_expect_success 'several files keep their order; --decode shows all' '
	gpt-preprocess -t bytes -o two b.txt a.txt &&
	test "$(docs two)" = 2 &&
	doc two 0 >out && test_cmp b.txt out &&
	doc two 1 >out && test_cmp a.txt out &&
	gpt-preprocess -t bytes --decode two >all &&
	printf "second\ndocument<|endoftext|>first document\n<|endoftext|>" >want &&
	test_cmp want all
'

test_expect_success 'stdin is read with -' '
	printf "from stdin" | gpt-preprocess -t bytes -o stdin - &&
	doc stdin 0 >out && printf "from stdin" >want && test_cmp want out
'

test_expect_success 'JSON lines: a document per record, blank lines skipped, escapes decoded' '
	gpt-preprocess -t bytes -o js c.jsonl &&
	test "$(docs js)" = 2 &&
	doc js 1 >out && printf "json \303\251 two" >want && test_cmp want out
'

test_expect_success 'JSON lines: a byte-order mark before the first record is ignored' '
	printf "\357\273\277{\"text\": \"bom\"}\r\n{\"text\": \"next\"}\r\n" >bom.jsonl &&
	gpt-preprocess -t bytes -o bom bom.jsonl &&
	test "$(docs bom)" = 2 &&
	test "$(doc bom 0)" = bom && test "$(doc bom 1)" = next &&
	printf "{\"text\": \"a\"}\n\357\273\277{\"text\": \"b\"}\n" >bom2.jsonl &&
	test_expect_code 65 gpt-preprocess -t bytes -o bom2 bom2.jsonl 2>err &&
	test_grep "bom2.jsonl:2: invalid JSON" err
'

test_expect_success 'JSON lines: an integer past int64 in another field (a uint64 hash) is no bad record' '
	printf "{\"text\": \"hashed\", \"simhash\": 18446744073709551615, \"n\": -9223372036854775809}\n" >bigint.jsonl &&
	gpt-preprocess -t bytes -o bigint bigint.jsonl &&
	test "$(doc bigint 0)" = hashed
'

test_expect_success 'a byte-order mark at the start of a text file or a lines file is left out, not tokenized' '
	printf "\357\273\277notepad\r\n" >bom.txt &&
	gpt-preprocess -t bytes -o bomt bom.txt &&
	doc bomt 0 >out && printf "notepad\r\n" >want && test_cmp want out &&
	gpt-preprocess -t bytes --format lines -o boml bom.txt &&
	doc boml 0 >out && printf "notepad" >want && test_cmp want out &&
	printf "\357\273\277" >onlybom.txt &&
	gpt-preprocess -t bytes -o bomt2 onlybom.txt a.txt &&
	test "$(docs bomt2)" = 1 &&
	printf "\357\273\277" >bigbom.txt && seq 1 100000 >>bigbom.txt &&
	gpt-preprocess -t bytes -o bomt3 bigbom.txt &&
	doc bomt3 0 >out && seq 1 100000 >want && test_cmp want out &&
	printf "a\n\357\273\277b\n" >mid.txt &&
	gpt-preprocess -t bytes --format lines -o bomm mid.txt &&
	doc bomm 1 >out && printf "\357\273\277b" >want && test_cmp want out
'

test_expect_success '--json-key: the first key a record has wins' '
	gpt-preprocess -t bytes --json-key content -o k1 d.jsonl &&
	doc k1 0 >out && printf "alt key" >want && test_cmp want out &&
	doc k1 1 >out && printf "x" >want && test_cmp want out &&
	gpt-preprocess -t bytes --json-key text --json-key content -o k2 d.jsonl &&
	doc k2 0 >out && printf "alt key" >want && test_cmp want out &&
	doc k2 1 >out && printf "main key" >want && test_cmp want out
'

test_expect_success 'a list of strings under the key is one document, as Megatron-LM reads it' '
	printf "{\"text\": [\"one \", \"\", \"two\"]}\n{\"text\": []}\n{\"text\": [\"\", \"\"]}\n{\"text\": [\"three\"]}\n" >list.jsonl &&
	gpt-preprocess -t bytes -o list list.jsonl &&
	test "$(docs list)" = 2 &&
	gpt-preprocess --info list >info && test_grep "^tokens: 14$" info &&
	doc list 0 >out && printf "one two" >want && test_cmp want out &&
	doc list 1 >out && printf "three" >want && test_cmp want out &&
	i=0 && while [ $i -lt 3000 ]; do printf "{\"text\": [\"p%d \", \"q%d\"]}\n" $i $i; i=$((i + 1)); done >biglist.jsonl &&
	gpt-preprocess -t bytes -j 1 -o biglist1 biglist.jsonl &&
	gpt-preprocess -t bytes -j 3 -o biglist3 biglist.jsonl &&
	cmp biglist1.bin biglist3.bin && cmp biglist1.idx biglist3.idx &&
	test "$(docs biglist3)" = 3000
'

test_expect_success VOCAB 'the strings of a list are tokenized one by one, as Megatron-LM does' '
	printf "{\"text\": [\"hel\", \"lo\"]}\n" >hello-list.jsonl &&
	printf "hel" >hel.txt && printf "lo" >lo.txt && printf "hello" >hello.txt &&
	gpt-preprocess --no-append-eod -o hl hello-list.jsonl &&
	gpt-preprocess --no-append-eod -o parts hel.txt lo.txt &&
	gpt-preprocess --no-append-eod -o whole hello.txt &&
	cmp hl.bin parts.bin &&
	! cmp -s hl.bin whole.bin &&
	test "$(docs hl)" = 1
'

test_expect_success 'stdin with --json-key is JSON lines' '
	gpt-preprocess -t bytes --json-key text -o jstdin - <c.jsonl &&
	test "$(docs jstdin)" = 2
'

test_expect_success 'JSON lines read as text (piped, or misnamed) are one document each, with a warning' '
	gpt-preprocess -t bytes -o jtext - <c.jsonl 2>err &&
	test "$(docs jtext)" = 1 &&
	test_grep "^gpt-preprocess: warning: read 1 file whose first line is a JSON object as text, one document each \(first: -\); --format jsonl \(or --json-key KEY\) reads a document per record$" err &&
	cp c.jsonl c.txt && cp d.jsonl d.txt && tar cf cj.tar c.jsonl d.txt &&
	gpt-preprocess -t bytes -o jtext a.txt c.txt d.txt cj.tar 2>err &&
	test_grep "warning: read 3 files whose first line is a JSON object as text, one document each \(first: c.txt\)" err &&
	gpt-preprocess -t bytes --format text -o jtext c.txt 2>err &&
	gpt-preprocess -t bytes --format jsonl -o jtext - <c.jsonl 2>>err &&
	printf "{ not json\n" | gpt-preprocess -t bytes -o jtext - 2>>err &&
	test_line_count = 0 err
'

test_expect_success '--format lines: a document per non-empty line' '
	printf "l1\n\nl2\r\nl3" >lines.txt &&
	gpt-preprocess -t bytes --format lines -o ln lines.txt &&
	test "$(docs ln)" = 3 &&
	doc ln 1 >out && printf "l2" >want && test_cmp want out
'

test_expect_success 'a directory is read recursively in name order, hidden files skipped' '
	mkdir -p tree/sub tree/.hidden &&
	cp b.txt tree/z.txt && cp a.txt tree/sub/m.txt && cp c.jsonl tree/sub/n.jsonl &&
	cp a.txt tree/.hidden/x.txt && cp a.txt tree/.dot.txt &&
	gpt-preprocess -t bytes -o tree tree &&
	test "$(docs tree)" = 4 &&
	doc tree 0 >out && test_cmp a.txt out &&
	doc tree 3 >out && test_cmp b.txt out
'

test_expect_success 'compressed streams: gz, xz, zst, bz2 (and JSON inside by name)' '
	for z in gzip xz zstd bzip2; do
		$z -c a.txt >a.txt.$z && $z -c c.jsonl >c.jsonl.$z || return 1
	done &&
	mv a.txt.gzip a.txt.gz && mv a.txt.zstd a.txt.zst && mv a.txt.bzip2 a.txt.bz2 &&
	mv c.jsonl.gzip c.jsonl.gz && mv c.jsonl.zstd c.jsonl.zst && mv c.jsonl.bzip2 c.jsonl.bz2 &&
	gpt-preprocess -t bytes -o z a.txt.gz a.txt.xz a.txt.zst a.txt.bz2 c.jsonl.gz c.jsonl.xz c.jsonl.zst c.jsonl.bz2 &&
	test "$(docs z)" = 12 &&
	doc z 3 >out && test_cmp a.txt out &&
	doc z 11 >out && printf "json \303\251 two" >want && test_cmp want out
'

test_expect_success 'tar, tar.gz and zip archives, one document per member' '
	tar -cf t.tar a.txt b.txt c.jsonl &&
	tar -czf t.tar.gz a.txt b.txt &&
	zip -q t.zip a.txt c.jsonl &&
	gpt-preprocess -t bytes -o ar t.tar t.tar.gz t.zip &&
	test "$(docs ar)" = 9 &&
	doc ar 1 >out && test_cmp b.txt out &&
	doc ar 8 >out && printf "json \303\251 two" >want && test_cmp want out
'

test_expect_success 'links: a directory follows them, an archive skips them with a warning naming the first' '
	mkdir ln && cp a.txt ln/a.txt && ln -s a.txt ln/s.txt && ln ln/a.txt ln/h.txt &&
	gpt-preprocess -t bytes -o lnd ln 2>err &&
	test "$(docs lnd)" = 3 && test ! -s err &&
	tar -cf ln.tar ln && (cd ln && zip -q -y ../ln.zip a.txt s.txt) &&
	gpt-preprocess -t bytes -o lnt ln.tar 2>err &&
	test "$(docs lnt)" = 1 &&
	test_grep "warning: skipped 2 archive members that are symbolic or hard links \(first: ln.tar:ln/[ahs].txt -> (ln/)?[ah].txt\): links inside an archive are not followed, those in a directory are; extract the archive" err &&
	gpt-preprocess -t bytes -o lnz ln.zip 2>err &&
	test "$(docs lnz)" = 1 &&
	test_grep "warning: skipped 1 archive member that is a symbolic or hard link \(first: ln.zip:s.txt -> a.txt\)" err &&
	(cd ln && tar -cf ../lnonly.tar s.txt) &&
	test_expect_code 65 gpt-preprocess -t bytes -o lno lnonly.tar 2>err &&
	test_grep "error: no documents in the input \(0 empty, links inside archives skipped: extract them to read what the links name\)" err
'

test_expect_success 'archives nest: a tar.xz of zip and jsonl.gz members, and stdin' '
	mkdir nest && cp t.zip c.jsonl.gz a.txt.zst nest/ &&
	(cd nest && tar -cJf ../nest.tar.xz t.zip c.jsonl.gz a.txt.zst) &&
	gpt-preprocess -t bytes -o nest nest.tar.xz &&
	test "$(docs nest)" = 6 &&
	gpt-preprocess -t bytes -o nest2 - <nest.tar.xz &&
	cmp nest.bin nest2.bin && cmp nest.idx nest2.idx
'

test_expect_success 'empty files and records are skipped' '
	: >empty.txt && printf "{\"text\": \"\"}\n" >empty.jsonl &&
	gpt-preprocess -t bytes -o sk empty.txt a.txt empty.jsonl &&
	test "$(docs sk)" = 1
'

test_expect_success 'the output is byte-identical for every -j' '
	i=0 && while [ $i -lt 300 ]; do printf "doc %d %s\n" $i "$(seq $i $((i + 40)))" >tree/sub/f$i.txt; i=$((i + 1)); done &&
	gpt-preprocess -t bytes -j 1 -o j1 tree t.tar nest.tar.xz &&
	gpt-preprocess -t bytes -j 2 -o j2 tree t.tar nest.tar.xz &&
	gpt-preprocess -t bytes -j 5 -o j5 tree t.tar nest.tar.xz &&
	cmp j1.bin j2.bin && cmp j1.idx j2.idx && cmp j1.bin j5.bin && cmp j1.idx j5.idx &&
	seq 1 100000 >many.txt &&
	gpt-preprocess -t bytes --format lines -j 1 -o m1 many.txt &&
	gpt-preprocess -t bytes --format lines -j 3 -o m3 many.txt &&
	test "$(docs m3)" = 100000 &&
	cmp m1.bin m3.bin && cmp m1.idx m3.idx
'

test_expect_success 'progress on a terminal (forced): bytes, documents, tokens/s, ETA' '
	GPT_PROGRESS=1 gpt-preprocess -t bytes -o prog many.txt a.txt 2>err &&
	tr "\r" "\n" <err >lines &&
	test_grep "gpt-preprocess \[#+\] 100% .* 2 docs, .* tokens, .* tokens/s, .*/s, ETA" lines &&
	gpt-preprocess -t bytes -o quiet a.txt 2>err && test_line_count = 0 err
'

test_expect_success 'a rerun replaces the pair and leaves no temporary files' '
	gpt-preprocess -t bytes -o j1 a.txt &&
	test "$(docs j1)" = 1 &&
	! ls -a | grep "\.tmp\."
'

test_expect_success '-o PREFIX.bin or PREFIX.idx writes PREFIX.bin and PREFIX.idx, the pair readers open by that name' '
	mkdir sfx &&
	gpt-preprocess -t bytes -o sfx/named.bin a.txt &&
	gpt-preprocess -t bytes -o sfx/other.idx a.txt b.txt &&
	(cd sfx && ls -a) >names &&
	printf ".\n..\nnamed.bin\nnamed.idx\nother.bin\nother.idx\n" >want &&
	test_cmp want names &&
	test "$(docs sfx/named.bin)" = 1 && test "$(docs sfx/named)" = 1 &&
	test "$(docs sfx/other.idx)" = 2 &&
	test_expect_code 64 gpt-preprocess -t bytes -o sfx/other.bin sfx/other.bin 2>err &&
	test_grep "sfx/other.bin: this is the output of this run, not an input" err
'

test_expect_success 'a rerun into a directory it reads leaves its own output out' '
	mkdir -p self && cp a.txt self/ &&
	gpt-preprocess -t bytes -o self/out self &&
	gpt-preprocess -t bytes -o self/out self 2>err &&
	test_line_count = 0 err &&
	test "$(docs self/out)" = 1 &&
	doc self/out 0 >out && test_cmp a.txt out &&
	ln -s self self-link &&
	gpt-preprocess -t bytes -o self/out self-link &&
	test "$(docs self/out)" = 1
'

test_expect_success 'the output named as an input is refused' '
	test_expect_code 64 gpt-preprocess -t bytes -o self/out self/out.bin a.txt 2>err &&
	test_grep "self/out.bin: this is the output of this run, not an input" err &&
	test "$(docs self/out)" = 1
'

test_done
