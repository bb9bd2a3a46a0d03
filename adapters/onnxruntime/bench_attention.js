#!/usr/bin/env node
// Times ONNX Runtime's Attention operator (the model ort_attention.js checks)
// around session.run alone, for comparison with `attncheck bench` run in the
// same time window (docs/third-party.md). No mask, default scale, random
// inputs in [-1, 1), fp32, [batch, heads, rows, dim].
//
//   node adapters/onnxruntime/bench_attention.js --n-q 1,16 --n-k 16384 --d 128 --heads 8 --threads 2
//   node adapters/onnxruntime/bench_attention.js --n 1024,4096 --d 64 --threads 1
//
// Like Google Benchmark: each repetition calls run until --min-time seconds
// have passed and records the mean time per call; the median of the
// repetitions is printed (with their minimum and maximum).
'use strict';

const ort = require('onnxruntime-node');
const { attentionModel } = require('./ort_attention.js');

const usage = 'usage: bench_attention.js (--n N,... | --n-q N,... --n-k N,...) [--d D] [--heads H] [--batch B] ' +
              '[--threads T] [--repetitions R] [--min-time S]';

function parseArgs(argv) {
  const lists = new Set(['--n', '--n-q', '--n-k']);
  const numbers = { '--d': 64, '--heads': 1, '--batch': 1, '--threads': 1, '--repetitions': 5, '--min-time': 0.5 };
  const args = { ...numbers, '--n': [], '--n-q': [], '--n-k': [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [name, value] = [argv[i], argv[i + 1]];
    if (!(name in args) || value === undefined) throw new Error(`unknown option or missing value: ${name}\n${usage}`);
    const parsed = (lists.has(name) ? value.split(',') : [value]).map(Number);
    if (parsed.some((x) => !(x > 0))) throw new Error(`${name} ${value}: expected positive numbers`);
    args[name] = lists.has(name) ? parsed : parsed[0];
  }
  const shapes = args['--n'].map((n) => [n, n]);
  for (const nq of args['--n-q']) for (const nk of args['--n-k']) shapes.push([nq, nk]);
  if (!shapes.length) throw new Error(usage);
  return { ...args, shapes };
}

function randomTensor(count, seed) {
  const x = new Float32Array(count);
  let s = seed >>> 0;
  for (let i = 0; i < count; ++i) {  // xorshift32: reproducible, cheap
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    x[i] = s / 2147483648 - 1;
  }
  return x;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const session = await ort.InferenceSession.create(
    attentionModel({ causal: false, mask: false, scale: undefined, weights: false }),
    { executionProviders: ['cpu'], intraOpNumThreads: a['--threads'], interOpNumThreads: 1,
      executionMode: 'sequential', logSeverityLevel: 3 });
  console.log(`onnxruntime-node ${ort.env.versions.node}, Attention opset 23, CPU, ${a['--threads']} intra-op ` +
              `thread(s), batch ${a['--batch']}, heads ${a['--heads']}, d ${a['--d']}, ${a['--repetitions']} ` +
              `repetitions of >= ${a['--min-time']} s`);
  for (const [nq, nk] of a.shapes) {
    const [b, h, d] = [a['--batch'], a['--heads'], a['--d']];
    const feeds = {
      Q: new ort.Tensor('float32', randomTensor(b * h * nq * d, 1), [b, h, nq, d]),
      K: new ort.Tensor('float32', randomTensor(b * h * nk * d, 2), [b, h, nk, d]),
      V: new ort.Tensor('float32', randomTensor(b * h * nk * d, 3), [b, h, nk, d]),
    };
    await session.run(feeds);  // warm-up
    const perCall = [];
    for (let r = 0; r < a['--repetitions']; ++r) {
      let calls = 0, seconds = 0;
      while (seconds < a['--min-time']) {
        const start = process.hrtime.bigint();
        await session.run(feeds);
        seconds += Number(process.hrtime.bigint() - start) / 1e9;
        ++calls;
      }
      perCall.push(seconds / calls);
    }
    perCall.sort((x, y) => x - y);
    const median = perCall[Math.floor(perCall.length / 2)];
    const flops = 4 * b * h * nq * nk * d;  // QKᵀ and A·V
    console.log(`b${b}h${h}q${nq}k${nk}d${d}  median ${(median * 1e3).toFixed(3)} ms ` +
                `(min ${(perCall[0] * 1e3).toFixed(3)}, max ${(perCall[perCall.length - 1] * 1e3).toFixed(3)})  ` +
                `${(flops / median / 1e9).toFixed(2)} GFLOP/s`);
  }
  await session.release();
}

main().catch((e) => {
  console.error(`bench_attention.js: ${e.message}`);
  process.exit(2);
});
