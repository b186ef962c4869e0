#!/bin/sh
# A single document larger than 100 MB goes through and comes back intact.
. "$(dirname "$0")/test-lib.sh"

tok=bytes
test -f "$GPT_ROOT/share/gpt2/encoder.json" && tok=gpt2

test_expect_success "a 101 MB document ($tok tokenizer, -j2)" '
	yes "The quick brown fox jumps over the lazy dog; it'"'"'s 12345 times.  " | head -c 101000000 >big.txt &&
	gpt-preprocess -t $tok -j 2 -o big big.txt &&
	gpt-preprocess --info big >info &&
	test_grep "^documents: 1$" info &&
	gpt-preprocess -t $tok --decode big --doc 0 | cmp - big.txt
'

test_expect_success 'gzip-compressed, from stdin' '
	gzip -1 -c big.txt | gpt-preprocess -t $tok -o bigz - &&
	cmp big.bin bigz.bin && cmp big.idx bigz.idx
'

test_done
