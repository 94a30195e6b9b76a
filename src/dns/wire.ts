// The few facts of the DNS wire format (RFC 1035, RFC 6891) the proxy reads from raw messages.
// Pure. Queries are read here, bounded by the message's length, rather than by dns2's Packet.parse:
// the forwarding path must send the client's bytes on unchanged (dns2 drops EDNS options it does not
// know, such as cookies, when it re-encodes), and dns2's parser walks every count in the header
// however short the message, so a 40-byte packet claiming 65535 records costs it ~260k exceptions.

export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
export const QTYPE = { A: 1, CNAME: 5, AAAA: 28, OPT: 41, ANY: 255 } as const;
export const QCLASS_IN = 1;
export const HEADER_LENGTH = 12;
/** RFC 1035 4.2.1: the UDP answer size without EDNS; also the least an EDNS size counts as (RFC 6891 6.2.5). */
export const CLASSIC_UDP_LIMIT = 512;
/**
 * The largest UDP payload over IPv4 (65535 − 20-byte IP header − 8-byte UDP header): a client
 * advertising more (EDNS allows 65535) still cannot be sent more in one datagram.
 */
export const MAX_UDP_PAYLOAD = 65_507;
const MAX_NAME_OCTETS = 255;

/** The query the proxy acts on: its header, its one question, and its EDNS payload size. */
export interface Query {
  readonly id: number;
  readonly rd: boolean;
  /** Lower-cased, without the trailing dot ('' for the root); a label holding a dot is escaped `\046`. */
  readonly name: string;
  /** The name as the client wrote it (case kept, to echo it), same escaping. */
  readonly rawName: string;
  readonly qtype: number;
  readonly qclass: number;
  /** Offset just after the question: bytes 12..questionEnd are the question as sent. */
  readonly questionEnd: number;
  /** Largest UDP answer the client takes: its OPT payload size (512 to 65507), else 512. */
  readonly udpLimit: number;
  readonly hasOpt: boolean;
}

/** What to do with a message that is not a usable query. */
export type Rejected =
  /** Not worth an answer: too short to hold a header, or itself a response (answering could loop). */
  | { readonly action: 'drop'; readonly reason: string }
  /** Answer with this rcode (FORMERR, NOTIMP), echoing the question when it could be read. */
  | { readonly action: 'reply'; readonly rcode: number; readonly questionEnd?: number; readonly reason: string };

export type ReadResult = { readonly ok: true; readonly query: Query } | ({ readonly ok: false } & Rejected);

export function messageId(msg: Uint8Array): number {
  return (msg[0]! << 8) | msg[1]!;
}

export function rcodeOf(msg: Uint8Array): number {
  return msg[3]! & 0x0f;
}

export function isResponse(msg: Uint8Array): boolean {
  return (msg[2]! & 0x80) !== 0;
}

export function isTruncated(msg: Uint8Array): boolean {
  return (msg[2]! & 0x02) !== 0;
}

function count(msg: Uint8Array, at: number): number {
  return (msg[at]! << 8) | msg[at + 1]!;
}

/** A copy of `msg` whose id is `id` (the only bytes that differ). */
export function withId(msg: Uint8Array, id: number): Buffer {
  const out = Buffer.from(msg);
  out[0] = id >> 8;
  out[1] = id & 0xff;
  return out;
}

interface NameRead {
  readonly name: string;
  /** Offset after the name where it sits (after the first pointer, if any). */
  readonly end: number;
}

/**
 * Reads a (possibly compressed) name at `at`. Pointers must point strictly backwards, which rules
 * out loops; the total is bounded by 255 octets. Returns undefined when the name is malformed.
 */
function readName(msg: Uint8Array, at: number): NameRead | undefined {
  const labels: string[] = [];
  let pos = at;
  let end = -1;
  let octets = 1;
  let lowest = at; // pointers must go below every position read so far
  for (;;) {
    if (pos >= msg.length) return undefined;
    const len = msg[pos]!;
    if (len === 0) {
      if (end < 0) end = pos + 1;
      break;
    }
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= msg.length) return undefined;
      const target = ((len & 0x3f) << 8) | msg[pos + 1]!;
      if (target >= lowest || target < HEADER_LENGTH) return undefined;
      if (end < 0) end = pos + 2;
      pos = target;
      lowest = target;
      continue;
    }
    if (kind !== 0) return undefined; // 0x40 and 0x80 label types are obsolete or reserved
    octets += len + 1;
    if (octets > MAX_NAME_OCTETS || pos + 1 + len > msg.length) return undefined;
    let label = '';
    for (let i = pos + 1; i <= pos + len; i++) {
      const c = msg[i]!;
      // A dot or an unprintable byte inside a label is escaped, so that it can never spell a table name.
      label += c === 0x2e || c < 0x21 || c > 0x7e ? `\\${String(c).padStart(3, '0')}` : String.fromCharCode(c);
    }
    labels.push(label);
    pos += 1 + len;
  }
  return { name: labels.join('.'), end };
}

