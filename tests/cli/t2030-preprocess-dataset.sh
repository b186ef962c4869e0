#!/bin/sh
# The .bin/.idx pair: Megatron's layout read back the way Megatron reads it,
# --info and --decode, llm.c shards, and damaged files (clear errors, never
# a crash), and an interrupted run.
. "$(dirname "$0")/test-lib.sh"

command -v python3 >/dev/null 2>&1 && python3 -c "import array, struct" 2>/dev/null && test_set_prereq PYTHON3

# patch FILE OFFSET HEXBYTES: overwrite bytes in place
patch () { perl -e 'open(F, "+<", $ARGV[0]) or die; seek(F, $ARGV[1], 0); print F pack("H*", $ARGV[2])' "$@"; }
# info_fails FILE-OR-PREFIX PATTERN: --info exits 65 with a message matching PATTERN
info_fails () {
	test_expect_code 65 gpt-preprocess --info "$1" 2>err &&
	test_grep "$2" err && test_line_count = 1 err
}

test_expect_success 'setup' '
	printf "ab" >a.txt && printf "xyz" >b.txt && printf "hello" >c.txt &&
	gpt-preprocess -t bytes -o ds a.txt b.txt c.txt
'

test_expect_success 'the index is Megatron byte for byte' '
	{
		printf "MMIDIDX\\000\\000" &&
		printf "\\001\\000\\000\\000\\000\\000\\000\\000" &&    # version 1
		printf "\\010" &&                                      # dtype code 8: uint16
		printf "\\003\\000\\000\\000\\000\\000\\000\\000" &&    # 3 sequences
		printf "\\004\\000\\000\\000\\000\\000\\000\\000" &&    # 4 document indices
		printf "\\003\\000\\000\\000\\004\\000\\000\\000\\006\\000\\000\\000" &&   # lengths
		printf "\\000\\000\\000\\000\\000\\000\\000\\000\\006\\000\\000\\000\\000\\000\\000\\000\\016\\000\\000\\000\\000\\000\\000\\000" &&
		printf "\\000\\000\\000\\000\\000\\000\\000\\000\\001\\000\\000\\000\\000\\000\\000\\000" &&
		printf "\\002\\000\\000\\000\\000\\000\\000\\000\\003\\000\\000\\000\\000\\000\\000\\000"
	} >want.idx &&
	cmp want.idx ds.idx &&
	printf "a\\000b\\000\\000\\001x\\000y\\000z\\000\\000\\001h\\000e\\000l\\000l\\000o\\000\\000\\001" >want.bin &&
	cmp want.bin ds.bin
'

test_expect_success PYTHON3 'a reader written like Megatron sees the same documents' '
	python3 "$GPT_ROOT/tests/cli/megatron-read.py" ds >got &&
	printf "97 98 256\n120 121 122 256\n104 101 108 108 111 256\n" >want &&
	test_cmp want got
'

test_expect_success '--info' '
	gpt-preprocess --info ds >info &&
	test_grep "^format: megatron indexed dataset$" info &&
	test_grep "^documents: 3$" info &&
	test_grep "^tokens: 13$" info &&
	test_grep "^dtype: uint16$" info &&
	test_grep "^size: 128 bytes" info &&
	gpt-preprocess --info ds.idx >info2 && gpt-preprocess --info ds.bin >info3 &&
	sed 1d info >a && sed 1d info2 >b && sed 1d info3 >c && test_cmp a b && test_cmp a c
'

test_expect_success '--info and --decode to a full disk: an error, not exit 0 with nothing written' '
	test_expect_code 74 gpt-preprocess --info ds >/dev/full 2>err &&
	test_grep "^gpt-preprocess: error: dataset summary: write: No space left on device$" err &&
	test_expect_code 74 gpt-preprocess -t bytes --decode ds >/dev/full 2>err &&
	test_grep "^gpt-preprocess: error: decoded text: write: No space left on device$" err
'

test_expect_success '--decode of a document out of range' '
	test_expect_code 64 gpt-preprocess -t bytes --decode ds --doc 3 2>err &&
	test_grep "the dataset has 3 documents" err
'

