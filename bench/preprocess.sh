#!/bin/sh
# bench/preprocess.sh [MB]: tokenizes the same text (about MB megabytes,
# default 128, gathered from man pages, licenses, documentation and C headers
# on this machine) with gpt-preprocess -j1, gpt-preprocess -j2 and npm
# tiktoken (node), in one run, and prints MB/s and tokens/s for each and the
# ratios. Targets: -j1 at least as fast as tiktoken; -j2 at least 1.8x -j1.
# Each is run REPEAT times (default 3) and the best time is kept, which
# takes out most of the noise of a shared machine. gpt-preprocess is timed
# as a whole command (start, vocabulary, reading, writing, fsync); tiktoken
# for its encoding calls only.
set -eu
cd "$(dirname "$0")/.."
GPT_ROOT=$(pwd)
export GPT_ROOT
MB=${1:-128}
REPEAT=${REPEAT:-3}
BIN=bin/gpt-preprocess
[ -x "$BIN" ] || { echo "bench: build first (make)" >&2; exit 1; }
[ -f share/gpt2/encoder.json ] || { echo "bench: no GPT-2 vocabulary; run make deps" >&2; exit 1; }
have_node=1
{ command -v node >/dev/null 2>&1 && [ -d deps/node_modules/tiktoken ]; } || have_node=0

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpt-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
want=$((MB * 1000000))
# Varied text first; it is repeated only if the machine has too little.
{
	cat /usr/share/common-licenses/* 2>/dev/null || :
	find /usr/share/man -name '*.gz' 2>/dev/null | sort | head -n 4000 | xargs -r gzip -dc 2>/dev/null || :
	find /usr/share/doc -name '*.txt' -o -name 'copyright' 2>/dev/null | sort | xargs -r cat 2>/dev/null || :
	find /usr/include -name '*.h' 2>/dev/null | sort | xargs -r cat 2>/dev/null || :
} | head -c "$want" >"$tmp/base.txt"
: >"$tmp/text.txt"
while [ "$(wc -c <"$tmp/text.txt")" -lt "$want" ]; do cat "$tmp/base.txt" >>"$tmp/text.txt"; done
# Valid UTF-8 only, so that every tokenizer sees the same characters.
iconv -f UTF-8 -t UTF-8 -c "$tmp/text.txt" | head -c "$want" >"$tmp/in.txt"
bytes=$(wc -c <"$tmp/in.txt")

now () { date +%s.%N; }
min () { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
run_ours () { # JOBS -> "SECONDS TOKENS" (best of REPEAT)
	best=
	for _ in $(seq "$REPEAT"); do
		t0=$(now)
		GPT_PROGRESS=0 "$BIN" -j "$1" --no-append-eod -o "$tmp/out$1" "$tmp/in.txt"
		t1=$(now)
		best=$(min "$best" "$(echo "$t1 - $t0" | bc -l)")
	done
	tokens=$("$BIN" --info "$tmp/out$1" | sed -n 's/^tokens: //p')
	echo "$best $tokens"
}
run_tiktoken () { # -> "SECONDS TOKENS" (best of REPEAT)
	best=
	for _ in $(seq "$REPEAT"); do
		set -- $(node bench/tiktoken-bench.js "$tmp/in.txt")
		best=$(min "$best" "$1")
		tokens=$2
	done
	echo "$best $tokens"
}

echo "bench/preprocess.sh: $(echo "scale=1; $bytes / 1000000" | bc -l) MB of text, $(nproc) CPUs, best of $REPEAT, $(date -u +%Y-%m-%d)"
set -- $(run_ours 1); s1=$1 k1=$2
set -- $(run_ours 2); s2=$1 k2=$2
cmp -s "$tmp/out1.bin" "$tmp/out2.bin" || { echo "bench: -j1 and -j2 outputs differ" >&2; exit 1; }
line () { # NAME SECONDS TOKENS
	printf "%-22s %8.2f s %8.2f MB/s %12.0f tokens/s  (%s tokens)\n" "$1" "$2" \
		"$(echo "$bytes / $2 / 1000000" | bc -l)" "$(echo "$3 / $2" | bc -l)" "$3"
}
line "gpt-preprocess -j1" "$s1" "$k1"
line "gpt-preprocess -j2" "$s2" "$k2"
if [ "$have_node" = 1 ]; then
	set -- $(run_tiktoken); st=$1 kt=$2
	line "tiktoken (node)" "$st" "$kt"
	printf "ratio -j1 / tiktoken:  %.2fx (target >= 1)\n" "$(echo "$st / $s1" | bc -l)"
else
	echo "tiktoken (node): not installed (make deps); no comparison"
fi
printf "ratio -j2 / -j1:       %.2fx (target >= 1.8)\n" "$(echo "$s1 / $s2" | bc -l)"