interface RecordRead {
  /** Offset after the owner name: type, class, TTL and RDLENGTH (10 bytes), then the RDATA. */
  readonly fixed: number;
  readonly end: number;
  readonly type: number;
  readonly klass: number;
}

/** The resource record at `at`, or undefined when it runs past the message. */
function skipRecord(msg: Uint8Array, at: number): RecordRead | undefined {
  const name = readName(msg, at);
  if (!name || name.end + 10 > msg.length) return undefined;
  const type = count(msg, name.end);
  const klass = count(msg, name.end + 2);
  const end = name.end + 10 + count(msg, name.end + 8);
  return end > msg.length ? undefined : { fixed: name.end, end, type, klass };
}

/**
 * Reads a query as a DNS server must before acting on it. Only standard queries (opcode 0) with
 * exactly one question are served; the answer and authority sections are skipped and the
 * additional section is searched for the OPT record. Every step is bounded by the message length.
 */
export function readQuery(msg: Uint8Array): ReadResult {
  if (msg.length < HEADER_LENGTH) return { ok: false, action: 'drop', reason: `${msg.length} bytes, shorter than a header` };
  if (isResponse(msg)) return { ok: false, action: 'drop', reason: 'a response, not a query' };
  const opcode = (msg[2]! >> 3) & 0x0f;
  if (opcode !== 0) return { ok: false, action: 'reply', rcode: RCODE.NOTIMP, reason: `opcode ${opcode}` };
  const qd = count(msg, 4);
  if (qd !== 1) return { ok: false, action: 'reply', rcode: RCODE.FORMERR, reason: `${qd} questions` };
  const name = readName(msg, HEADER_LENGTH);
  if (!name || name.end + 4 > msg.length) return { ok: false, action: 'reply', rcode: RCODE.FORMERR, reason: 'unreadable question' };
  const questionEnd = name.end + 4;
  const formerr = (reason: string): ReadResult => ({ ok: false, action: 'reply', rcode: RCODE.FORMERR, questionEnd, reason });
  let pos = questionEnd;
  const records = count(msg, 6) + count(msg, 8);
  for (let i = 0; i < records; i++) {
    const r = skipRecord(msg, pos);
    if (!r) return formerr('a record runs past the end of the message');
    pos = r.end;
  }
  let udpLimit = CLASSIC_UDP_LIMIT;
  let hasOpt = false;
  const additional = count(msg, 10);
  for (let i = 0; i < additional; i++) {
    const r = skipRecord(msg, pos);
    if (!r) return formerr('a record runs past the end of the message');
    if (r.type === QTYPE.OPT) {
      if (hasOpt) return formerr('two OPT records'); // RFC 6891 6.1.1
      hasOpt = true;
      udpLimit = Math.min(MAX_UDP_PAYLOAD, Math.max(CLASSIC_UDP_LIMIT, r.klass));
    }
    pos = r.end;
  }
  return {
    ok: true,
    query: {
      id: messageId(msg),
      rd: (msg[2]! & 0x01) !== 0,
      name: name.name.toLowerCase(),
      rawName: name.name,
      qtype: count(msg, name.end),
      qclass: count(msg, name.end + 2),
      questionEnd,
      udpLimit,
      hasOpt,
    },
  };
}

/**
 * An answer carrying only an rcode, built from the query's own bytes: same id, opcode and RD, the
 * question echoed when `questionEnd` is given (the bytes as sent), RA set, nothing else.
 */
export function errorResponse(query: Uint8Array, rcode: number, questionEnd?: number): Buffer {
  const end = questionEnd ?? HEADER_LENGTH;
  const out = Buffer.alloc(end);
  out.set(query.subarray(0, end));
  out[2] = 0x80 | (query[2]! & 0x79); // QR, opcode and RD kept; AA and TC cleared
  out[3] = 0x80 | (rcode & 0x0f); // RA; Z, AD and CD cleared
  out.writeUInt16BE(questionEnd === undefined ? 0 : 1, 4);
  out.fill(0, 6, HEADER_LENGTH);
  return out;
}

/**
 * Whether `answer` answers `query`: a response with the same id whose question is the query's
 * (compared ignoring ASCII case), or one that carries no question (some servers' error answers).
 */
