// A real resolver client, dig, asking the DNS proxy for an answer bigger than it takes over UDP: the
// resolver behind the proxy answers 40 TXT records (4,833 bytes, 4,844 with OPT) without TC. dig must
// see TC over UDP with whole records within its size (512 without EDNS, its 1232 with), and, when left
// to itself, retry over TCP and get the whole answer. dig comes from bind9-dnsutils
// (scripts/install-deps.sh); without it the test is skipped. No root needed: all on loopback.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { DEFAULT_RESOLVER_CONFIG } from '../../../src/dns/resolv-conf.js';
import { startDnsProxy, type DnsProxy } from '../../../src/dns/server.js';
import { fakeUpstream, txtAnswer, type FakeUpstream } from '../../dns/dns-test-kit.js';

const run = promisify(execFile);
const noDig = spawnSync('dig', ['-v']).error ? 'dig is not installed (bind9-dnsutils; scripts/install-deps.sh installs it)' : false;

/** What dig printed about the answer it kept. */
interface DigAnswer {
  flags: string[];
  answers: number;
  size: number;
  transport: string;
  retried: boolean;
  opt: boolean;
  malformed: boolean;
}

function readDig(out: string): DigAnswer {
  const header = /;; flags: ([a-z ]*); QUERY: \d+, ANSWER: (\d+)/.exec(out);
  assert.ok(header, `no header in dig's output:\n${out}`);
  return {
    flags: header[1]!.split(' '),
    answers: Number(header[2]),
    size: Number(/;; MSG SIZE {2}rcvd: (\d+)/.exec(out)?.[1]),
    transport: /;; SERVER: \S+ \((UDP|TCP)\)/.exec(out)?.[1] ?? '?',
    retried: out.includes(';; Truncated, retrying in TCP mode.'),
    opt: out.includes(';; OPT PSEUDOSECTION:'),
    malformed: /malformed|FORMERR|parse error/i.test(out),
  };
}

describe('dig through the DNS proxy: an answer too big for UDP', { skip: noDig }, () => {
  let upstream: FakeUpstream;
  let proxy: DnsProxy;
  before(async () => {
    upstream = await fakeUpstream((q) => txtAnswer(q, { answers: 40, ...(q.readUInt16BE(10) > 0 ? { opt: { size: 4096 } } : {}) }));
    proxy = await startDnsProxy({
      address: '127.0.0.1:0', domain: 'ns1.svc.cluster.local', resolver: { ...DEFAULT_RESOLVER_CONFIG, nameservers: [upstream.host] },
      parallel: false, upstreamPort: upstream.port, timeoutMs: 2000,
    });
  });
  after(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  // dig runs beside the proxy, in this process's event loop: asynchronously, never execFileSync.
  const dig = async (options: string[]): Promise<DigAnswer> => {
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(proxy.port), '+tries=1', '+time=3', ...options, 'big.example.org', 'TXT']);
    return readDig(stdout);
  };

  const cases: { name: string; options: string[]; expect: Partial<DigAnswer> & { maxSize: number } }[] = [
    { name: 'no EDNS, truncation not followed (+ignore): TC, whole records within 512 bytes', options: ['+noedns', '+ignore'],
      expect: { transport: 'UDP', retried: false, answers: 3, opt: false, maxSize: 512 } },
    { name: 'EDNS 1232 (dig\'s default), +ignore: TC, whole records within 1232 bytes, the OPT kept', options: ['+ignore'],
      expect: { transport: 'UDP', retried: false, answers: 9, opt: true, maxSize: 1232 } },
    { name: 'no EDNS: dig retries over TCP and gets all 40 records', options: ['+noedns'],
      expect: { transport: 'TCP', retried: true, answers: 40, opt: false, size: 4833, maxSize: 4833 } },
    { name: 'EDNS 1232: dig retries over TCP and gets all 40 records', options: [],
      expect: { transport: 'TCP', retried: true, answers: 40, opt: true, size: 4844, maxSize: 4844 } },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const a = await dig(c.options);
      const { maxSize, ...expected } = c.expect;
      assert.ok(a.size <= maxSize, `${a.size} bytes`);
      assert.equal(a.malformed, false, 'dig read every record');
      assert.equal(a.flags.includes('tc'), c.expect.transport === 'UDP', `flags ${a.flags.join(' ')}`);
      assert.deepEqual(Object.fromEntries(Object.keys(expected).map((k) => [k, a[k as keyof DigAnswer]])), expected);
    });
  }
});
