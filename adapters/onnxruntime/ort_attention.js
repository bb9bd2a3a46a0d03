#!/usr/bin/env node
// ONNX Runtime's standard Attention operator (ONNX opset 23, CPU execution
// provider of onnxruntime-node) checked through attncheck's subprocess
// protocol (docs/protocol.md):
//
//   attncheck verify --impl exec:'node adapters/onnxruntime/ort_attention.js'
//
// Install once (the package's postinstall script downloads GPU binaries and
// fails offline; the CPU binaries are in the package itself):
//
//   npm ci --ignore-scripts --prefix adapters/onnxruntime
//
// The model, one Attention node with inputs Q, K, V [batch, heads, rows, dim]
// and an optional boolean attn_mask [mask_batch, mask_heads, n_q, n_k], is
// built in memory (ONNX protobuf via onnx-proto) with symbolic sizes, so one
// session serves every shape with the same attributes.
//
// What ORT computes: scale·QKᵀ (the `scale` attribute, left out when the case
// asks for 1/√d_k so that ORT's own default is checked), the causal top-left
// rule (`is_causal`), the boolean mask with its broadcast leading dimensions,
// softmax, A·V, the weights (`qk_matmul_output_mode` 3), and the zeros of a
// row whose every key is masked (policy `zero`).
// What this adapter does itself, so that a verdict on it is never ORT's:
//   - rejects non-finite Q, K, V, a scale that is not finite and positive,
//     key lengths outside [0, n_k], and (policy `reject`) empty rows, naming
//     the tensor and index (`invalid`); ORT has no such checks;
//   - builds the boolean mask for key lengths, for the bottom-right causal
//     rule when n_q ≠ n_k, and for key lengths combined with an explicit mask
//     (ORT then applies it; opset 23 has neither input);
//   - declines (`unsupported`, naming the row) a row whose fp32 logits
//     overflow or whose output ORT returns non-finite (DESIGN.md "Range"),
//     with the logits recomputed here in fp32, since ORT keeps them.
// Temperature is not offered by the operator and is not declared.
//
// Each `ok` reply carries "compute_seconds": the time of session.run alone.
// ORT's intra-op threads are the case's "threads" (what bench --threads asked
// for; 1 when absent); ATTNCHECK_ORT_THREADS, when set, overrides it (0: ORT's
// default, every core).
'use strict';

const ort = require('onnxruntime-node');
const { onnx } = require('onnx-proto');

const ABI_VERSION = 1;
const FEATURES = ['cross', 'dv_ne_dk', 'batch_heads', 'scale', 'causal_top_left', 'causal_bottom_right',
  'key_padding', 'explicit_mask', 'empty_row_reject', 'empty_row_zero', 'weights'];
const MASK_KINDS = ['none', 'causal_top_left', 'causal_bottom_right', 'explicit'];
const FLOAT_MAX = 3.4028234663852886e38;
const THREADS_TEXT = process.env.ATTNCHECK_ORT_THREADS;
const THREADS = THREADS_TEXT === undefined ? null  // from each case
  : /^[0-9]+$/.test(THREADS_TEXT) ? Number(THREADS_TEXT) : -1;  // 0: ORT's default (every core)

class InvalidInput extends Error {}
class Unsupported extends Error {}

// ---------------------------------------------------------------- the model

// A graph input or output: float or bool tensor with named (symbolic) sizes.
function valueInfo(name, elemType, dims) {
  return { name, type: { tensorType: { elemType, shape: { dim: dims.map((d) => ({ dimParam: d })) } } } };
}

