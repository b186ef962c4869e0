// tiktoken-ids.js [--eod] OUT IN...: the token ids of OpenAI's tokenizer
// (tiktoken, r50k_base = GPT-2) for the bytes of each IN (followed by 50256
// with --eod), written to OUT as uint16 little endian (the layout of a
// gpt-preprocess .bin). Exits 3 when tiktoken is
// not installed (the caller skips). tiktoken takes strings, so raw bytes are
// split the way gpt-preprocess documents it: at <|endoftext|> (id 50256),
// then into valid UTF-8 runs (encoded by tiktoken) and runs of bytes that
// start no valid character, each merged as one piece by tiktoken's rule
// (the pair whose concatenation has the lowest rank merges first).
'use strict';
const fs = require('fs');
const path = require('path');
let tiktoken;
try {
	tiktoken = require(path.join(process.env.GPT_ROOT || path.join(__dirname, '../..'), 'deps/node_modules/tiktoken'));
} catch (e) {
	process.stderr.write('tiktoken is not installed; run make deps\n');
	process.exit(3);
}
const enc = tiktoken.get_encoding('r50k_base');
const EOT = Buffer.from('<|endoftext|>');

function charLen(b, i) {
	const c = b[i], n = b.length - i;
	const cont = (k) => k < n && (b[i + k] & 0xc0) === 0x80;
	if (c < 0x80) return 1;
	if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (!cont(1) || !cont(2)) return 0;
		if ((c === 0xe0 && b[i + 1] < 0xa0) || (c === 0xed && b[i + 1] > 0x9f)) return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (!cont(1) || !cont(2) || !cont(3)) return 0;
		if ((c === 0xf0 && b[i + 1] < 0x90) || (c === 0xf4 && b[i + 1] > 0x8f)) return 0;
		return 4;
	}
	return 0;
}

function rankOf(bytes) {
	try { return enc.encode_single_token(bytes); } catch (e) { return -1; }
}

function bpe(bytes) {
	const whole = rankOf(bytes);
	if (whole >= 0) return [whole];
	let parts = Array.from(bytes, (x) => Uint8Array.of(x));
	for (;;) {
		let best = -1, bestRank = Infinity;
		for (let i = 0; i + 1 < parts.length; i++) {
			const cat = new Uint8Array(parts[i].length + parts[i + 1].length);
			cat.set(parts[i]); cat.set(parts[i + 1], parts[i].length);
			const r = rankOf(cat);
			if (r >= 0 && r < bestRank) { bestRank = r; best = i; }
		}
		if (best < 0) break;
		const cat = new Uint8Array(parts[best].length + parts[best + 1].length);
		cat.set(parts[best]); cat.set(parts[best + 1], parts[best].length);
		parts.splice(best, 2, cat);
	}
	return parts.map(rankOf);
}

function ordinary(seg, out) {
	const dec = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
	let i = 0;
	while (i < seg.length) {
		let j = i;
		for (let k; j < seg.length && (k = charLen(seg, j)) > 0; j += k);
		if (j > i) for (const id of enc.encode_ordinary(dec.decode(seg.subarray(i, j)))) out.push(id);
		let m = j;
		while (m < seg.length && charLen(seg, m) === 0) m++;
		if (m > j) for (const id of bpe(seg.subarray(j, m))) out.push(id);
		i = m;
	}
}

const args = process.argv.slice(2);
const eod = args[0] === '--eod';
if (eod) args.shift();
const out = [];
for (const file of args.slice(1)) {
	const data = fs.readFileSync(file);
	let at = 0;
	for (;;) {
		const hit = data.indexOf(EOT, at);
		ordinary(data.subarray(at, hit < 0 ? data.length : hit), out);
		if (hit < 0) break;
		out.push(50256);
		at = hit + EOT.length;
	}
	if (eod) out.push(50256);
}
const buf = Buffer.alloc(out.length * 2);
out.forEach((id, k) => buf.writeUInt16LE(id, 2 * k));
fs.writeFileSync(args[0], buf);
