#!/usr/bin/env node
// Bundles the compiled library (dist/src, from tsc) into dist/bundle/, which bin/pilot-agent runs:
// one entry per process or thread that starts from a file (the CLI, a --concurrency worker, the
// iptables validation child), the code they share in chunks, what is imported lazily (the identity
// code and its gRPC/X.509 libraries, jose, the DNS proxy) in chunks of its own, loaded when used.
// Why: node resolves, reads and compiles each ES module on its own; ~190 of them cost ~320 ms of CPU
// at every start, a dozen chunks ~115 ms (README, "Start-up"). The tests import dist/src directly.
// koffi stays outside (it loads its native library from its own package directory), and so does
// whatever is required at run time by name (yaml, src/config/yaml.ts).
import { rmSync } from 'node:fs';
import { build } from 'esbuild';

// Chunks are named by content hash: without this, every rebuild would leave the last one's behind.
rmSync('dist/bundle', { recursive: true, force: true });

await build({
  entryPoints: {
    main: 'dist/src/cli/main.js',
    'worker-main': 'dist/src/agent/worker-main.js',
    'validation-child': 'dist/src/iptables/validation-child.js',
  },
  outdir: 'dist/bundle',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['koffi'],
  sourcemap: 'linked',
  // CommonJS dependencies call require() for node's modules; an ES module has none of its own.
  banner: { js: "import { createRequire as __pilotAgentRequire } from 'node:module'; const require = __pilotAgentRequire(import.meta.url);" },
  logLevel: 'warning',
});
