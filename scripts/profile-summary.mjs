#!/usr/bin/env node
// node scripts/profile-summary.mjs FILE.cpuprofile [--top N]
// Where a V8 CPU profile (node --cpu-prof: one file per thread) spends its busy time: the functions
// with the most self time, then the same time by category (kernel socket calls, GC, our code by
// folder under dist/src/, node internals...), each as % of the busy (non-idle) time.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const usage = 'usage: node scripts/profile-summary.mjs FILE.cpuprofile [--top N]';
const args = process.argv.slice(2);
let top = 25;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--top') top = Number(args[++i]);
  else files.push(args[i]);
}
if (files.length !== 1 || !Number.isInteger(top) || top < 1) {
  console.error(usage);
  process.exit(2);
}

const profile = JSON.parse(readFileSync(files[0], 'utf8'));
const { nodes, samples = [], timeDeltas = [] } = profile;
if (!Array.isArray(nodes)) {
  console.error(`${files[0]}: not a V8 .cpuprofile (no nodes)`);
  process.exit(1);
}
const byId = new Map(nodes.map((n) => [n.id, n]));

// A sample stands for the interval up to the next sample (as DevTools counts it), the last one up
// to endTime; timeDeltas[i] is the gap before sample i, in µs.
const selfUs = new Map(); // node id -> µs
let t = profile.startTime;
for (let i = 0; i < samples.length; i++) {
  t += timeDeltas[i] ?? 0;
  const next = i + 1 < samples.length ? timeDeltas[i + 1] ?? 0 : Math.max(0, profile.endTime - t);
  selfUs.set(samples[i], (selfUs.get(samples[i]) ?? 0) + Math.max(0, next));
}

// Kernel work shows as the native binding's own time (no url): the syscall happens inside it.
const SOCKET_WRITES = new Set(['writeBuffer', 'writev', 'writeLatin1String', 'writeUtf8String', 'writeAsciiString', 'writeUcs2String', 'shutdown']);
// The read syscall itself runs in libuv before any JS, so it lands in (program); what shows here is
// the JS that takes each chunk in (onStreamRead) and the switches on and off.
const SOCKET_READS = new Set(['readStart', 'readStop', 'onStreamRead']);

function category({ functionName: fn, url }) {
  if (fn === '(garbage collector)') return 'garbage collector';
  if (fn === '(program)' || fn === '(root)') return '(program)';
  if (!url && SOCKET_WRITES.has(fn)) return 'socket writes (kernel)';
  if (SOCKET_READS.has(fn) && (!url || url.startsWith('node:'))) return 'socket reads';
  const src = url.indexOf('/dist/src/');
  if (src >= 0) {
    const rel = url.slice(src + '/dist/src/'.length).split('/');
    return `our code: ${rel.length > 1 ? rel.slice(0, -1).join('/') : rel[0]}`;
  }
  const mods = url.lastIndexOf('/node_modules/');
  if (mods >= 0) {
    const parts = url.slice(mods + '/node_modules/'.length).split('/');
    return `dependencies: ${parts[0].startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]}`;
  }
  // Module loading (compile, resolve) counts here too: a start-up profile is mostly that.
  if (url.startsWith('node:')) return 'node internals (streams, events...)';
  if (!url && !fn.startsWith('(') && !fn.startsWith('RegExp:')) return 'other native calls (fs, buffers...)';
  return 'other';
}

// node:internal/streams/writable -> internal/streams/writable (basenames like "utils" say little there).
const file = (url) => (url.startsWith('node:internal/') ? url.slice('node:'.length) : basename(url));

// The same function reached by several call paths is one row.
const fns = new Map();
const cats = new Map();
let idleUs = 0;
for (const [id, us] of selfUs) {
  const cf = byId.get(id).callFrame;
  if (cf.functionName === '(idle)') {
    idleUs += us;
    continue;
  }
  const where = cf.url ? `${file(cf.url)}:${cf.lineNumber + 1}` : cf.functionName.startsWith('(') ? '' : '(native)';
  const key = `${cf.functionName}\0${where}`;
  const row = fns.get(key) ?? { name: cf.functionName || '(anonymous)', where, us: 0 };
  row.us += us;
  fns.set(key, row);
  const c = category(cf);
  cats.set(c, (cats.get(c) ?? 0) + us);
}

const totalUs = profile.endTime - profile.startTime;
const busyUs = totalUs - idleUs;
const ms = (us) => (us / 1000).toFixed(1);
const pct = (us) => `${busyUs > 0 ? ((100 * us) / busyUs).toFixed(1) : '0.0'}%`;
const desc = (a, b) => b[1] - a[1];

console.log(`${files[0]}: ${ms(totalUs)} ms profiled, ${ms(busyUs)} ms busy (${((100 * busyUs) / (totalUs || 1)).toFixed(0)}%),` +
  ` ${samples.length} samples`);
console.log(`\ntop ${top} functions by self time, % of busy:`);
for (const row of [...fns.values()].sort((a, b) => b.us - a.us).slice(0, top)) {
  console.log(`  ${pct(row.us).padStart(6)} ${ms(row.us).padStart(9)} ms  ${row.name.padEnd(36)} ${row.where}`);
}
console.log('\nby category, % of busy:');
const sorted = [...cats].sort(desc);
// The long tail (a dozen folders and packages at a few ms each) as one line.
const shown = sorted.filter(([, us]) => us >= busyUs / 1000);
const rest = sorted.slice(shown.length);
for (const [c, us] of shown) console.log(`  ${pct(us).padStart(6)} ${ms(us).padStart(9)} ms  ${c}`);
if (rest.length > 0) {
  const us = rest.reduce((sum, [, u]) => sum + u, 0);
  console.log(`  ${pct(us).padStart(6)} ${ms(us).padStart(9)} ms  (${rest.length} more, under 0.1% each: ${rest.map(([c]) => c.replace('our code: ', '')).join(', ')})`);
}
