// tiktoken-bench.js FILE: tokenizes FILE with npm tiktoken (r50k_base, the
// GPT-2 encoding) in chunks of whole lines and prints "SECONDS TOKENS BYTES".
// The time covers the encoding only (not node's start or the file read).
'use strict';
const fs = require('fs');
const path = require('path');
const root = process.env.GPT_ROOT || path.join(__dirname, '..');
const { get_encoding } = require(path.join(root, 'deps/node_modules/tiktoken'));
const enc = get_encoding('r50k_base');
const data = fs.readFileSync(process.argv[2]);
const chunks = [];
for (let at = 0; at < data.length;) {
	let end = Math.min(data.length, at + (1 << 20));
	const nl = data.indexOf(10, end);
	end = nl < 0 ? data.length : nl + 1;
	chunks.push(data.toString('utf8', at, end));
	at = end;
}
const t0 = process.hrtime.bigint();
let tokens = 0;
for (const c of chunks) tokens += enc.encode(c, 'all').length;
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${s} ${tokens} ${data.length}`);
