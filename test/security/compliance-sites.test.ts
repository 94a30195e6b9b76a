// A guard for COMPLIANCE_POLICY: every place under src/ that makes a TLS context goes through
// security/compliance.ts, so a new one cannot slip past the policy unnoticed. A context is made by
// tls.createSecureContext, by tls.connect / new TLSSocket / https without a `secureContext`, or by a
// TLS server; the sockets given a `secureContext` use one made at such a place. Exempt, as in
// Istio: the HTTPS probes of the application (src/status/probe.ts), over the pod's loopback, and
// the `wait` command's readiness poll (src/status/wait.ts: a CLI client of the agent's own status
// port, not the proxy).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { it } from 'node:test';
import { repoRoot } from '../helpers/repo.js';

const EXEMPT = new Set(['src/status/probe.ts', 'src/status/wait.ts']);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    return e.isDirectory() ? sources(path) : e.name.endsWith('.ts') ? [path] : [];
  });
}

/** The text of each call starting at a match (up to its closing parenthesis, roughly: 600 characters). */
const callsOf = (text: string, pattern: RegExp): string[] => [...text.matchAll(pattern)].map((m) => text.slice(m.index, m.index + 600));

it('every TLS context under src/ is made under COMPLIANCE_POLICY (security/compliance.ts)', () => {
  const offenders: string[] = [];
  let sites = 0;
  for (const file of sources(join(repoRoot, 'src'))) {
    const name = relative(repoRoot, file);
    if (EXEMPT.has(name) || name === 'src/security/compliance.ts') continue;
    const text = readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, '');
    const compliant = /import \{[^}]*\bcompliantTls\b[^}]*\} from '[./]*(security\/)?compliance\.js'/.test(text);
    const makers = [
      ...callsOf(text, /createSecureContext\(/g),
      ...callsOf(text, /getBuiltinModule\('node:https'\)|^import (?!type)[^;]*from 'node:https'/gm),
      ...callsOf(text, /(?:tls|getBuiltinModule\('node:tls'\))\.connect\(|TLSSocket\)\(|new TLSSocket\(/g).filter((c) => !/secureContext[:,]/.test(c)),
      ...callsOf(text, /\.createServer\(\s*\{[^}]*\b(cert|key|pfx)\b|createSecureServer\(/g),
    ];
    sites += makers.length;
    if (makers.length > 0 && !compliant) offenders.push(`${name}: ${makers.map((m) => m.split('\n')[0]!.trim()).join(' | ')}`);
  }
  assert.ok(sites >= 5, `only ${sites} TLS context sites found: the scan is broken`);
  assert.deepEqual(offenders, [], 'TLS contexts made without compliantTls');
});
