// src/proxy/http2/hpack/, pure: the decoder against RFC 7541 Appendix C (C.2 to C.6, with and
// without Huffman, the dynamic table after each block), the Huffman code's edges (padding, EOS), and
// blocks that are not valid HPACK (truncated, oversized, bad indexes) refused with HpackError, never
// a crash or a wrong table. The differential against node's own HPACK is hpack-differential.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HpackDecoder, HpackError } from '../../../src/proxy/http2/hpack/decoder.js';
import { huffmanCodes, huffmanDecode } from '../../../src/proxy/http2/hpack/huffman.js';
import { FAULT_NAME, FAULT_VALUE_CHAR } from '../../../src/proxy/http2/field-validity.js';

type Fields = Array<[string, string]>;
const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

function decodeAll(d: HpackDecoder, block: Buffer): Fields {
  const out: Fields = [];
  d.decode(block, (n, v) => out.push([n, v]));
  return out;
}

/** A Huffman encoder for the tests, from the same derived codes (checked against RFC vectors below). */
function huffmanEncode(bytes: Buffer): Buffer {
  const codes = huffmanCodes();
  const bits: number[] = [];
  for (const b of bytes) {
    const { code, bits: n } = codes[b]!;
    for (let i = n - 1; i >= 0; i--) bits.push(Math.floor(code / 2 ** i) % 2);
  }
  while (bits.length % 8 !== 0) bits.push(1);
  const out = Buffer.alloc(bits.length / 8);
  for (let i = 0; i < bits.length; i++) out[i >> 3]! |= bits[i]! << (7 - (i & 7));
  return out;
}

const REQ1: Fields = [[':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com']];
const REQ2: Fields = [...REQ1, ['cache-control', 'no-cache']];
const REQ3: Fields = [[':method', 'GET'], [':scheme', 'https'], [':path', '/index.html'], [':authority', 'www.example.com'], ['custom-key', 'custom-value']];
const DATE1 = 'Mon, 21 Oct 2013 20:13:21 GMT';
const DATE2 = 'Mon, 21 Oct 2013 20:13:22 GMT';
const LOC = 'https://www.example.com';
const COOKIE = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
const RESP1: Fields = [[':status', '302'], ['cache-control', 'private'], ['date', DATE1], ['location', LOC]];
const RESP2: Fields = [[':status', '307'], ['cache-control', 'private'], ['date', DATE1], ['location', LOC]];
const RESP3: Fields = [[':status', '200'], ['cache-control', 'private'], ['date', DATE2], ['location', LOC], ['content-encoding', 'gzip'], ['set-cookie', COOKIE]];

/** RFC 7541 C.3 to C.6: three blocks on one decoder each, the table size after each. */
const SEQUENCES: Array<{ name: string; limit: number; server: boolean; blocks: string[]; lists: Fields[]; sizes: number[] }> = [
  { name: 'C.3 requests without Huffman', limit: 4096, server: true, lists: [REQ1, REQ2, REQ3], sizes: [57, 110, 164], blocks: [
    '828684410f7777772e6578616d706c652e636f6d',
    '828684be58086e6f2d6361636865',
    '828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565'] },
  { name: 'C.4 requests with Huffman', limit: 4096, server: true, lists: [REQ1, REQ2, REQ3], sizes: [57, 110, 164], blocks: [
    '828684418cf1e3c2e5f23a6ba0ab90f4ff',
    '828684be5886a8eb10649cbf',
    '828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf'] },
  { name: 'C.5 responses without Huffman, a 256-byte table (evictions)', limit: 256, server: false, lists: [RESP1, RESP2, RESP3], sizes: [222, 222, 215], blocks: [
    '4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d',
    '4803333037c1c0bf',
    '88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31'] },
  { name: 'C.6 responses with Huffman, a 256-byte table (evictions)', limit: 256, server: false, lists: [RESP1, RESP2, RESP3], sizes: [222, 222, 215], blocks: [
    '488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3',
    '4883640effc1c0bf',
    '88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007'] },
];

