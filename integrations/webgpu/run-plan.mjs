// Runs memkit plans (memkit::arrays::export_plan) on real WebGPU: one GPUBuffer
// per plan buffer, one command buffer per batch, each dispatch bound exactly as
// the plan says (buffer, offset, size, read-only or writable storage), with WGSL
// kernels fill, add and copy. Prints Dawn's validation errors and compares the
// result handles with a reference computed per handle on the host.
//   usage: node run-plan.mjs PLAN.json...   (imports 'webgpu' from beside it)
//          node run-plan.mjs --host PLAN.json...  (runs the plan's memory on the
//          host instead, with no rule checks: tests the harness itself)
//   DAWN_BACKEND=null checks validation only, on any machine (Dawn's null
//   backend runs no shaders, so every result reads wrong there).
import { readFileSync } from 'node:fs';

const host = process.argv[2] === '--host';
const paths = process.argv.slice(host ? 3 : 2);
// The object create() returns owns Dawn's instance: once garbage collected, the
// device's threads run on freed state (hangs in popErrorScope, aborts in
// pthread), so it lives as long as the process.
let gpu, device;
let uncaptured = 0;
if (!host) {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  gpu = create(process.env.DAWN_BACKEND ? [`backend=${process.env.DAWN_BACKEND}`] : []);
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) { console.log('no WebGPU adapter'); process.exit(2); }
  device = await adapter.requestDevice();
  device.addEventListener('uncapturederror', (e) => {
    uncaptured++;
    console.log('uncaptured error:', e.error.message.split('\n')[0]);
  });
  console.log('adapter:', adapter.info.vendor, adapter.info.architecture, adapter.info.device,
              adapter.info.description);
}

// The plan run on host memory: the same offsets and sizes, so a placement bug
// (two live handles overlapping) shows up as wrong results.
function runOnHost(plan) {
  const memory = new Map();
  for (const b of plan.buffers) memory.set(b.id, new Float32Array(b.size / 4));
  const view = (r) => memory.get(r.buffer).subarray(r.offset / 4, (r.offset + r.size) / 4);
  for (const batch of plan.batches) for (const d of batch.dispatches) {
    const b = d.bindings, o = view(b[b.length - 1]);
    const ins = b.slice(0, b.length - 1).map(view);
    const next = new Float32Array(o.length);
    for (let i = 0; i < o.length; ++i) {
      if (d.kernel === 'fill') next[i] = d.arguments[0];
      else if (d.kernel === 'copy') next[i] = ins[0][i % ins[0].length];
      else {
        let s = b[b.length - 1].access === 'read_write' ? o[i] : 0;
        for (const a of ins) s += a[i % a.length];
        next[i] = s;
      }
    }
    o.set(next);
  }
  const expected = reference(plan);
  let wrong = 0;
  for (const r of plan.results) {
    const got = view(r), want = expected.get(r.handle);
    if (!want || got.some((v, i) => v !== want[i])) wrong++;
  }
  console.log(`${plan.rule}: results=${plan.results.length} wrong=${wrong}`);
  return { errors: 0, wrong, rule: plan.rule };
}

