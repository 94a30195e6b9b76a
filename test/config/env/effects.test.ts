// What this agent does with each variable (`here` in variables.ts) is kept honest by the code: a
// variable marked honoured must be read under src/ (outside src/config/env, where every one is
// declared and parsed), and a variable read there must be marked honoured. "Read" is what the
// TypeScript parser sees, not a text search: a property access (`env.CA_ADDR`), an element access
// with a literal (`env['CA_ADDR']`) or a destructuring (`{ CA_ADDR }`); a name in a comment, a string
// or a type (Pick<EnvValues, 'CA_ADDR'>) is not a read.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import type { VarSpec } from '../../../src/config/env/define.js';
import { declarations, effectText, noEffectWarnings, readEnvironment } from '../../../src/config/env/registry.js';
import { repoRoot } from '../../helpers/repo.js';

const SRC = join(repoRoot, 'src');
const ENV_DIR = join(SRC, 'config', 'env');

/** Every .ts file under `dir`, the environment registry's own folder left out. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return path === ENV_DIR ? [] : sources(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** The declared names `text` reads, as the parser sees them. */
export function namesRead(text: string, names: ReadonlySet<string>, file = 'x.ts'): Set<string> {
  const found = new Set<string>();
  const add = (name: string): void => {
    if (names.has(name)) found.add(name);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAccessExpression(node)) add(node.name.text);
    else if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression)) add(node.argumentExpression.text);
    else if (ts.isBindingElement(node)) {
      const key = node.propertyName ?? node.name;
      if (ts.isIdentifier(key) || ts.isStringLiteralLike(key)) add(key.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true));
  return found;
}

const names = new Set(declarations.map((v) => v.name));

/** Each declared variable read under src/, with the files that read it. */
function readsUnderSrc(): Map<string, string[]> {
  const reads = new Map<string, string[]>();
  for (const file of sources(SRC)) {
    for (const name of namesRead(readFileSync(file, 'utf8'), names, file)) {
      reads.set(name, [...reads.get(name) ?? [], relative(repoRoot, file)]);
    }
  }
  return reads;
}

describe('what this agent does with each variable (variables.ts `here`)', () => {
  const reads = readsUnderSrc();

  it('the scan sees reads, and only reads', () => {
    const seen = namesRead(`// CA_ADDR in a comment
      type T = Pick<EnvValues, 'SECRET_TTL'>;
      const s = 'TRUST_DOMAIN';
      f(env.DISABLE_PROXY, env['POD_NAME']);
      const { INSTANCE_IP, PROXY_CONFIG: config } = env;`, names);
    assert.deepEqual([...seen].sort(), ['DISABLE_PROXY', 'INSTANCE_IP', 'POD_NAME', 'PROXY_CONFIG']);
    assert.ok(reads.size > 30, `only ${reads.size} variables found read under src/: the scan is broken`);
  });

  it('every variable marked honoured is read under src/ (outside src/config/env)', () => {
    const unread = declarations.filter((v) => v.here === 'honoured' && !reads.has(v.name)).map((v) => v.name);
    assert.deepEqual(unread, [], `marked honoured but never read: ${unread.join(', ')}; honour them or mark them (variables.ts \`here\`)`);
  });

  it('every variable read under src/ is marked honoured', () => {
    const wrong = declarations.filter((v) => v.here !== 'honoured' && reads.has(v.name)).map((v) => `${v.name} (${v.here}; read in ${reads.get(v.name)!.join(', ')})`);
    assert.deepEqual(wrong, [], `read but marked otherwise: ${wrong.join('; ')}`);
  });

  it('every variable that is not honoured says why (istiod ones may), and `matches` is a value of its type', () => {
    const typeOf = (v: VarSpec): string => (v.type === 'bool' ? 'boolean' : v.type === 'string' ? 'string' : 'number');
    for (const v of declarations) {
      if (v.here === 'honoured') {
        assert.equal(v.why, undefined, `${v.name}: honoured, yet a why`);
        assert.equal(v.matches, undefined, `${v.name}: honoured, yet a matches`);
        continue;
      }
      if (v.here !== 'istiod') assert.ok(v.why && v.why.length > 10, `${v.name}: ${v.here} without a why`);
      if (v.matches !== undefined) assert.equal(typeof v.matches, typeOf(v), `${v.name}: matches of another type`);
      assert.notEqual(effectText(v), 'honoured');
    }
  });
});

