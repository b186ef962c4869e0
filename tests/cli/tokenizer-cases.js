// tokenizer-cases.js OUT [KB]: writes the hard cases for the tokenizer
// comparison: contractions, runs of spaces and newlines, numbers, Unicode
// whitespace, CJK, emoji, combining marks, special-token look-alikes and
// invalid UTF-8, as fixed strings and as a seeded random mix (about KB
// kilobytes; default 300). NUL bytes included: such files look binary to
// gpt-preprocess, which tokenizes them all the same.
'use strict';
const fs = require('fs');
const fixed = [
	"I'm sure you'll see they've said it's what we'd do, and they're right.",
	"DON'T SHOUT'S 'S 'T 'Re 'LL o'clock rock'n'roll ''' '",
	"it’s curly ‘quoted’ “text”",
	"  leading spaces", "trailing spaces   ", "a  b   c    d     e",
	"\n", "\n\n", "\n\n\n\n", " \n", "  \n  \n", "\t\tindented\n\t", "\r\n\r\n", "x \n y",
	"   \n\n   word", "end with spaces   ",
	"1234567890 3.14159 -42 1e10 0x1F 1,000,000 ²³ ½ Ⅻ ٣٤٥ १२३",
	"int main(void) { return a->b[i] == 0 ? -1 : x << 2; } // comment",
	"def f(x):\n    return {'a': [1, 2], \"b\": None}\n",
	"<html><body class=\"x\">&amp; &#x27;</body></html>",
	"https://example.com/path?q=1&r=%20#frag user@example.org",
	"中文文本，包含标点。日本語のテキスト、カタカナ。한국어 텍스트입니다.",
	"Ελληνικά Русский текст עברית العربية हिन्दी ไทย",
	"emoji 😀👍🏽🇫🇷👨‍👩‍👧‍👦 ❤️ ✔︎ 🏳️‍🌈",
	"combining e\u0301 a\u0300\u0316 Z\u0351\u036b\u0343",
	"nbsp\u00a0x nel\u0085x ideographic\u3000x line\u2028sep para\u2029sep thin\u2009x zwsp\u200bx bom\ufeffx ogham\u1680x",
	"mongolian\u180ex narrow\u202fx math\u205fx vt\u000bx ff\u000cx",
	"<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "<|endoftext", "|endoftext|>", "<| endoftext |>",
	"𝐀𝐁𝐂 𐐀 \u{10FFFF} \u{E000} \u{1F9FF}",
];
const invalid = [
	[0xff], [0xfe, 0xff], [0x80], [0xbf, 0x80], [0xc0, 0x80], [0xc1, 0xbf], [0xe2, 0x80], [0xe2],
	[0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xf5, 0x80], [0xf0, 0x9f, 0x98],
	[0xe0, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xc3], [0xc3, 0x28], [0xe2, 0x28, 0xa1],
];
let seed = 12345;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
const out = [];
for (const s of fixed) out.push(Buffer.from(s + "\n"));
for (const b of invalid) out.push(Buffer.from("x"), Buffer.from(b), Buffer.from(" y"), Buffer.from(b), Buffer.from("\n"));
const frags = [];
for (const s of fixed) for (const w of s.split(/(\s+)/)) if (w) frags.push(Buffer.from(w));
for (const b of invalid) frags.push(Buffer.from(b));
for (const s of [" ", "  ", "\n", "\n\n", "'s", "'ll", "'", "0", "12", "é", "中", "😀", "\u0301", "\u00a0", "\u0085", "\t"])
	frags.push(Buffer.from(s));
const want = 1024 * parseInt(process.argv[3] || '300', 10);
let size = out.reduce((n, b) => n + b.length, 0);
while (size < want) {
	const b = rnd(50) === 0 ? Buffer.from(Array.from({ length: 1 + rnd(12) }, () => rnd(256))) : frags[rnd(frags.length)];
	out.push(b);
	size += b.length;
}
fs.writeFileSync(process.argv[2], Buffer.concat(out));
