// koffi, for the C calls Node does not expose (SO_ORIGINAL_DST and the TPROXY socket options,
// getrlimit, malloc_trim). koffi's own entry also loads its installer's download tools (node:https,
// node:tls, node:zlib, node:crypto) at every start: ~1 MB and a few ms a sidecar never uses. So its
// prebuilt native module is loaded directly where this platform has one in the package; anywhere
// else (musl, another CPU) koffi's entry finds the right one.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as Koffi from 'koffi';

function load(): typeof Koffi {
  const require = createRequire(import.meta.url);
  if (process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64')) {
    try {
      const dir = dirname(require.resolve('koffi/package.json'));
      return require(join(dir, 'build', 'koffi', `linux_${process.arch}`, 'koffi.node')) as typeof Koffi;
    } catch { /* another libc, or not shipped: koffi's entry looks further */ }
  }
  return require('koffi') as typeof Koffi;
}

export const koffi = load();