describe('HpackDecoder: RFC 7541 Appendix C', () => {
  it('C.2: each literal form and an indexed field, and what each leaves in the table', () => {
    const cases: Array<[string, Fields, number]> = [
      ['400a637573746f6d2d6b65790d637573746f6d2d686561646572', [['custom-key', 'custom-header']], 55], // with indexing
      ['040c2f73616d706c652f70617468', [[':path', '/sample/path']], 0], // without indexing
      ['100870617373776f726406736563726574', [['password', 'secret']], 0], // never indexed
      ['82', [[':method', 'GET']], 0], // indexed
    ];
    for (const [block, fields, size] of cases) {
      const d = new HpackDecoder(true);
      assert.deepEqual(decodeAll(d, hex(block)), fields, block);
      assert.equal(d.tableSize, size, block);
    }
  });

  for (const s of SEQUENCES) {
    it(s.name, () => {
      const d = new HpackDecoder(s.server, s.limit);
      s.blocks.forEach((b, i) => {
        assert.deepEqual(decodeAll(d, hex(b)), s.lists[i], `block ${i + 1}`);
        assert.equal(d.tableSize, s.sizes[i], `table after block ${i + 1}`);
      });
    });
  }

  it('the derived Huffman code encodes C.4 and C.6 strings as the RFC does', () => {
    assert.equal(huffmanEncode(Buffer.from('www.example.com')).toString('hex'), 'f1e3c2e5f23a6ba0ab90f4ff');
    assert.equal(huffmanEncode(Buffer.from('no-cache')).toString('hex'), 'a8eb10649cbf');
    assert.equal(huffmanEncode(Buffer.from(COOKIE)).toString('hex'), '94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007');
  });
});

describe('huffmanDecode', () => {
  const out = Buffer.alloc(64);
  it('every byte value round-trips, alone and in a run', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const big = Buffer.alloc(512);
    assert.equal(huffmanDecode(huffmanEncode(all), 0, huffmanEncode(all).length, big), 256);
    assert.deepEqual(big.subarray(0, 256), all);
    for (let b = 0; b < 256; b++) {
      const enc = huffmanEncode(Buffer.from([b]));
      assert.equal(huffmanDecode(enc, 0, enc.length, out), 1, `byte ${b}`);
      assert.equal(out[0], b);
    }
  });

  it('padding of ones up to 7 bits is taken; zeros, 8 bits or more, or EOS itself are not', () => {
    assert.equal(huffmanDecode(Buffer.from([0x1f]), 0, 1, out), 1); // 'a' (00011) + 111
    assert.equal(huffmanDecode(Buffer.from([0x18]), 0, 1, out), 'padding'); // 'a' + 000
    assert.equal(huffmanDecode(Buffer.from([0x1f, 0xff]), 0, 2, out), 'padding'); // 11 bits of padding
    assert.equal(huffmanDecode(Buffer.from([0xff, 0xff, 0xff, 0xff]), 0, 4, out), 'eos'); // EOS's 30 ones
    assert.equal(huffmanDecode(Buffer.alloc(0), 0, 0, out), 0);
  });
});

