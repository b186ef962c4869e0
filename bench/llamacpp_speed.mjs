// llama.cpp's prompt and generation speed for a GGUF file, through npm's
// node-llama-cpp (prebuilt llama.cpp, CPU only), as bench/infer-cpu.sh
// measures gpt-infer: a prompt evaluated in one batch, then N tokens
// generated greedily one at a time, with a given number of threads.
//   node llamacpp_speed.mjs MODEL.gguf PROMPT_FILE N THREADS
// prints: PROMPT_TOKENS PROMPT_TOK_PER_S GENERATED GEN_TOK_PER_S
// Run from a directory whose node_modules holds node-llama-cpp (ES modules
// ignore NODE_PATH): bench/infer-cpu.sh copies it there.
import {getLlama} from "node-llama-cpp";
import {readFileSync} from "node:fs";
const [,, modelPath, promptFile, n, threads] = process.argv;
const llama = await getLlama({gpu: false, build: "never", logLevel: "error",
	maxThreads: Number(threads)});
const model = await llama.loadModel({modelPath, useMmap: false});
const context = await model.createContext({contextSize: 1024, batchSize: 512,
	threads: {ideal: Number(threads), min: Number(threads)}});
const seq = context.getSequence();
const ids = model.tokenize(readFileSync(promptFile, "utf8").replace(/\n$/, ""));
const last = ids[ids.length - 1];
let t0 = process.hrtime.bigint();
await seq.evaluateWithoutGeneratingNewTokens(ids.slice(0, -1));
const tPrompt = Number(process.hrtime.bigint() - t0) / 1e9;
// the last prompt token starts generation: each later step evaluates one token
let got = 0;
t0 = process.hrtime.bigint();
for await (const t of seq.evaluate([last], {temperature: 0})) {
	void t;
	if (++got >= Number(n)) break;
}
const tGen = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`${ids.length - 1} ${((ids.length - 1) / tPrompt).toFixed(1)} ${got} ${(got / tGen).toFixed(1)}`);
process.exit(0);