const pipelines = new Map();
function wgslFor(dispatch) {
  const b = dispatch.bindings;
  const decl = (i, binding, name) => `@group(0) @binding(${i}) var<storage, ${
      binding.access === 'read' ? 'read' : 'read_write'}> ${name}: array<f32>;`;
  const out = b.length - 1;
  let lines = [], body;
  b.forEach((binding, i) => lines.push(decl(i, binding, i === out ? 'out' : `in${i}`)));
  const at = (i) => `in${i}[i % arrayLength(&in${i})]`;
  if (dispatch.kernel === 'fill') {
    body = `out[i] = ${Number(dispatch.arguments[0]).toFixed(1)};`;
  } else if (dispatch.kernel === 'copy') {
    body = `out[i] = ${at(0)};`;
  } else if (dispatch.kernel === 'add') {
    const sum = b.slice(0, out).map((_, i) => at(i)).join(' + ');
    body = b[out].access === 'read_write' ? `out[i] = out[i] + ${sum};` : `out[i] = ${sum};`;
  } else {
    throw new Error(`unknown kernel ${dispatch.kernel}`);
  }
  return lines.join('\n') + `
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u,
                                     @builtin(num_workgroups) n: vec3u) {
  let i = g.x + g.y * n.x * 64u;
  if (i >= arrayLength(&out)) { return; }
  ${body}
}`;
}
function pipelineFor(dispatch) {
  const code = wgslFor(dispatch);
  let p = pipelines.get(code);
  if (!p) {
    p = device.createComputePipeline({
      layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
    pipelines.set(code, p);
  }
  return p;
}

// The reference: values per handle, kernels applied to handles, not memory.
function reference(plan) {
  const values = new Map();
  const get = (r) => values.get(r.handle);
  for (const batch of plan.batches) for (const d of batch.dispatches) {
    const b = d.bindings, o = b[b.length - 1], n = o.size / 4;
    if (d.relocation) continue;  // the same handle moved: its values do not change
    const next = new Float32Array(n);
    if (d.kernel === 'fill') next.fill(d.arguments[0]);
    else {
      const ins = b.slice(0, b.length - 1).map(get);
      const prior = o.access === 'read_write' ? get(o) : null;
      for (let i = 0; i < n; ++i) {
        let s = prior ? prior[i] : 0;
        for (const a of ins) s += a[i % a.length];
        next[i] = s;
      }
    }
    values.set(o.handle, next);
  }
  return values;
}

async function runPlan(path) {
  const plan = JSON.parse(readFileSync(path, 'utf8'));
  if (host) return runOnHost(plan);
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const buffers = new Map();
  for (const b of plan.buffers) buffers.set(b.id, device.createBuffer({ size: b.size, usage }));
  let dispatches = 0, errors = 0, firstError = '';
  for (const batch of plan.batches) {
    device.pushErrorScope('validation');
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (const d of batch.dispatches) {
      const pipeline = pipelineFor(d);
      const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0),
        entries: d.bindings.map((r, i) => ({ binding: i,
          resource: { buffer: buffers.get(r.buffer), offset: r.offset, size: r.size } })) });
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      const groups = Math.ceil(d.bindings[d.bindings.length - 1].size / 4 / 64);
      pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
      dispatches++;
    }
    pass.end();
    device.queue.submit([encoder.finish()]);
    const error = await device.popErrorScope();
    if (error) { errors++; if (!firstError) firstError = error.message.split('\n')[0]; }
  }
  // Read the result handles back and compare.
  const expected = reference(plan);
  let wrong = 0, checked = 0;
  for (const r of plan.results) {
    const staging = device.createBuffer({ size: r.size,
                                          usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffers.get(r.buffer), r.offset, staging, 0, r.size);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const got = new Float32Array(staging.getMappedRange().slice(0));
    staging.unmap();
    staging.destroy();
    const want = expected.get(r.handle);
    checked++;
    if (!want || got.length !== want.length || got.some((v, i) => v !== want[i])) wrong++;
  }
  for (const b of buffers.values()) b.destroy();
  console.log(`${path.split('/').pop()}: rule=${plan.rule} buffers=${plan.buffers.length} ` +
              `batches=${plan.batches.length} dispatches=${dispatches} ` +
              `validation_errors=${errors} results=${checked} wrong=${wrong}` +
              (firstError ? `\n  first error: ${firstError}` : ''));
  return { errors, wrong, rule: plan.rule };
}

const totals = {};
for (const path of paths) {
  let r;
  try {
    r = await runPlan(path);
  } catch (e) {
    console.log(`${path}: failed: ${e.message}`);
    r = { errors: 1, wrong: 0, rule: 'failed' };
  }
  const t = totals[r.rule] ??= { plans: 0, errors: 0, wrong: 0, failingPlans: 0 };
  t.plans++; t.errors += r.errors; t.wrong += r.wrong; t.failingPlans += r.errors > 0 ? 1 : 0;
}
for (const [rule, t] of Object.entries(totals)) {
  console.log(`total rule=${rule}: plans=${t.plans} plans_with_validation_errors=${t.failingPlans} ` +
              `validation_errors=${t.errors} wrong_results=${t.wrong}`);
}
if (!host) console.log(`uncaptured_errors=${uncaptured}`);
device?.destroy();
gpu = undefined;
process.exit(0);