export function answersQuery(answer: Uint8Array, query: Uint8Array, questionEnd: number): boolean {
  if (answer.length < HEADER_LENGTH || !isResponse(answer) || messageId(answer) !== messageId(query)) return false;
  const qd = count(answer, 4);
  if (qd === 0) return true;
  if (qd !== 1 || answer.length < questionEnd) return false;
  for (let i = HEADER_LENGTH; i < questionEnd; i++) {
    let a = answer[i]!;
    let b = query[i]!;
    if (a >= 0x41 && a <= 0x5a) a |= 0x20;
    if (b >= 0x41 && b <= 0x5a) b |= 0x20;
    if (a !== b) return false;
  }
  return true;
}

/** Section counts at bytes 4, 6, 8 and 10: question, answer, authority, additional. */
const SECTIONS = 4;
const ADDITIONAL = 3;

/**
 * `answer` cut down to what a UDP client takes, the way resolvers truncate (RFC 1035 4.2.1, RFC 2181 9,
 * RFC 6891 7; as miekg/dns `Msg.Truncate`, which Istio's DNS proxy uses): the header and the question
 * as they are, then whole records in order (answer, authority, additional) up to the first one that
 * does not fit, which ends the answer (nothing later is slipped in: a record is never cut, and no set
 * looks complete that is not); TC set when a record was left out; the counts fixed. The bytes kept
 * are the answer's own, a prefix of it, so the compression pointers in them (always backwards) still
 * hold. The server's OPT record is kept at the end when the client sent EDNS (`keepOpt`): it carries
 * the extended rcode and the DO bit; its options go if even the header and question leave no room for
 * them (EDNS padding). Without EDNS in the query no OPT is owed (RFC 6891 7), so it goes. Records after
 * the OPT, and from the first one that cannot be read, are left out. `limit` below 512 counts as 512.
 */
export function truncateAnswer(answer: Uint8Array, limit: number, keepOpt: boolean): Buffer {
  const size = Math.max(limit, CLASSIC_UDP_LIMIT);
  if (answer.length <= size) return Buffer.from(answer);
  // Entries in wire order: where each ends and its section; the OPT record aside.
  const ends: number[] = [];
  const sectionOf: number[] = [];
  let opt: RecordRead | undefined;
  let questionEnd = HEADER_LENGTH;
  let total = 0;
  let pos = HEADER_LENGTH;
  walk: for (let section = 0; section < SECTIONS; section++) {
    const n = count(answer, 4 + 2 * section);
    total += n;
    for (let i = 0; i < n; i++) {
      if (section === 0) {
        const name = readName(answer, pos);
        if (!name || name.end + 4 > answer.length) break walk;
        pos = questionEnd = name.end + 4;
      } else {
        const record = skipRecord(answer, pos);
        if (!record) break walk;
        if (section === ADDITIONAL && record.type === QTYPE.OPT) {
          opt = record;
          break walk; // the OPT is last in practice; what follows it is left out (see above)
        }
        pos = record.end;
      }
      ends.push(pos);
      sectionOf.push(section);
    }
  }
  let optRecord = keepOpt && opt ? rootedOpt(answer, opt, true) : Buffer.alloc(0);
  if (opt && optRecord.length > 0 && questionEnd + optRecord.length > size) optRecord = rootedOpt(answer, opt, false);
  const budget = size - optRecord.length;
  const kept = [0, 0, 0, 0];
  let cut = HEADER_LENGTH;
  for (let i = 0; i < ends.length && ends[i]! <= budget; i++) {
    cut = ends[i]!;
    kept[sectionOf[i]!]!++;
  }
  const keptCount = kept[0]! + kept[1]! + kept[2]! + kept[3]!;
  const out = Buffer.concat([answer.subarray(0, cut), optRecord]);
  for (let section = 0; section < SECTIONS; section++) out.writeUInt16BE(kept[section]!, 4 + 2 * section);
  if (optRecord.length > 0) out.writeUInt16BE(kept[ADDITIONAL]! + 1, 10);
  // A left-out OPT alone is no missing data (the client did not ask for one).
  if (keptCount < total - (opt ? 1 : 0)) out[2] = out[2]! | 0x02;
  return out;
}

/** The OPT record with the root as its owner (whatever the server wrote), with or without its options. */
function rootedOpt(msg: Uint8Array, r: RecordRead, withOptions: boolean): Buffer {
  const rdata = withOptions ? msg.subarray(r.fixed + 10, r.end) : msg.subarray(0, 0);
  const out = Buffer.alloc(11 + rdata.length);
  out.set(msg.subarray(r.fixed, r.fixed + 8), 1);
  out.writeUInt16BE(rdata.length, 9);
  out.set(rdata, 11);
  return out;
}
