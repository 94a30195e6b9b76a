// resolv.conf as glibc reads it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_RESOLVER_CONFIG, parseResolvConf, type ResolverConfig } from '../../src/dns/resolv-conf.js';

describe('parseResolvConf', () => {
  const cases: { name: string; text: string; want: Partial<ResolverConfig> }[] = [
    { name: 'empty file: defaults', text: '', want: {} },
    {
      name: 'a Kubernetes pod',
      text: 'search ns1.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n',
      want: { nameservers: ['10.96.0.10'], search: ['ns1.svc.cluster.local', 'svc.cluster.local', 'cluster.local'], ndots: 5 },
    },
    { name: 'at most three servers, in order, both families', text: 'nameserver 10.0.0.1\nnameserver fd00::a\nnameserver 10.0.0.3\nnameserver 10.0.0.4\n', want: { nameservers: ['10.0.0.1', 'fd00::a', '10.0.0.3'] } },
    { name: 'an IPv6 zone is kept', text: 'nameserver fe80::1%eth0\n', want: { nameservers: ['fe80::1%eth0'] } },
    { name: 'not an address: skipped', text: 'nameserver dns.example.com\nnameserver 10.0.0.1\n', want: { nameservers: ['10.0.0.1'] } },
    { name: 'comments (# and ;) and blank lines', text: '# a comment\n; another\n\n  nameserver 10.0.0.1 # trailing\n', want: { nameservers: ['10.0.0.1'] } },
    { name: 'the last search or domain line wins', text: 'search a.example b.example\ndomain c.example\n', want: { search: ['c.example'] } },
    { name: 'search after domain', text: 'domain c.example\nsearch A.example. b.example\n', want: { search: ['a.example', 'b.example'] } },
    { name: 'options on several lines', text: 'options ndots:2 rotate\noptions timeout:3 attempts:4\n', want: { ndots: 2, rotate: true, timeoutMs: 3000, attempts: 4 } },
    { name: 'options capped as glibc caps them', text: 'options ndots:99 timeout:99 attempts:99\n', want: { ndots: 15, timeoutMs: 30_000, attempts: 5 } },
    { name: 'bad option values ignored', text: 'options ndots:x timeout:-1 attempts:\n', want: {} },
    { name: 'timeout:0 is at least a second', text: 'options timeout:0\n', want: { timeoutMs: 1000 } },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(parseResolvConf(c.text), { ...DEFAULT_RESOLVER_CONFIG, ...c.want }));
  }
});
