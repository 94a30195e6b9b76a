import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { DecisionLog, type Decision } from '../../src/gateway/decisions.js';

const request = (url: string): IncomingMessage => ({ method: 'GET', url, headers: { host: 'example.com' } }) as unknown as IncomingMessage;

describe('DecisionLog', () => {
  it('keeps the newest decisions, oldest first, up to its capacity', () => {
    const log = new DecisionLog(3);
    for (let i = 0; i < 5; i++) {
      const req = request(`/${i}`);
      log.begin(req, 'gateway_8080');
      log.complete(req, 200, i);
    }
    assert.deepEqual(log.recent().map((d) => d.path), ['/2', '/3', '/4']);
    assert.deepEqual(log.recent(2).map((d) => d.path), ['/3', '/4']);
  });

  it('a draft filled in by the stages becomes the decision, answered to the engine for the access log', () => {
    const log = new DecisionLog();
    const req = request('/headers');
    const draft = log.begin(req, 'gateway_8080');
    draft.jwt = 'valid';
    draft.principal = 'iss/sub';
    draft.authz = 'allowed: no policies';
    draft.route = 'vs mesh-system/app rule 0';
    const decision = log.complete(req, 200, 1.5);
    assert.deepEqual(log.recent()[0], decision, 'kept as it was answered');
    assert.deepEqual({ ...decision, time: '' }, {
      time: '', listener: 'gateway_8080', method: 'GET', authority: 'example.com', path: '/headers', jwt: 'valid',
      principal: 'iss/sub', authz: 'allowed: no policies', route: 'vs mesh-system/app rule 0', status: 200, durationMs: 1.5,
    });
  });

  it('a time recorded as ms since the epoch is read as ISO text', () => {
    const log = new DecisionLog(2);
    const at = Date.UTC(2026, 10, 27, 18, 30, 1, 250) + 0.75;
    log.record({ time: at, listener: 'outbound', method: 'GET', authority: 'a', path: '/', jwt: '-', authz: '-', durationMs: 2 });
    log.record({ time: '2026-11-27T18:30:02.000Z', listener: 'outbound', method: 'GET', authority: 'a', path: '/', jwt: '-', authz: '-', durationMs: 2 });
    assert.deepEqual(log.recent().map((d) => d.time), ['2026-11-27T18:30:01.250Z', '2026-11-27T18:30:02.000Z']);
  });

  it('keeps every field of a decision, and none of the one before it in the same place of the ring', () => {
    const log = new DecisionLog(1);
    const full: Required<Decision> = {
      time: '2026-11-25T00:00:00.000Z', listener: 'inbound', method: 'POST', authority: 'a.example', path: '/p', jwt: 'valid',
      principal: 'iss/sub', authz: 'denied: policy x', route: 'rule 0', routeName: 'named', flag: 'RBAC', details: 'rbac_access_denied',
      upstream: '10.0.0.1:80', cluster: 'outbound|80||a.example', attempts: ['attempt 1 10.0.0.1:80: 503, retried (5xx)'],
      source: '10.0.0.9', peer: 'cluster.local/ns/a/sa/b', connectionSecurityPolicy: 'mutual_tls',
      status: 403, durationMs: 2.5,
    };
    log.record(full);
    assert.deepEqual(log.recent(), [full]);
    const bare: Decision = { time: full.time, listener: 'gateway_8080', method: 'GET', authority: 'b', path: '/', jwt: 'absent', authz: 'allowed', durationMs: 1 };
    log.record(bare);
    assert.deepEqual(log.recent(), [bare]);
  });

  it('an abandoned request has no status; a request never begun is not recorded', () => {
    const log = new DecisionLog();
    const req = request('/x');
    log.begin(req, 'inbound');
    log.complete(req, undefined, 3);
    log.complete(request('/never-begun'), 200, 1);
    assert.deepEqual(log.recent().map((d) => [d.path, d.status]), [['/x', undefined]]);
  });

  it('records a connection decided as TCP (method TCP, the destination, no status) and answers it; a refused one carries RBAC', () => {
    const log = new DecisionLog();
    const d = log.connection('inbound', { source: '10.0.0.9', destination: { address: '2001:db8::1', port: 9080 }, kind: 'tls' },
      'denied: tls connection: no ALLOW policy matched', { details: 'rbac_access_denied_matched_policy[none]' });
    assert.deepEqual([d.method, d.authority, d.upstream, d.source, d.status, d.authz, d.flag, d.details],
      ['TCP', '[2001:db8::1]:9080', '[2001:db8::1]:9080', '10.0.0.9', undefined, 'denied: tls connection: no ALLOW policy matched',
        'RBAC', 'rbac_access_denied_matched_policy[none]']);
    const allowed = log.connection('inbound', { source: '10.0.0.9', destination: { address: '10.0.0.1', port: 9080 }, kind: 'tcp' }, 'allowed: tcp connection: no policies');
    assert.equal(allowed.flag, undefined);
    assert.equal(log.recent().length, 2);
  });

  it('annotate replaces the policy outcome of a draft (a later check denied it), with RBAC and its details', () => {
    const log = new DecisionLog();
    const req = request('/t');
    log.begin(req, 'inbound').authz = 'allowed: x';
    log.annotate(req, 'denied: y', 'rbac_access_denied_matched_policy[none]');
    log.complete(req, 403, 1);
    const [d] = log.recent();
    assert.deepEqual([d!.authz, d!.flag, d!.details], ['denied: y', 'RBAC', 'rbac_access_denied_matched_policy[none]']);
  });

  it('gives back every method, authority and path as recorded: known ones by number, new, long, UTF-8 and past the tables\' room', () => {
    const log = new DecisionLog(50);
    const texts: [string, string, string][] = [];
    for (let i = 0; i < 700; i++) {
      // Repeats (known by number), a new path every time past the paths' room (255), UTF-8, and long ones cut.
      const path = i % 3 === 0 ? '/hot' : i % 7 === 0 ? `/ж/${i}` : i % 11 === 0 ? `/long/${'x'.repeat(300)}/${i}` : `/p/${i}`;
      const authority = i % 5 === 0 ? `svc-${i}.example:80` : 'svc.example:80';
      const method = i % 13 === 0 ? 'PATCH' : 'GET';
      texts.push([method, authority, path]);
      log.record({ time: 1_700_000_000_000 + i, listener: 'outbound', method, authority, path, jwt: '-', authz: '-', durationMs: i });
    }
    const recent = log.recent();
    assert.equal(recent.length, 50);
    recent.forEach((d, k) => {
      const [method, authority, path] = texts[650 + k]!;
      assert.equal(d.method, method);
      assert.equal(d.authority, authority);
      if (path.length > 200) assert.ok(d.path.endsWith('…') && path.startsWith(d.path.slice(0, -1)), `${d.path.length} characters of a ${path.length}-character path, marked cut`);
      else assert.equal(d.path, path);
      assert.equal(d.durationMs, 650 + k);
    });
  });

  it('counts outcomes by stage', () => {
    const log = new DecisionLog();
    log.count('jwt', 'valid');
    log.count('jwt', 'valid');
    log.count('route', 'no_route');
    assert.deepEqual([...log.counts.get('jwt')!], [['valid', 2]]);
    assert.deepEqual([...log.counts.get('route')!], [['no_route', 1]]);
  });
});

describe('DecisionLog.assignMerged', () => {
  it('merges several workers\' logs: counts summed, decisions in time order, the newest kept', () => {
    const d = (time: string, path: string): Decision => ({
      time, listener: 'gateway_8080', method: 'GET', authority: '', path, jwt: 'absent', authz: '', status: 200, durationMs: 1,
    });
    const merged = new DecisionLog(3);
    merged.assignMerged([
      { counts: new Map([['route', new Map([['routed', 2]])]]), decisions: [d('2026-01-01T00:00:01Z', '/a'), d('2026-01-01T00:00:04Z', '/d')] },
      { counts: new Map([['route', new Map([['routed', 1], ['no_route', 1]])]]), decisions: [d('2026-01-01T00:00:02Z', '/b'), d('2026-01-01T00:00:03Z', '/c')] },
    ]);
    assert.deepEqual([...merged.counts.get('route')!].sort(), [['no_route', 1], ['routed', 3]]);
    assert.deepEqual(merged.recent().map((x) => x.path), ['/b', '/c', '/d']);
  });
});