test_expect_success VOCAB '--decode of a -t bytes dataset without -t bytes: refused, not GPT-2 garbage' '
	test_expect_code 65 gpt-preprocess --decode ds >out 2>err &&
	test_grep "^gpt-preprocess: error: ds: documents 0 and 2 \(the last\) hold only bytes \(ids 0 to 255\) and end with 256, the end-of-text of the byte tokenizer: the dataset was made with -t bytes; decode it with -t bytes$" err &&
	! test -s out &&
	test_expect_code 65 gpt-preprocess --decode ds --doc 1 >out 2>err &&
	test_grep "error: ds: documents 0 and 2 .the last. hold only bytes .ids 0 to 255. and end with 256" err && ! test -s out &&
	gpt-preprocess -t bytes -o one c.txt &&
	test_expect_code 65 gpt-preprocess --decode one >out 2>err &&
	test_grep "error: one: document 0 holds only bytes .ids 0 to 255. and ends with 256, the end-of-text" err && ! test -s out &&
	gpt-preprocess -t bytes --decode ds --doc 2 >out && printf hello >want && test_cmp want out
'

test_expect_success VOCAB 'GPT-2 datasets decode as before, a document of single bytes ending in " t" among them, or holding " t" before its end' '
	printf "{\"text\": \"Hello world\"}\n{\"text\": \"a t\"}\n" >g.jsonl &&
	gpt-preprocess --no-append-eod -o g g.jsonl &&
	gpt-preprocess --decode g --doc 1 >out && printf "a t" >want && test_cmp want out &&
	gpt-preprocess --decode g >out && printf "Hello worlda t" >want && test_cmp want out &&
	gpt-preprocess -o g2 g.jsonl && gpt-preprocess --decode g2 --doc 1 >out && printf "a t" >want && test_cmp want out &&
	printf "x t,y t" >xt.txt && gpt-preprocess --no-append-eod -o xt xt.txt &&
	gpt-preprocess --decode xt >out && printf "x t,y t" >want && test_cmp want out &&
	test_expect_code 65 gpt-preprocess -t bytes --decode g2 >out 2>err &&
	test_grep "^gpt-preprocess: error: g2: document 0: token 0: id 15496 is outside the vocabulary \[0, 257\); was the dataset made with another tokenizer \(-t\)\?$" err
'

test_expect_success 'missing files' '
	test_expect_code 66 gpt-preprocess --info nope 2>err &&
	test_grep "nope.idx" err &&
	cp ds.idx lonely.idx &&
	test_expect_code 66 gpt-preprocess --info lonely 2>err &&
	test_grep "lonely.bin: open: No such file" err &&
	cp ds.bin orphan.bin &&
	test_expect_code 66 gpt-preprocess --info orphan.bin 2>err &&
	test_grep "error: dataset orphan.bin \(expects orphan.bin and orphan.idx\): orphan.idx: open: No such file" err
'

test_expect_success 'a truncated index' '
	head -c 60 ds.idx >t.idx && cp ds.bin t.bin &&
	info_fails t "t.idx: 60 bytes, but 3 sequences and 4 document indices need 102 \(truncated\)" &&
	head -c 20 ds.idx >t.idx && info_fails t "t.idx: truncated" &&
	: >t.idx && info_fails t "t.idx: not a Megatron index"
'

test_expect_success 'a truncated .bin' '
	cp ds.idx u.idx && head -c 20 ds.bin >u.bin &&
	info_fails u "u.idx: sequence 2 .* lies outside u.bin \(20 bytes\)"
'

test_expect_success 'a .bin longer than its index says: an index of another corpus or dtype' '
	printf "abcd" >a2.txt && gpt-preprocess -t bytes -o big a2.txt b.txt c.txt &&
	cp ds.idx l.idx && cp big.bin l.bin &&
	info_fails l "l.bin: 30 bytes, but its index l.idx ends its last sequence at byte 26 \(uint16 tokens\); the pair does not belong together" &&
	cp ds.idx l.idx && cat ds.bin ds.bin >l.bin &&
	info_fails l "l.bin: 52 bytes, but its index l.idx ends" &&
	test_expect_code 65 gpt-preprocess -t bytes --decode l 2>err && test_grep "does not belong together" err
'

test_expect_success 'swapped files' '
	cp ds.idx s.bin && cp ds.bin s.idx &&
	info_fails s "s.idx: not a Megatron index"
'

test_expect_success 'Megatron-LM'"'"'s old lazy/cached index (TNTIDX) is named, with what to do' '
	cp ds.bin o.bin &&
	cp ds.idx o.idx && patch o.idx 0 544e544944580000 &&
	info_fails o "o.idx: not a Megatron index .*; it is the index of Megatron-LM.s old lazy or cached dataset .--dataset-impl lazy or cached., which gptkit does not read: make the data again with gpt-preprocess"
'

