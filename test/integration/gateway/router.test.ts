// `pilot-agent proxy router` as a real process in a network namespace of the test's own: the
// spec's routing table (section 7) with Istio's sample JWKS and tokens, served by a real JWKS
// server; policies added and removed while it runs; a broken file beside good ones.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createNetns, type Netns } from '../../helpers/netns.js';
import { binPath, repoRoot } from '../../helpers/repo.js';
import { cleanEnv } from '../../helpers/run-cli.js';

/** Istio's sample key set and tokens (a copy of ../shared/fixtures/jwt). */
const FIXTURES = join(repoRoot, 'test', 'fixtures', 'jwt');
const GATEWAY_PORT = 8080;
const APP_PORT = 9080;
const JWKS_PORT = 9999;

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly error?: string;
}

const token = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8').trim();

const GATEWAY = `apiVersion: networking.mesh.io/v1
kind: Gateway
metadata: {name: ingressgateway, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${GATEWAY_PORT}, name: http, protocol: HTTP}
    hosts: ["*"]
`;

const ROUTES = `apiVersion: networking.mesh.io/v1
kind: VirtualService
metadata: {name: httpbin, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [ingressgateway]
  http:
  - match:
    - uri: {prefix: /headers}
      headers:
        "@request.auth.claims.groups": {exact: group1}
    route:
    - destination: {host: 127.0.0.1, port: {number: ${APP_PORT}}}
`;

const AUTHN = `apiVersion: security.mesh.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  jwtRules:
  - issuer: testing@secure.istio.io
    jwksUri: http://127.0.0.1:${JWKS_PORT}/jwks.json
`;

const REQUIRE_JWT = `apiVersion: security.mesh.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {mesh: ingressgateway}}
  action: DENY
  rules:
  - from:
    - source: {notRequestPrincipals: ["*"]}
`;

