#!/bin/sh
# GPT-2 token ids equal OpenAI's tokenizer (npm tiktoken, r50k_base) on a
# large, varied text built from the machine (man pages, licenses, our own
# sources) plus generated hard cases, invalid UTF-8 included.
. "$(dirname "$0")/test-lib.sh"

test_have_prereq NODE &&
	GPT_ROOT="$GPT_ROOT" node -e "require(process.env.GPT_ROOT + \"/deps/node_modules/tiktoken\")" 2>/dev/null &&
	test_set_prereq TIKTOKEN

REF="node $GPT_ROOT/tests/cli/tiktoken-ids.js"

test_expect_success NODE 'build the test text' '
	mkdir corpus &&
	node "$GPT_ROOT/tests/cli/tokenizer-cases.js" corpus/cases.txt 400 &&
	for f in $(ls /usr/share/man/man1/*.gz 2>/dev/null | head -n 40); do gzip -dc "$f"; done >corpus/man.txt &&
	cat /usr/share/common-licenses/* >corpus/licenses.txt 2>/dev/null || : &&
	cat "$GPT_ROOT"/lib/*/*.c "$GPT_ROOT"/lib/*/*.h "$GPT_ROOT"/tests/cli/*.sh >corpus/source.txt &&
	seq 1 3000 | tr "\n" " " >corpus/numbers.txt &&
	printf "word  \n\n\n   \t \r\n  x\n\n" >corpus/spaces.txt &&
	cat corpus/*.txt >all.txt &&
	test $(wc -c <all.txt) -gt 1000000
'

test_expect_success NODE,TIKTOKEN,VOCAB 'one document: the ids equal tiktoken' '
	gpt-preprocess --no-append-eod -o all all.txt &&
	$REF ref.bin all.txt &&
	cmp all.bin ref.bin
'

test_expect_success NODE,TIKTOKEN,VOCAB 'the invalid-UTF-8 heavy cases alone, at -j2' '
	gpt-preprocess -j 2 --no-append-eod -o cases corpus/cases.txt &&
	$REF cases.ref corpus/cases.txt &&
	cmp cases.bin cases.ref
'

test_expect_success NODE,TIKTOKEN,VOCAB 'many documents with end-of-text, any -j' '
	mkdir docs && split -b 30001 -d -a 4 all.txt docs/part &&
	gpt-preprocess -j 2 -o docs docs &&
	gpt-preprocess -j 1 -o docs1 docs &&
	cmp docs.bin docs1.bin && cmp docs.idx docs1.idx &&
	$REF --eod docs.ref docs/part* &&
	cmp docs.bin docs.ref
'

test_expect_success VOCAB 'decoding gives the bytes back' '
	gpt-preprocess -o rt all.txt &&
	gpt-preprocess --decode rt --doc 0 >back.txt &&
	cmp all.txt back.txt
'

test_expect_success VOCAB 'a few known ids (r50k_base)' '
	printf "Hello world<|endoftext|> it'"'"'s" >h.txt &&
	gpt-preprocess --no-append-eod -o h h.txt &&
	od -An -tu2 h.bin | tr -s " " | sed "s/^ //" >got &&
	echo "15496 995 50256 340 338" >want &&
	test_cmp want got
'

test_expect_success VOCAB '--vocab with Hugging Face file names' '
	mkdir hf && cp "$GPT_ROOT/share/gpt2/encoder.json" hf/vocab.json &&
	cp "$GPT_ROOT/share/gpt2/vocab.bpe" hf/merges.txt &&
	gpt-preprocess --vocab hf --no-append-eod -o hf h.txt &&
	cmp h.bin hf.bin
'

test_expect_success VOCAB '--vocab with the names of Megatron-LM and PaddleFleetX (gpt2-vocab.json, gpt2-merges.txt)' '
	mkdir mg && cp "$GPT_ROOT/share/gpt2/encoder.json" mg/gpt2-vocab.json &&
	cp "$GPT_ROOT/share/gpt2/vocab.bpe" mg/gpt2-merges.txt &&
	gpt-preprocess --vocab mg --no-append-eod -o mg h.txt &&
	cmp h.bin mg.bin
'

test_done