test_expect_success 'corrupted header fields' '
	cp ds.bin c.bin &&
	cp ds.idx c.idx && patch c.idx 0 58 && info_fails c "not a Megatron index" &&
	cp ds.idx c.idx && patch c.idx 9 02 && info_fails c "index version 2" &&
	cp ds.idx c.idx && patch c.idx 17 07 && info_fails c "dtype code 7 is not an integer" &&
	cp ds.idx c.idx && patch c.idx 17 63 && info_fails c "dtype code 99" &&
	cp ds.idx c.idx && patch c.idx 18 ffffffffffffff7f && info_fails c "cannot fit" &&
	cp ds.idx c.idx && patch c.idx 26 00000000 && info_fails c "cannot fit|need" &&
	cp ds.idx c.idx && patch c.idx 34 ffffff7f && info_fails c "sequence 0 .* lies outside" &&
	cp ds.idx c.idx && patch c.idx 46 01 && info_fails c "sequence 0 .* lies outside" &&
	cp ds.idx c.idx && patch c.idx 70 01 && info_fails c "document indices must run from 0" &&
	cp ds.idx c.idx && patch c.idx 78 05 && info_fails c "document index 1 is 5, beyond the 3 sequences" &&
	cp ds.idx c.idx && patch c.idx 86 00 && info_fails c "document index 2 is 0, after 1"
'

test_expect_success 'random damage is an error or a valid reading, never a crash' '
	i=0 && while [ $i -lt 150 ]; do
		cp ds.idx f.idx && cp ds.bin f.bin &&
		off=$(( (i * 7919) % 102 )) && val=$(printf "%02x%02x" $(( (i * 31) % 256 )) $(( (i * 97) % 256 ))) &&
		patch f.idx $off $val &&
		{ gpt-preprocess --info f >/dev/null 2>&1; rc=$?; } &&
		{ gpt-preprocess -t bytes --decode f >/dev/null 2>&1; rc2=$?; } &&
		case "$rc.$rc2" in 0.0|0.65|65.65) ;; *) echo "offset $off value $val: exit $rc/$rc2"; return 1;; esac &&
		i=$((i + 1)) || return 1
	done
'

# llmc FILE NTOK_IN_HEADER TOKEN...: an llm.c shard (version 1, uint16 tokens)
llmc () {
	f=$1 n=$2; shift 2
	perl -e "print pack(\"l<256\", 20240520, 1, $n, (0) x 253); print pack(\"S<*\", @ARGV)" "$@" >"$f"
}

test_expect_success 'llm.c shards: documents start at end-of-text' '
	llmc shard.bin 5 50256 72 105 50256 33 &&
	gpt-preprocess --info shard.bin >info &&
	test_grep "^format: llm.c shard$" info &&
	test_grep "^documents: 2$" info &&
	test_grep "^tokens: 5$" info
'

test_expect_success VOCAB 'llm.c shards: --decode --doc N leaves out the end-of-text that starts each document' '
	llmc hi.bin 5 50256 39 72 50256 0 &&
	gpt-preprocess --decode hi.bin >all &&
	printf "<|endoftext|>Hi<|endoftext|>!" >expect && test_cmp expect all &&
	gpt-preprocess --decode hi.bin --doc 0 >doc0 &&
	printf "Hi" >expect && test_cmp expect doc0 &&
	gpt-preprocess --decode hi.bin --doc 1 >doc1 &&
	printf "!" >expect && test_cmp expect doc1
'

test_expect_success 'damaged llm.c shards' '
	llmc bad.bin 9 50256 72 &&
	info_fails bad.bin "bad.bin: the header says 9 tokens" &&
	perl -e "print pack(\"l<256\", 20240520, 2, 0, (0) x 253)" >v2.bin &&
	info_fails v2.bin "version 2; only version 1" &&
	head -c 100 shard.bin >short.bin &&
	info_fails short.bin "truncated llm.c shard"
'

test_expect_success 'llm.c.s Llama 3 shards and eval files are named as such, not as a missing .idx' '
	perl -e "print pack(\"l<256\", 20240801, 7, 2, (0) x 253), pack(\"L<*\", 128000, 9)" >l3_train_000001.bin &&
	info_fails l3_train_000001.bin "l3_train_000001.bin: an llm.c shard of Llama 3 tokens .magic 20240801, uint32 ids.; gptkit trains GPT-2" &&
	perl -e "print pack(\"l<256\", 20240522, 1, 0, (0) x 253)" >hellaswag_val.bin &&
	info_fails hellaswag_val.bin "hellaswag_val.bin: an llm.c evaluation file .magic 20240522"
'

test_expect_success 'an interrupted run leaves no pair behind' '
	mkfifo fifo &&
	{ gpt-preprocess -t bytes -o killed - <fifo & } && pid=$! &&
	exec 9>fifo && printf "some text" >&9 && sleep 0.3 &&
	kill -9 $pid && exec 9>&- && { wait $pid || :; } &&
	! test -e killed.bin && ! test -e killed.idx
'

test_done
