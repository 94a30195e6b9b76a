// A TLS client's first flight, read before any TLS object exists (Envoy's TLS inspector): the
// ClientHello names the server the client wants (SNI), so a listener can choose that server's
// certificate and settings, or refuse, before OpenSSL sees a byte. OpenSSL fixes a connection's
// versions and ciphers when the connection is made, so they cannot be switched later by an SNI
// callback the way a certificate can. Pure. These are bytes from strangers: every length is
// checked against what is there, and the rules for the server_name extension are OpenSSL's own
// (tls_parse_ctos_server_name), so both read the same name; the listener compares them after the
// handshake all the same.

/** Longest ClientHello accepted, across records (Envoy's TLS inspector allows 64 KiB too). */
export const MAX_CLIENT_HELLO_BYTES = 64 * 1024;
/**
 * Reads a ClientHello may take: real clients need a few; each one re-reads (and re-copies) what came
 * before, so a client trickling 64 KiB a byte at a time would cost gigabytes of copying.
 */
export const MAX_HELLO_CHUNKS = 64;
/**
 * Records one ClientHello may span: 64 KiB fit in four full ones; a client that cuts its hello
 * into many small records only makes every re-read longer.
 */
const MAX_RECORDS = 8;

export type ClientHelloRead =
  /** More bytes are needed. */
  | { readonly kind: 'incomplete' }
  /**
   * `serverName` as sent (latin1), undefined when the client sent no SNI; `alpn` the protocols it
   * offers, in its order (empty without the extension): a mesh peer says `istio-*` there.
   */
  | { readonly kind: 'hello'; readonly serverName: string | undefined; readonly alpn: readonly string[] }
  | { readonly kind: 'invalid'; readonly reason: string };

const RECORD_HEADER = 5;
const CONTENT_HANDSHAKE = 0x16;
/** TLS plaintext records carry at most 2^14 bytes. */
const MAX_RECORD = 16_384;
const HANDSHAKE_HEADER = 4;
const CLIENT_HELLO = 1;
const EXTENSION_SERVER_NAME = 0;
const EXTENSION_ALPN = 16;
const NAME_TYPE_HOST_NAME = 0;
const MAX_HOST_NAME = 255;
const MAX_SESSION_ID = 32;

const INCOMPLETE: ClientHelloRead = Object.freeze({ kind: 'incomplete' });

class Malformed extends Error {}

/** A cursor over one handshake message; every read past the end is Malformed. */
class Reader {
  private at = 0;

  constructor(private readonly b: Buffer) {}

  get left(): number {
    return this.b.length - this.at;
  }

  u8(): number {
    if (this.left < 1) throw new Malformed('truncated');
    return this.b[this.at++]!;
  }

  u16(): number {
    if (this.left < 2) throw new Malformed('truncated');
    const v = this.b.readUInt16BE(this.at);
    this.at += 2;
    return v;
  }

  bytes(n: number): Buffer {
    if (this.left < n) throw new Malformed('a length beyond the message');
    const v = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return v;
  }
}

function invalid(reason: string): ClientHelloRead {
  return { kind: 'invalid', reason };
}

/**
 * Reads the ClientHello at the start of `data` (everything received so far). Records after the
 * one that completes the ClientHello are not looked at.
 */
