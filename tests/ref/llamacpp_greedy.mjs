// Greedy tokens from llama.cpp (through npm's node-llama-cpp, which ships prebuilt
// llama.cpp binaries) for a GGUF file and a prompt, as JSON: {prompt_ids, ids}.
//   node llamacpp_greedy.mjs MODEL.gguf PROMPT N
// Run from a directory whose node_modules holds node-llama-cpp (NODE_PATH does not
// apply to ES modules): tests/cli/t6040-gguf-llamacpp.sh copies it there.
import {getLlama} from "node-llama-cpp";
const [,, modelPath, prompt, n] = process.argv;
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 64});
const seq = context.getSequence();
const ids = model.tokenize(prompt);
const out = [];
for await (const t of seq.evaluate(ids, {temperature: 0})) {
	out.push(t);
	if (out.length >= Number(n)) break;
}
console.log(JSON.stringify({prompt_ids: Array.from(ids), ids: out}));
process.exit(0);