describe('HpackDecoder: blocks that are not HPACK', () => {
  const refused: Array<[string, string]> = [
    ['80', 'index 0'],
    ['be', 'a dynamic index on an empty table'],
    ['ffffffffffffff7f', 'an integer above 2^31'],
    ['ff', 'an integer cut short'],
    ['400a637573746f6d2d6b6579', 'a literal cut before its value'],
    ['400a6375', 'a name string cut short'],
    ['0085f1e3c2e5', 'a Huffman name cut short'],
    ['40', 'a literal without its name'],
    ['3fe21f', 'a table size update above the 4096 advertised'],
    ['823f00', 'a size update after a field'],
    ['4081ff0161', 'a Huffman name of eight one bits (padding too long)'],
    ['408118 0161', 'a Huffman name with zero padding'],
  ];
  for (const [block, why] of refused) {
    it(`${why} (${block.replace(/\s/g, '')}): HpackError`, () => {
      assert.throws(() => new HpackDecoder(true).decode(hex(block)), HpackError);
    });
  }

  it('a size update to 0 empties the table; entries larger than the table empty it and are not added', () => {
    const d = new HpackDecoder(true);
    d.decode(hex('400a637573746f6d2d6b65790d637573746f6d2d686561646572'));
    assert.equal(d.tableSize, 55);
    d.decode(hex('20'));
    assert.equal(d.tableSize, 0);
    assert.throws(() => d.decode(hex('be')), HpackError); // the entry is gone
    const small = new HpackDecoder(true, 64);
    small.decode(hex('400a637573746f6d2d6b65790d637573746f6d2d686561646572')); // 55: fits
    small.decode(Buffer.concat([hex('4021'), Buffer.from('x'.repeat(33)), hex('00')])); // 33 + 0 + 32 = 65 > 64
    assert.equal(small.tableSize, 0);
  });

  it('random bytes never throw anything but HpackError (seeded)', () => {
    let seed = 0x2545f491;
    const rand = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) & 0xff;
    for (let i = 0; i < 20_000; i++) {
      const block = Buffer.from(Array.from({ length: 1 + (rand() % 40) }, rand));
      try {
        new HpackDecoder(i % 2 === 0).decode(block);
      } catch (err) {
        assert.ok(err instanceof HpackError, `${block.toString('hex')}: ${String(err)}`);
      }
    }
  });
});

describe('HpackDecoder: field faults', () => {
  const literal = (name: string, value: string): Buffer =>
    Buffer.concat([Buffer.from([0x00, name.length]), Buffer.from(name, 'latin1'), Buffer.from([value.length]), Buffer.from(value, 'latin1')]);

  it('a block with a malformed field returns its fault, and still decodes the whole block', () => {
    const d = new HpackDecoder(true);
    const block = Buffer.concat([hex('8286'), literal('x-a', 'a\r\nb'), hex('400a637573746f6d2d6b65790d637573746f6d2d686561646572')]);
    assert.equal(d.decode(block), FAULT_VALUE_CHAR);
    assert.equal(d.tableSize, 55); // the field after it was indexed all the same
  });

  it('an indexed malformed entry is malformed each time it is referenced', () => {
    const d = new HpackDecoder(true);
    const indexed = Buffer.concat([Buffer.from([0x40, 3]), Buffer.from('x a'), Buffer.from([1]), Buffer.from('v')]);
    assert.equal(d.decode(indexed), FAULT_NAME);
    assert.equal(d.decode(hex('be')), FAULT_NAME);
    assert.equal(d.decode(hex('82')), undefined);
  });
});