describe('noEffectWarnings: one warning per variable set that has no effect', () => {
  const warnings = (env: Record<string, string>): string[] => noEffectWarnings(readEnvironment(env));

  it('names the variable and why, by kind', () => {
    assert.deepEqual(warnings({ PILOT_PUSH_THROTTLE: '10' }), ['PILOT_PUSH_THROTTLE is set but has no effect here: an istiod setting (Istio\'s pilot-agent ignores it too)']);
    assert.deepEqual(warnings({ PILOT_ENABLE_MYSQL_FILTER: 'true' }),
      ['PILOT_ENABLE_MYSQL_FILTER is set but has no effect here: not supported by this agent yet: MySQL traffic is relayed as TCP, without a protocol filter']);
    assert.match(warnings({ MESH_BOOTSTRAP: '/etc/bootstrap.json' })[0]!, /^MESH_BOOTSTRAP is set but has no effect here: this agent runs no Envoy process/);
    assert.match(warnings({ MESH_GPRC_MAXSTREAMS: '10' })[0]!, /^MESH_GPRC_MAXSTREAMS is set but has no effect here: it bounds a gRPC server's concurrent streams; this agent serves no gRPC/);
    assert.equal(warnings({ PILOT_PUSH_THROTTLE: '1', WASM_PURGE_INTERVAL: '1m', ENABLE_MCS_HOST: 'true' }).length, 3, 'one each');
  });

  it('says nothing of honoured variables, of unset or empty ones, or of a value that asks for what the agent does', () => {
    assert.deepEqual(warnings({}), []);
    assert.deepEqual(warnings({ ENABLE_AUTO_SNI: 'false', COMPLIANCE_POLICY: 'fips-140-2', EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY: 'false', CA_ADDR: 'ca:15012' }), []);
    assert.deepEqual(warnings({ PILOT_DRAINING_LABEL: '', PILOT_ENABLE_MYSQL_FILTER: '' }), [], 'a manifest\'s value: ""');
    assert.deepEqual(warnings({ PILOT_SCOPE_GATEWAY_TO_NAMESPACE: 'false', ENABLE_RESOLUTION_NONE_TARGET_PORT: 'false', PILOT_JWT_ENABLE_REMOTE_JWKS: 'proxy' }), []);
    assert.equal(warnings({ ENABLE_RESOLUTION_NONE_TARGET_PORT: 'true' }).length, 1, 'the default asks for what this agent does not do');
    assert.equal(warnings({ PILOT_SCOPE_GATEWAY_TO_NAMESPACE: 'true' }).length, 1);
  });

  it('the docs column says where the agent is not what the default says', () => {
    const v = declarations.find((d) => d.name === 'ENABLE_RESOLUTION_NONE_TARGET_PORT')!;
    assert.match(effectText(v), /\*\*Behaves as `false`, not as the default\*\*/);
    assert.match(effectText(declarations.find((d) => d.name === 'COMPLIANCE_POLICY')!), /^honoured: `fips-140-2` restricts/);
  });
});

it('the README\'s counts are the declarations\' own', () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const count = (here: string): number => declarations.filter((v) => v.here === here).length;
  const want = `Of the ${declarations.length}\nvariables, ${count('honoured')} are honoured; ${count('istiod')} are istiod settings`;
  assert.ok(readme.replace(/\s+/g, ' ').includes(want.replace(/\s+/g, ' ')), `README "Environment variables" should say: ${want}`);
  assert.ok(readme.replace(/\s+/g, ' ').includes(`${count('not-applicable')} configure machinery`), 'not-applicable count');
  assert.ok(readme.replace(/\s+/g, ' ').includes(`${count('not-supported')} change what Istio's proxy does`), 'not-supported count');
});