export function readClientHello(data: Buffer, maxBytes = MAX_CLIENT_HELLO_BYTES): ClientHelloRead {
  const fragments: Buffer[] = [];
  let have = 0;
  let need = -1; // the handshake message's length with its header, once known
  let at = 0;
  while (need < 0 || have < need) {
    const left = data.length - at;
    // Reject what cannot be TLS on the first byte that shows it (no waiting for a full header).
    if (left >= 1 && data[at] !== CONTENT_HANDSHAKE) return invalid(at === 0 ? 'not a TLS handshake record' : 'a record that is not a handshake before the ClientHello ended');
    if (left >= 2 && data[at + 1] !== 3) return invalid('not a TLS record version');
    if (left < RECORD_HEADER) return INCOMPLETE;
    const length = data.readUInt16BE(at + 3);
    if (length === 0 || length > MAX_RECORD) return invalid(`a record of ${length} bytes`);
    if (left < RECORD_HEADER + length) return INCOMPLETE;
    if (fragments.length === MAX_RECORDS) return invalid(`a ClientHello in more than ${MAX_RECORDS} records`);
    fragments.push(data.subarray(at + RECORD_HEADER, at + RECORD_HEADER + length));
    have += length;
    at += RECORD_HEADER + length;
    if (need < 0 && have >= HANDSHAKE_HEADER) {
      const head = fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments);
      if (head[0] !== CLIENT_HELLO) return invalid('a handshake message that is not a ClientHello');
      need = HANDSHAKE_HEADER + head.readUIntBE(1, 3);
      if (need > maxBytes) return invalid('a ClientHello too long');
    }
  }
  const message = (fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments)).subarray(HANDSHAKE_HEADER, need);
  try {
    return { kind: 'hello', ...extensionsOf(message) };
  } catch (err) {
    if (err instanceof Malformed) return invalid(`a malformed ClientHello (${err.message})`);
    throw err;
  }
}

const NO_PROTOCOLS: readonly string[] = Object.freeze([]);

/** The host name of the ClientHello body's server_name extension, if any, and its ALPN list. */
function extensionsOf(body: Buffer): { serverName: string | undefined; alpn: readonly string[] } {
  const r = new Reader(body);
  r.bytes(2 + 32); // client_version, random
  const sessionId = r.u8();
  if (sessionId > MAX_SESSION_ID) throw new Malformed('a session id longer than 32 bytes');
  r.bytes(sessionId);
  const suites = r.u16();
  if (suites < 2 || suites % 2 !== 0) throw new Malformed('a cipher suite list of odd or no length');
  r.bytes(suites);
  const compressions = r.u8();
  if (compressions < 1) throw new Malformed('no compression method');
  r.bytes(compressions);
  if (r.left === 0) return { serverName: undefined, alpn: NO_PROTOCOLS }; // no extensions at all
  if (r.u16() !== r.left) throw new Malformed('an extension block whose length is not the rest of the message');
  const seen = new Set<number>();
  let name: string | undefined;
  let alpn = NO_PROTOCOLS;
  while (r.left > 0) {
    const type = r.u16();
    const data = r.bytes(r.u16());
    // OpenSSL refuses a repeated extension; refusing it here keeps the two readings one.
    if (seen.has(type)) throw new Malformed(`extension ${type} repeated`);
    seen.add(type);
    if (type === EXTENSION_SERVER_NAME) name = hostName(data);
    else if (type === EXTENSION_ALPN) alpn = protocolNames(data);
  }
  return { serverName: name, alpn };
}

/** RFC 7301: a non-empty list of non-empty names, each a length byte and its bytes. */
function protocolNames(ext: Buffer): string[] {
  const r = new Reader(ext);
  const list = r.u16();
  if (list < 2 || list !== r.left) throw new Malformed('an ALPN list whose length is not the extension\'s');
  const names: string[] = [];
  while (r.left > 0) {
    const n = r.u8();
    if (n === 0) throw new Malformed('an empty ALPN protocol name');
    names.push(r.bytes(n).toString('latin1'));
  }
  return names;
}

/** OpenSSL's reading: one list, its first entry a host_name of 1–255 bytes without NUL. */
function hostName(ext: Buffer): string {
  const r = new Reader(ext);
  const list = r.u16();
  if (list === 0 || list !== r.left) throw new Malformed('a server name list whose length is not the extension\'s');
  if (r.u8() !== NAME_TYPE_HOST_NAME) throw new Malformed('a server name that is not a host name');
  const name = r.bytes(r.u16());
  if (name.length === 0 || name.length > MAX_HOST_NAME) throw new Malformed(`a host name of ${name.length} bytes`);
  if (name.includes(0)) throw new Malformed('a host name with a NUL byte');
  return name.toString('latin1');
}