describe('HpackDecoder: literals with a static name, sent again (a response\'s date, server, etag...)', () => {
  /** A literal without indexing, name = static index `index` (15 to 142), the value plain or Huffman coded. */
  const literal = (index: number, value: string, huffman = false): Buffer => {
    const bytes = huffman ? huffmanEncode(Buffer.from(value, 'latin1')) : Buffer.from(value, 'latin1');
    return Buffer.concat([Buffer.from([0x0f, index - 15, (huffman ? 0x80 : 0) | bytes.length]), bytes]);
  };
  const ACCEPT_RANGES = 18;

  it('the same bytes again give the same value; other bytes of the same length give theirs', () => {
    const d = new HpackDecoder(false);
    const date = (v: string, huffman = false): Buffer => literal(33, v, huffman);
    assert.deepEqual(decodeAll(d, Buffer.concat([hex('88'), date(DATE1)])), [[':status', '200'], ['date', DATE1]]);
    assert.deepEqual(decodeAll(d, Buffer.concat([hex('88'), date(DATE1)])), [[':status', '200'], ['date', DATE1]]);
    assert.deepEqual(decodeAll(d, date(DATE2)), [['date', DATE2]], 'one byte differs: the new value');
    assert.deepEqual(decodeAll(d, date(DATE2, true)), [['date', DATE2]], 'the same text Huffman coded');
    assert.deepEqual(decodeAll(d, date(DATE1, true)), [['date', DATE1]]);
    assert.deepEqual(decodeAll(d, date(DATE1)), [['date', DATE1]], 'plain again after Huffman');
  });

  it('a remembered literal keeps its verdict: a malformed value is malformed each time', () => {
    const d = new HpackDecoder(false);
    const bad = literal(ACCEPT_RANGES, 'a\r\nb');
    assert.equal(d.decode(bad), FAULT_VALUE_CHAR);
    assert.equal(d.decode(bad), FAULT_VALUE_CHAR);
    assert.equal(d.decode(literal(ACCEPT_RANGES, 'bytes')), undefined);
    assert.equal(d.decode(bad), FAULT_VALUE_CHAR);
  });

  it('with incremental indexing, each sending is a table entry of its own (the table follows the peer)', () => {
    const d = new HpackDecoder(false);
    const indexed = Buffer.concat([Buffer.from([0x40 | ACCEPT_RANGES]), Buffer.from([5]), Buffer.from('bytes')]);
    decodeAll(d, indexed);
    decodeAll(d, indexed);
    assert.equal(d.tableSize, 2 * (13 + 5 + 32));
    assert.deepEqual(decodeAll(d, hex('bebf')), [['accept-ranges', 'bytes'], ['accept-ranges', 'bytes']]);
  });

  it('nginx\'s response head (as nginx 1.22 sends it), twice: the same fields, the table as the peer\'s', () => {
    // :status indexed; server, date, content-type, content-length, last-modified with incremental
    // indexing; etag and accept-ranges with their names as strings (literals without indexing).
    const block = hex('887689aa6355e580ae212e1f6196dc34fd282794d27eea0802714082e36cdc034a62d1bf5f87497ca589d34d1f5c04313032346c96dc34'
      + 'fd282794d27eea0802714082e36cdc032a62d1bf00832a47378bfe5c8c038c4f4ab34007f3008919085ad2b583aa62a3848fd24a8f');
    const d = new HpackDecoder(false);
    const first = decodeAll(d, block);
    assert.deepEqual(first.map(([n]) => n), [':status', 'server', 'date', 'content-type', 'content-length', 'last-modified', 'etag', 'accept-ranges']);
    assert.deepEqual(first[7], ['accept-ranges', 'bytes']);
    const size = d.tableSize;
    assert.deepEqual(decodeAll(d, block), first);
    assert.equal(d.tableSize, 2 * size, 'each sending put five entries in the table again');
  });

  it('literals with their names as strings: a name or a value that differs is decoded anew; more than 8 kept in turn', () => {
    const own = (name: string, value: string, huffman = false): Buffer => {
      const n = huffman ? huffmanEncode(Buffer.from(name)) : Buffer.from(name);
      return Buffer.concat([Buffer.from([0x00, (huffman ? 0x80 : 0) | n.length]), n, Buffer.from([value.length]), Buffer.from(value)]);
    };
    const d = new HpackDecoder(false);
    assert.deepEqual(decodeAll(d, own('grpc-status', '0')), [['grpc-status', '0']]);
    assert.deepEqual(decodeAll(d, own('grpc-status', '0', true)), [['grpc-status', '0']]);
    assert.deepEqual(decodeAll(d, own('grpc-status', '1')), [['grpc-status', '1']]);
    assert.deepEqual(decodeAll(d, own('grpc-statuz', '0')), [['grpc-statuz', '0']]);
    const many = Array.from({ length: 12 }, (_, i) => own(`x-${i}`, `v${i}`));
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < many.length; i++) assert.deepEqual(decodeAll(d, many[i]!), [[`x-${i}`, `v${i}`]]);
    }
    assert.equal(d.decode(own('x-bad', 'a\nb')), FAULT_VALUE_CHAR);
    assert.equal(d.decode(own('x-bad', 'a\nb')), FAULT_VALUE_CHAR, 'a remembered one keeps its verdict');
  });

  it('a value cut short is refused even when its first bytes match the remembered one', () => {
    const d = new HpackDecoder(false);
    decodeAll(d, literal(ACCEPT_RANGES, 'bytes'));
    assert.throws(() => d.decode(literal(ACCEPT_RANGES, 'bytes').subarray(0, 6)), HpackError);
  });
});