// The ONNX model of one Attention node; `scale` undefined keeps ORT's default.
function attentionModel({ causal, mask, scale, weights }) {
  const F = onnx.TensorProto.DataType.FLOAT;
  const attr = onnx.AttributeProto.AttributeType;
  const inputs = [valueInfo('Q', F, ['batch', 'heads', 'n_q', 'd_k']), valueInfo('K', F, ['batch', 'heads', 'n_k', 'd_k']),
    valueInfo('V', F, ['batch', 'heads', 'n_k', 'd_v'])];
  const outputs = [valueInfo('Y', F, ['batch', 'heads', 'n_q', 'd_v'])];
  const nodeInputs = ['Q', 'K', 'V'];
  const nodeOutputs = ['Y'];
  const attribute = [];
  if (mask) {
    inputs.push(valueInfo('attn_mask', onnx.TensorProto.DataType.BOOL, ['mask_batch', 'mask_heads', 'n_q', 'n_k']));
    nodeInputs.push('attn_mask');
  }
  if (weights) {  // outputs: Y, present_key, present_value, qk_matmul_output
    outputs.push(valueInfo('W', F, ['batch', 'heads', 'n_q', 'n_k']));
    nodeOutputs.push('', '', 'W');
    attribute.push({ name: 'qk_matmul_output_mode', type: attr.INT, i: 3 });  // 3: after the softmax
  }
  if (causal) attribute.push({ name: 'is_causal', type: attr.INT, i: 1 });
  if (scale !== undefined) attribute.push({ name: 'scale', type: attr.FLOAT, f: scale });
  const model = onnx.ModelProto.create({
    irVersion: 10,
    producerName: 'attncheck',
    opsetImport: [{ domain: '', version: 23 }],
    graph: {
      name: 'attention',
      node: [{ opType: 'Attention', name: 'attention', input: nodeInputs, output: nodeOutputs, attribute }],
      input: inputs,
      output: outputs,
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

// One session per set of attributes and thread count; a few per run at most.
const sessions = new Map();
const MAX_SESSIONS = 32;

async function sessionFor(options) {
  const key = JSON.stringify(options);
  let session = sessions.get(key);
  if (session === undefined) {
    if (sessions.size >= MAX_SESSIONS) {
      const [oldKey, old] = sessions.entries().next().value;
      sessions.delete(oldKey);
      await old.release();
    }
    session = await ort.InferenceSession.create(attentionModel(options), {
      executionProviders: ['cpu'],
      intraOpNumThreads: options.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      logSeverityLevel: 3,  // errors only, on standard error
    });
    sessions.set(key, session);
  }
  return session;
}

// ---------------------------------------------------------------- the case

// Where query i may read key j, every mask combined (DESIGN.md semantics).
function allowedFunction(p) {
  return (b, h, i, j) => {
    if (p.mask_kind === 'causal_top_left' && j > i) return false;
    if (p.mask_kind === 'causal_bottom_right' && j > i + (p.n_k - p.n_q)) return false;
    if (p.key_lengths !== null && j >= p.key_lengths[b]) return false;
    if (p.mask !== null) {
      const mb = p.mask_batch === 1 ? 0 : b;
      const mh = p.mask_heads === 1 ? 0 : h;
      if (p.mask[((mb * p.mask_heads + mh) * p.n_q + i) * p.n_k + j] === 0) return false;
    }
    return true;
  };
}

// The adapter's own input rules (ORT checks none of them): InvalidInput names
// the tensor or option and the index.
function validate(p, q, k, v, allowed) {
  for (const [name, x, d] of [['Q', q, p.d_k], ['K', k, p.d_k], ['V', v, p.d_v]]) {
    const rows = name === 'Q' ? p.n_q : p.n_k;
    for (let at = 0; at < x.length; ++at) {
      if (!Number.isFinite(x[at])) {
        const col = at % d, row = Math.floor(at / d) % rows, slice = Math.floor(at / (d * rows));
        throw new InvalidInput(`${name}[b=${Math.floor(slice / p.heads)}][h=${slice % p.heads}][row=${row}][col=${col}] ` +
                               `is not finite (${x[at]})`);
      }
    }
  }
  for (const [name, x] of [['scale', p.scale], ['temperature', p.temperature]])
    if (!(Number.isFinite(x) && x > 0)) throw new InvalidInput(`${name} is ${x}; it must be finite and > 0`);
  // Not declared, so never sent; a valid τ ≠ 1 here is attncheck's mistake, not bad input.
  if (p.temperature !== 1) throw new Error(`temperature ${p.temperature} was sent, though the adapter does not declare it`);
  if (p.key_lengths !== null) {
    if (p.key_lengths.length !== p.batch)
      throw new InvalidInput(`key_lengths has ${p.key_lengths.length} entries; expected batch = ${p.batch}`);
    p.key_lengths.forEach((n, b) => {
      if (!Number.isInteger(n) || n < 0 || n > p.n_k) throw new InvalidInput(`key_lengths[${b}] = ${n} is outside [0, n_k = ${p.n_k}]`);
    });
  }
  if (p.empty_row_policy === 'reject') {
    for (let b = 0; b < p.batch; ++b)
      for (let h = 0; h < p.heads; ++h)
        for (let i = 0; i < p.n_q; ++i) {
          let any = false;
          for (let j = 0; j < p.n_k && !any; ++j) any = allowed(b, h, i, j);
          if (!any) throw new InvalidInput(`empty row: every key is masked for b=${b} h=${h} row=${i}`);
        }
  }
}

// How the case maps onto the operator: the attributes and the mask tensor
// (null when ORT's own causal rule or nothing is enough).
function operatorInputs(p) {
  const causalNative = p.mask_kind === 'causal_top_left' || (p.mask_kind === 'causal_bottom_right' && p.n_q === p.n_k);
  const needsMask = p.mask_kind === 'explicit' || p.key_lengths !== null ||
                    (p.mask_kind === 'causal_bottom_right' && !causalNative);
  let mask = null;
  if (needsMask) {
    if (p.mask_kind === 'explicit' && p.key_lengths === null) {
      mask = new ort.Tensor('bool', p.mask, [p.mask_batch, p.mask_heads, p.n_q, p.n_k]);
    } else {
      // Built here: key lengths vary per batch element; the explicit mask's
      // head dimension is kept. The causal rule stays ORT's where it can.
      const mb = p.key_lengths !== null ? p.batch : 1;
      const mh = p.mask_kind === 'explicit' ? p.mask_heads : 1;
      const data = new Uint8Array(mb * mh * p.n_q * p.n_k);
      const ok = allowedFunction(causalNative ? { ...p, mask_kind: 'none' } : p);
      for (let b = 0; b < mb; ++b)
        for (let h = 0; h < mh; ++h)
          for (let i = 0; i < p.n_q; ++i)
            for (let j = 0; j < p.n_k; ++j) data[((b * mh + h) * p.n_q + i) * p.n_k + j] = ok(b, h, i, j) ? 1 : 0;
      mask = new ort.Tensor('bool', data, [mb, mh, p.n_q, p.n_k]);
    }
  }
  // attncheck sends 1/√d_k as a double when the problem gives no scale.
  const defaultScale = p.scale === 1 / Math.sqrt(p.d_k);
  return {
    options: { causal: causalNative, mask: mask !== null, scale: defaultScale ? undefined : Math.fround(p.scale),
               weights: p.weights },
    mask,
  };
}

// ---------------------------------------------------------- the decline

// A float as C's printf writes it: inf, -inf, nan.
function text(x) {
  if (Number.isNaN(x)) return 'nan';
  return x === Infinity ? 'inf' : x === -Infinity ? '-inf' : String(x);
}

function returned(row) {
  if (row.some((x) => Number.isNaN(x))) return 'NaN';
  if (row.some((x) => !Number.isFinite(x))) return 'inf';
  return row.every((x) => x === 0) ? 'zeros' : 'finite values';
}

// Throws Unsupported for the first row [b][h][i] with a readable key where a
// readable fp32 logit is +inf or NaN, every readable logit is -inf, or ORT's
// output or weights are not finite. The logits are recomputed here as ORT
// computes them (fp32 dot product times fp32 scale), only in slices where
// one could overflow: no partial sum exceeds d_k·max|q|·max|k|. A readable
// -inf logit beside a finite one is kept: its weight is exactly 0 either way.
function declineOverflowedRows(p, q, k, out, weights, allowed) {
  const scale = Math.fround(p.scale);
  for (let b = 0; b < p.batch; ++b)
    for (let h = 0; h < p.heads; ++h) {
      const slice = b * p.heads + h;
      const Q = q.subarray(slice * p.n_q * p.d_k, (slice + 1) * p.n_q * p.d_k);
      const K = k.subarray(slice * p.n_k * p.d_k, (slice + 1) * p.n_k * p.d_k);
      let qmax = 0, kmax = 0;
      for (const x of Q) qmax = Math.max(qmax, Math.abs(x));
      for (const x of K) kmax = Math.max(kmax, Math.abs(x));
      const mayOverflow = p.d_k * qmax * kmax * Math.max(1, scale) > FLOAT_MAX / 2;
      for (let i = 0; i < p.n_q; ++i) {
        const row = slice * p.n_q + i;
        const o = Array.from(out.subarray(row * p.d_v, (row + 1) * p.d_v));
        const a = weights ? Array.from(weights.subarray(row * p.n_k, (row + 1) * p.n_k)) : [];
        let readable = 0, first = -1, up = -1, upValue = 0, notFinite = 0, allDown = true, maskedUp = -1;
        for (let j = 0; j < p.n_k; ++j) {
          const ok = allowed(b, h, i, j);
          if (ok) {
            ++readable;
            if (first < 0) first = j;
          }
          if (!mayOverflow) continue;
          let dot = 0;
          for (let t = 0; t < p.d_k; ++t) dot = Math.fround(dot + Math.fround(Q[i * p.d_k + t] * K[j * p.d_k + t]));
          const logit = Math.fround(dot * scale);
          if (!ok) {
            if (!(logit < Infinity) && maskedUp < 0) maskedUp = j;
            continue;
          }
          if (!Number.isFinite(logit)) ++notFinite;
          if (!(logit < Infinity) && up < 0) [up, upValue] = [j, logit];  // +inf or NaN
          allDown = allDown && logit === -Infinity;
        }
        if (readable === 0) continue;  // an empty row: ORT's zeros under the zero policy
        const where = `row [${b}][${h}][${i}]`;
        const got = returned(o);
        if (mayOverflow && up >= 0)
          throw new Unsupported(`${where}: the fp32 logit of readable key ${up} (recomputed as ORT computes it) is ` +
            `${text(upValue)} (${notFinite} of the row's ${readable} readable logits are not finite); ORT returns ${got} ` +
            'for this row, so the adapter declines it');
        if (mayOverflow && allDown)
          throw new Unsupported(`${where}: every readable logit overflows to -inf (${readable} keys; the first is key ` +
            `${first}); ORT returns ${got} for this row, so the adapter declines it`);
        const badCol = o.findIndex((x) => !Number.isFinite(x));
        const badWeight = a.some((x) => !Number.isFinite(x));
        if (badCol < 0 && !badWeight) continue;
        if (maskedUp >= 0)
          throw new Unsupported(`${where}: every readable logit is finite, but masked key ${maskedUp}'s fp32 logit ` +
            `overflows to +inf, which ORT's additive mask (the lowest float) leaves at +inf, and ORT returns ${got} ` +
            'for this row, so the adapter declines it');
        if (badCol >= 0)
          throw new Unsupported(`${where}: every readable logit is finite, but O column ${badCol} is ${text(o[badCol])} ` +
            `(an fp32 logit or the weighted sum of V overflowed); ORT returns ${got} for this row, so the adapter ` +
            'declines it');
        throw new Unsupported(`${where}: every readable logit is finite, but a weight is not; ORT returns ${got} ` +
          'for this row, so the adapter declines it');
      }
    }
}

// ----------------------------------------------------------- the protocol

// Buffered reader of standard input: a line, then exact byte counts.
class Input {
  constructor(stream) {
    this.chunks = [];
    this.size = 0;
    this.ended = false;
    this.wake = null;
    stream.on('data', (chunk) => { this.chunks.push(chunk); this.size += chunk.length; this.notify(); });
    stream.on('end', () => { this.ended = true; this.notify(); });
  }

  notify() {
    if (this.wake) { const w = this.wake; this.wake = null; w(); }
  }

  async waitForMore() {
    if (this.ended) return false;
    await new Promise((resolve) => { this.wake = resolve; });
    return true;
  }

  take(count) {
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    const head = all.subarray(0, count);
    const rest = all.subarray(count);
    this.chunks = rest.length ? [rest] : [];
    this.size = rest.length;
    return head;
  }

  // The next line without its '\n', or null at the end of input.
  async line() {
    for (;;) {
      const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
      this.chunks = all.length ? [all] : [];
      const end = all.indexOf(10);
      if (end >= 0) return this.take(end + 1).subarray(0, end).toString('utf8');
      if (!(await this.waitForMore())) return null;
    }
  }

  async bytes(count) {
    while (this.size < count)
      if (!(await this.waitForMore())) throw new Error(`input ended inside a payload (${this.size} of ${count} bytes)`);
    return this.take(count);
  }
}

function write(header, payloads = []) {
  process.stdout.write(JSON.stringify(header) + '\n');
  for (const x of payloads) process.stdout.write(Buffer.from(x.buffer, x.byteOffset, x.byteLength));
}

function problemFrom(header) {
  const p = {};
  for (const key of ['batch', 'heads', 'n_q', 'n_k', 'd_k', 'd_v', 'mask_batch', 'mask_heads']) {
    p[key] = header[key];
    if (!Number.isInteger(p[key]) || p[key] < 1) throw new Error(`case field "${key}" is ${JSON.stringify(header[key])}`);
  }
  p.id = header.id;
  p.scale = Number(header.scale);
  p.temperature = Number(header.temperature);
  p.mask_kind = header.mask_kind;
  if (!MASK_KINDS.includes(p.mask_kind)) throw new Error(`unknown mask_kind ${JSON.stringify(p.mask_kind)}`);
  p.key_lengths = header.key_lengths === null || header.key_lengths === undefined ? null : header.key_lengths;
  p.empty_row_policy = header.empty_row_policy;
  p.weights = Boolean(header.weights);
  p.threads = header.threads === undefined ? 1 : header.threads;
  if (!Number.isInteger(p.threads) || p.threads < 1) throw new Error(`case field "threads" is ${JSON.stringify(header.threads)}`);
  p.mask = null;
  return p;
}

async function forward(p, q, k, v) {
  const allowed = allowedFunction(p);
  validate(p, q, k, v, allowed);
  const { options, mask } = operatorInputs(p);
  const session = await sessionFor({ ...options, threads: THREADS ?? p.threads });
  const feeds = {
    Q: new ort.Tensor('float32', q, [p.batch, p.heads, p.n_q, p.d_k]),
    K: new ort.Tensor('float32', k, [p.batch, p.heads, p.n_k, p.d_k]),
    V: new ort.Tensor('float32', v, [p.batch, p.heads, p.n_k, p.d_v]),
  };
  if (mask) feeds.attn_mask = mask;
  const start = process.hrtime.bigint();
  const result = await session.run(feeds);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const out = result.Y.data;
  const weights = p.weights ? result.W.data : null;
  declineOverflowedRows(p, q, k, out, weights, allowed);
  return { out, weights, seconds };
}

async function main() {
  if (THREADS !== null && THREADS < 0) {
    console.error(`ort_attention.js: ATTNCHECK_ORT_THREADS is ${JSON.stringify(THREADS_TEXT)}; expected a whole number ` +
                  '>= 0 (0: ORT\'s default)');
    process.exit(2);
  }
  // Stray console output must not corrupt the protocol on standard output.
  console.log = console.info = console.warn = console.error;
  const name = `onnxruntime-${ort.env.versions.node}-attention23`;
  write({ abi_version: ABI_VERSION, name, features: FEATURES, precision: 'fp32' });
  const input = new Input(process.stdin);
  for (;;) {
    const line = await input.line();
    if (line === null) break;
    const p = problemFrom(JSON.parse(line));
    const floats = async (count) => {  // copied: the chunk's offset need not be a multiple of 4
      const x = new Float32Array(count);
      new Uint8Array(x.buffer).set(await input.bytes(4 * count));
      return x;
    };
    const slices = p.batch * p.heads;
    const q = await floats(slices * p.n_q * p.d_k);
    const k = await floats(slices * p.n_k * p.d_k);
    const v = await floats(slices * p.n_k * p.d_v);
    if (p.mask_kind === 'explicit') {
      const raw = await input.bytes(p.mask_batch * p.mask_heads * p.n_q * p.n_k);
      p.mask = Uint8Array.from(raw, (x) => (x !== 0 ? 1 : 0));  // ORT's bool is one byte, 0 or 1
    }
    try {
      const { out, weights, seconds } = await forward(p, q, k, v);
      write({ id: p.id, status: 'ok', compute_seconds: seconds }, weights ? [out, weights] : [out]);
    } catch (e) {
      if (e instanceof InvalidInput) write({ id: p.id, status: 'invalid', message: e.message });
      else if (e instanceof Unsupported) write({ id: p.id, status: 'unsupported', message: e.message });
      else {
        console.error(e);
        write({ id: p.id, status: 'error', message: `${e.name}: ${e.message}` });
      }
    }
  }
  for (const session of sessions.values()) await session.release();
}

module.exports = { attentionModel };

if (require.main === module) {
  main().catch((e) => {
    console.error(`ort_attention.js: ${e.stack || e}`);
    process.exit(1);
  });
}
