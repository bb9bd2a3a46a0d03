// The ONNX Runtime adapter on the wire (docs/protocol.md): its handshake, the
// worked example, the adapter's own rejections and the compute_seconds field.
//   node --test adapters/onnxruntime/test/
'use strict';

const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const path = require('node:path');
const test = require('node:test');

const adapterPath = path.join(__dirname, '..', 'ort_attention.js');

// One adapter process; send(header, values, mask) resolves to {reply, out, weights}.
function startAdapter() {
  const child = spawn(process.execPath, [adapterPath], { stdio: ['pipe', 'pipe', 'inherit'] });
  let buffered = Buffer.alloc(0);
  let waiting = null;
  child.stdout.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    if (waiting) waiting();
  });
  const next = async (ready) => {
    while (!ready()) await new Promise((resolve) => { waiting = resolve; });
    waiting = null;
  };
  const line = async () => {
    await next(() => buffered.indexOf(10) >= 0);
    const end = buffered.indexOf(10);
    const text = buffered.subarray(0, end).toString();
    buffered = buffered.subarray(end + 1);
    return JSON.parse(text);
  };
  const floats = async (count) => {
    await next(() => buffered.length >= 4 * count);
    const out = new Float32Array(count);
    new Uint8Array(out.buffer).set(buffered.subarray(0, 4 * count));
    buffered = buffered.subarray(4 * count);
    return Array.from(out);
  };
  return {
    child,
    line,
    async send(header, values, mask = null) {
      const bytes = Buffer.from(new Float32Array(values).buffer);
      child.stdin.write(JSON.stringify(header) + '\n');
      child.stdin.write(mask ? Buffer.concat([bytes, Buffer.from(mask)]) : bytes);
      const reply = await line();
      if (reply.status !== 'ok') return { reply };
      const rows = header.batch * header.heads * header.n_q;
      const out = await floats(rows * header.d_v);
      const weights = header.weights ? await floats(rows * header.n_k) : null;
      return { reply, out, weights };
    },
    async close() {
      child.stdin.end();
      return new Promise((resolve) => child.on('exit', resolve));
    },
  };
}

// docs/protocol.md's worked example: b1h1q2k2d1, causal top-left, Q = [1, 2],
// K = [0, 1], V = [10, 20].
const example = { id: 1, batch: 1, heads: 1, n_q: 2, n_k: 2, d_k: 1, d_v: 1, scale: 1.0, temperature: 1.0,
  mask_kind: 'causal_top_left', mask_batch: 1, mask_heads: 1, key_lengths: null, empty_row_policy: 'reject',
  weights: true };
const near = (got, want) => want.forEach((w, i) => assert.ok(Math.abs(got[i] - w) < 1e-5, `${got} vs ${want}`));

test('the adapter speaks the protocol', async (t) => {
  const adapter = startAdapter();
  let id = 0;
  const send = (fields, values, mask) => adapter.send({ ...example, ...fields, id: ++id }, values, mask);

  await t.test('the handshake declares what ORT offers, not temperature', async () => {
    const hello = await adapter.line();
    assert.equal(hello.abi_version, 1);
    assert.match(hello.name, /^onnxruntime-\d+\.\d+\.\d+-attention23$/);
    assert.equal(hello.precision, 'fp32');
    assert.ok(hello.features.includes('weights') && hello.features.includes('key_padding'));
    assert.ok(!hello.features.includes('temperature'));
  });

  await t.test('the worked example gives O and A, with the time of session.run', async () => {
    const { reply, out, weights } = await send({}, [1, 2, 0, 1, 10, 20]);
    assert.equal(reply.status, 'ok');
    assert.ok(Number.isFinite(reply.compute_seconds) && reply.compute_seconds >= 0, JSON.stringify(reply));
    near(out, [10, 18.80797]);
    near(weights, [1, 0, 0.1192029, 0.8807971]);
  });

  await t.test('bottom-right causal with n_q < n_k lets the last query read every key', async () => {
    const { out } = await send({ n_q: 1, mask_kind: 'causal_bottom_right', weights: false }, [2, 0, 1, 10, 20]);
    near(out, [18.80797]);
  });

  await t.test('a case on 2 threads gives the same answer as on 1 (its own session)', async () => {
    const { reply, out } = await send({ n_q: 1, mask_kind: 'causal_bottom_right', weights: false, threads: 2 },
      [2, 0, 1, 10, 20]);
    assert.equal(reply.status, 'ok');
    near(out, [18.80797]);
  });

  await t.test('an explicit scale is used', async () => {
    const { out } = await send({ n_q: 1, mask_kind: 'none', scale: 0.5, weights: false }, [4, 0, 1, 10, 20]);
    near(out, [18.80797]);  // logits [0, 2], as with scale 1 and q = 2
  });

  await t.test('an empty row under the zero policy comes back as zeros', async () => {
    const { reply, out } = await send({ n_q: 1, mask_kind: 'none', key_lengths: [0], empty_row_policy: 'zero',
      weights: false }, [2, 0, 1, 10, 20]);
    assert.equal(reply.status, 'ok');
    assert.deepEqual(out, [0]);
  });

  await t.test('bad input is rejected by the adapter, naming what is wrong', async () => {
    const cases = [
      [{ n_q: 1, mask_kind: 'explicit', weights: false }, [2, 0, 1, 10, 20], [0, 0],
        /^empty row: every key is masked for b=0 h=0 row=0$/],
      [{ n_q: 1, mask_kind: 'none', key_lengths: [3], weights: false }, [2, 0, 1, 10, 20], null,
        /^key_lengths\[0\] = 3 is outside \[0, n_k = 2\]$/],
      [{ n_q: 1, mask_kind: 'none', weights: false }, [2, 0, NaN, 10, 20], null, /^K\[b=0\]\[h=0\]\[row=1\]\[col=0\] is not finite/],
      [{ n_q: 1, mask_kind: 'none', scale: -1, weights: false }, [2, 0, 1, 10, 20], null, /^scale is -1; it must be finite and > 0$/],
    ];
    for (const [fields, values, mask, message] of cases) {
      const { reply } = await send(fields, values, mask);
      assert.equal(reply.status, 'invalid', JSON.stringify(reply));
      assert.match(reply.message, message);
    }
  });

  assert.equal(await adapter.close(), 0);
});

test('a case whose threads field is not a whole number >= 1 stops the adapter, naming the field', () => {
  const header = JSON.stringify({ ...example, id: 1, threads: 0 }) + '\n';
  const run = spawnSync(process.execPath, [adapterPath], { input: header, encoding: 'utf8' });
  assert.notEqual(run.status, 0);
  assert.match(run.stderr, /case field "threads" is 0/);
});

test('a bad ATTNCHECK_ORT_THREADS stops the adapter before the handshake, naming it', () => {
  const run = spawnSync(process.execPath, [adapterPath],
                        { input: '', env: { ...process.env, ATTNCHECK_ORT_THREADS: 'two' }, encoding: 'utf8' });
  assert.equal(run.status, 2);
  assert.equal(run.stdout, '');
  assert.match(run.stderr, /ATTNCHECK_ORT_THREADS is "two"; expected a whole number >= 0/);
});
