// Encodes the answers the proxy gives itself (names of the table), with dns2's Packet. Pure.
// dns2 encodes bit by bit (~60 µs an answer), so LocalAnswerCache keeps each encoded answer per
// name, type and EDNS presence, and a query only patches its id, its RD bit and its question bytes.
import { Packet, type Header, type Question, type Resource } from 'dns2';
import type { LocalAnswer } from './name-table.js';
import { HEADER_LENGTH, QCLASS_IN, QTYPE, RCODE, type Query } from './wire.js';

// dns2's typings omit EDNS's second parameter (payload size, version, DO flag).
const edns = Packet.Resource.EDNS as unknown as (rdata: object[], opts: { udpPayloadSize: number }) => Resource;

/** Istio's DNS proxy answers its own names with this TTL. */
export const LOCAL_TTL_SECONDS = 30;
/** The UDP payload size this proxy advertises in its OPT record (the DNS Flag Day 2020 value). */
export const ADVERTISED_UDP_SIZE = 1232;

/**
 * The authoritative answer: the question echoed as the client wrote it, a CNAME first when the name
 * was a search-domain expansion, then the records (TTL 30). Over UDP, an answer larger than the
 * client takes is sent as header and question with TC set, so the client asks again over TCP.
 */
export function encodeLocalAnswer(query: Query, answer: LocalAnswer, udp: boolean): Buffer {
  const full = build(query, answer, true);
  return udp && full.length > query.udpLimit ? build(query, answer, false) : full;
}

function build(query: Query, answer: LocalAnswer, withRecords: boolean): Buffer {
  const packet = new Packet({
    id: query.id, qr: 1, opcode: 0, aa: 1, tc: withRecords ? 0 : 1, rd: query.rd ? 1 : 0, ra: 1, z: 0,
    rcode: answer.rcode === 'NXDOMAIN' ? RCODE.NXDOMAIN : RCODE.NOERROR,
  } as unknown as Header);
  packet.questions.push({ name: query.rawName, type: query.qtype, class: query.qclass } as Question);
  if (withRecords) {
    let owner = query.rawName;
    if (answer.cname !== undefined) {
      packet.answers.push({ name: owner, type: QTYPE.CNAME, class: QCLASS_IN, ttl: LOCAL_TTL_SECONDS, domain: answer.cname } as Resource);
      owner = answer.cname;
    }
    for (const r of answer.records) {
      packet.answers.push({
        name: owner, type: r.type === 'A' ? QTYPE.A : QTYPE.AAAA, class: QCLASS_IN, ttl: LOCAL_TTL_SECONDS, address: r.address,
      } as Resource);
    }
  }
  // RFC 6891 7: a query with an OPT record gets one back.
  if (query.hasOpt) packet.additionals.push(edns([], { udpPayloadSize: ADVERTISED_UDP_SIZE }));
  return packet.toBuffer();
}

interface Encoded {
  readonly full: Buffer;
  truncated?: Buffer;
}

/**
 * Encoded local answers, reused: an answer depends on the query only through its id, RD bit and
 * question bytes (the name's case), all patched in; everything else follows from name, type and
 * EDNS presence. Cleared with the table; bounded (emptied when full).
 */
export class LocalAnswerCache {
  readonly #entries = new Map<string, Encoded>();

  constructor(readonly maxEntries = 4096) {}

  clear(): void {
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The answer for `msg` (the raw query read as `query`). */
  answer(msg: Buffer, query: Query, answer: LocalAnswer, udp: boolean): Buffer {
    const key = `${query.qtype}|${query.hasOpt ? 1 : 0}|${query.name}`;
    let e = this.#entries.get(key);
    if (!e) {
      if (this.#entries.size >= this.maxEntries) this.#entries.clear();
      e = { full: build(query, answer, true) };
      this.#entries.set(key, e);
    }
    let out = e.full;
    if (udp && out.length > query.udpLimit) out = e.truncated ??= build(query, answer, false);
    const copy = Buffer.from(out);
    copy[0] = query.id >> 8;
    copy[1] = query.id & 0xff;
    copy[2] = (copy[2]! & 0xfe) | (query.rd ? 1 : 0);
    // The question as this client wrote it (same length: only the case of the name can differ).
    msg.copy(copy, HEADER_LENGTH, HEADER_LENGTH, query.questionEnd);
    return copy;
  }
}
