import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import dns2, { type Question, type Resource } from 'dns2';
import { answeredAddresses } from '../../src/dns/answered-addresses.js';

const { Packet } = dns2;

/** An answer as a name server would send it: a question and these records. */
function answer(records: { type: number; address?: string; domain?: string }[]): Buffer {
  const p = new Packet();
  p.header.qr = 1;
  p.questions.push({ name: 'api.example.com', type: Packet.TYPE.A, class: Packet.CLASS.IN } as Question);
  for (const r of records) p.answers.push({ name: 'api.example.com', class: Packet.CLASS.IN, ttl: 30, ...r } as Resource);
  return p.toBuffer();
}

describe('answeredAddresses', () => {
  it('reads the A and AAAA records of an answer', () => {
    assert.deepEqual(answeredAddresses(answer([
      { type: Packet.TYPE.A, address: '10.1.2.3' }, { type: Packet.TYPE.A, address: '10.1.2.4' }, { type: Packet.TYPE.AAAA, address: '2001:db8::7' },
    ])), ['10.1.2.3', '10.1.2.4', '2001:db8::7']);
  });

  it('leaves other records out (a CNAME on the way)', () => {
    assert.deepEqual(answeredAddresses(answer([{ type: Packet.TYPE.CNAME, domain: 'edge.example.net' }, { type: Packet.TYPE.A, address: '10.9.9.9' }])), ['10.9.9.9']);
  });

  it('gives nothing for an answer without records, or bytes that are not DNS', () => {
    assert.deepEqual(answeredAddresses(answer([])), []);
    assert.deepEqual(answeredAddresses(Buffer.from('not a dns message')), []);
    assert.deepEqual(answeredAddresses(new Uint8Array(0)), []);
  });
});