function started(child: ChildProcess, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${what} exited with ${code}`)));
    child.stdout!.setEncoding('utf8').once('data', () => resolve());
  });
}

describe('pilot-agent proxy router (process, Istio sample tokens)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pa-gateway-'));
  const resources = join(dir, 'etc', 'mesh', 'resources');
  const children: ChildProcess[] = [];
  let ns: Netns;
  let output = '';

  const requests = (specs: { path: string; headers?: Record<string, string> }[]): Answer[] => {
    const list = specs.map((s) => ({ url: `http://127.0.0.1:${GATEWAY_PORT}${s.path}`, headers: s.headers ?? {} }));
    const run = spawnSync('ip', ['netns', 'exec', ns.name, process.execPath, join(repoRoot, 'test', 'fixtures', 'http-requests.mjs'), JSON.stringify(list)],
      { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    return JSON.parse(run.stdout) as Answer[];
  };
  const get = (path: string, jwt?: string): Answer => requests([{ path, ...(jwt ? { headers: { authorization: `Bearer ${jwt}` } } : {}) }])[0]!;
  /** Waits (at most 5 s) until a request gets `status`: configuration changes apply after the debounce. */
  const eventually = async (path: string, status: number, jwt?: string): Promise<Answer> => {
    let last = get(path, jwt);
    for (let i = 0; i < 50 && last.status !== status; i++) {
      await new Promise((r) => setTimeout(r, 100));
      last = get(path, jwt);
    }
    assert.equal(last.status, status, `${path}: ${JSON.stringify(last)}\n${output}`);
    return last;
  };

  before(async () => {
    const created = createNetns();
    assert.ok(created, 'needs root to create a network namespace');
    ns = created;
    mkdirSync(resources, { recursive: true });
    mkdirSync(join(dir, 'etc', 'mesh', 'pod'), { recursive: true });
    writeFileSync(join(dir, 'etc', 'mesh', 'pod', 'labels'), 'mesh="ingressgateway"\napp="gateway"\n');
    writeFileSync(join(resources, 'gateway.yaml'), GATEWAY);
    writeFileSync(join(resources, 'routes.yaml'), ROUTES);
    writeFileSync(join(resources, 'authn.yaml'), AUTHN);

    const exec = (args: string[]): ChildProcess => {
      const child = spawn('ip', ['netns', 'exec', ns.name, process.execPath, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      return child;
    };
    const app = exec([join(repoRoot, 'test', 'fixtures', 'echo-app.mjs'), '127.0.0.1', String(APP_PORT), 'httpbin']);
    const jwks = exec(['-e', `require('http').createServer((q, r) => r.end(require('fs').readFileSync(${JSON.stringify(join(FIXTURES, 'jwks.json'))})))`
      + `.listen(${JWKS_PORT}, '127.0.0.1', () => console.log('listening'))`]);
    await Promise.all([started(app, 'app'), started(jwks, 'jwks server')]);

    const gateway = spawn('ip', ['netns', 'exec', ns.name, process.execPath, binPath, 'proxy', 'router'], {
      cwd: dir, env: cleanEnv({ POD_NAMESPACE: 'mesh-system', FILE_DEBOUNCE_DURATION: '50ms' }), stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(gateway);
    gateway.stdout!.setEncoding('utf8').on('data', (d: string) => { output += d; });
    gateway.stderr!.setEncoding('utf8').on('data', (d: string) => { output += d; });
    const wait = await ns.runCli(['wait', '--periodMillis', '100', '--timeoutSeconds', '15']);
    assert.equal(wait.code, 0, `${wait.stderr}\n${output}`);
  });

  after(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    ns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('no JWT: 404 (no route matches)', () => {
    assert.equal(get('/headers').status, 404, output);
  });

  it('a token that does not verify: 401', () => {
    const good = token('groups-scope.jwt');
    const tampered = `${good.slice(0, good.lastIndexOf('.') + 1)}${good.slice(good.lastIndexOf('.') + 1).split('').reverse().join('')}`;
    assert.equal(get('/headers', tampered).status, 401);
    assert.equal(get('/headers', 'not-a-jwt').status, 401);
  });

  it('groups-scope.jwt (groups contains group1): 200, routed, the token not forwarded', () => {
    const answer = get('/headers?x=1', token('groups-scope.jwt'));
    assert.equal(answer.status, 200, answer.body);
    const seen = JSON.parse(answer.body) as { app: string; url: string; headers: Record<string, string> };
    assert.equal(seen.app, 'httpbin');
    assert.equal(seen.url, '/headers?x=1');
    assert.equal(seen.headers['authorization'], undefined, 'the token is not forwarded without forwardOriginalToken');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');
  });

  it('demo.jwt (no groups claim): 404', () => {
    assert.equal(get('/headers', token('demo.jwt')).status, 404);
  });

  it('a path outside the rule: 404 even with the right token', () => {
    assert.equal(get('/ip', token('groups-scope.jwt')).status, 404);
  });

  it('/debug/decisions and /stats say why', async () => {
    get('/headers', token('demo.jwt'));
    const decisions = await ns.runCli(['request', 'GET', '/debug/decisions?limit=1']);
    assert.equal(decisions.code, 0, decisions.stderr);
    const [last] = (JSON.parse(decisions.stdout) as { decisions: { jwt: string; principal: string; route: string; status: number }[] }).decisions;
    assert.equal(last?.status, 404);
    assert.equal(last?.jwt, 'valid');
    assert.equal(last?.principal, 'testing@secure.istio.io/testing@secure.istio.io');
    assert.match(last?.route ?? '', /no/);
    const stats = await ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, /^http\.gateway\.decisions\.jwt\.invalid: [1-9]/m);
    assert.match(stats.stdout, /^http\.gateway\.decisions\.route\.routed: [1-9]/m);
    assert.match(output, /"GET \/headers" 404 NR /, 'the access log line carries the decision');
  });

  it('a DENY policy for requests without a principal, added then removed while running: 403, then 404 again', async () => {
    writeFileSync(join(resources, 'require-jwt.yaml'), REQUIRE_JWT);
    await eventually('/headers', 403);
    assert.equal(get('/headers', token('groups-scope.jwt')).status, 200, 'a valid token still passes');
    unlinkSync(join(resources, 'require-jwt.yaml'));
    await eventually('/headers', 404);
  });

  it('a broken file beside good ones: rejected with a line naming it, the rest stays in force', async () => {
    writeFileSync(join(resources, 'broken.yaml'), `${ROUTES.replace('name: httpbin', 'name: broken').replace('prefix: /headers', 'regex: "a("')}`);
    writeFileSync(join(resources, 'typo.yaml'), 'kind: [unclosed\n');
    for (let i = 0; i < 50 && !/broken\.yaml/.test(output); i++) await new Promise((r) => setTimeout(r, 100));
    assert.match(output, /broken\.yaml.*VirtualService.*broken.*regex/);
    assert.equal(get('/headers', token('groups-scope.jwt')).status, 200);
    const stats = await ns.runCli(['request', 'GET', '/stats']);
    assert.match(stats.stdout, /^config\.rejects\.VirtualService: [1-9]/m);
  });
});
