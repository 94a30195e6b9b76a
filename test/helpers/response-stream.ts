// What a client received on one connection, read as HTTP/1.1 responses (the differential test's
// client side): status, header fields and content of each, informational ones apart, and the bytes
// after a 101 (the tunnel). Lenient where the test only needs to see what came (reason phrases,
// a connection that ended early); framing as RFC 9112 6.3 reads a response. Pure.

export interface ReceivedResponse {
  readonly status: number;
  /** Lower-case name → values in order. */
  readonly headers: ReadonlyMap<string, readonly string[]>;
  readonly body: Buffer;
  /** Its content ended where its framing says (false: the connection ended first). */
  readonly complete: boolean;
}

export interface ReceivedStream {
  /** Final responses in order (1xx other than 101 left out), a 101 included as the last one. */
  readonly responses: readonly ReceivedResponse[];
  /** After a 101: the bytes that came on the tunnel. */
  readonly tunnel?: Buffer;
  /** Why the rest could not be read as responses (undefined: everything was read). */
  readonly unreadable?: string;
}

/** `isHead(i)`: the i-th request was a HEAD (its response has no content). */
export function readResponses(b: Buffer, isHead: (i: number) => boolean = () => false): ReceivedStream {
  const responses: ReceivedResponse[] = [];
  let pos = 0;
  const stream = (unreadable?: string, tunnel?: Buffer): ReceivedStream =>
    ({ responses, ...(tunnel ? { tunnel } : {}), ...(unreadable ? { unreadable } : {}) });
  while (pos < b.length) {
    const headEnd = b.indexOf('\r\n\r\n', pos, 'latin1');
    if (headEnd < 0) return stream(`a response head without its end at byte ${pos}: ${JSON.stringify(b.toString('latin1', pos, pos + 80))}`);
    const lines = b.toString('latin1', pos, headEnd).split('\r\n');
    const status = /^HTTP\/1\.[01] ([0-9]{3})(?: .*)?$/s.exec(lines[0]!);
    if (!status) return stream(`not a status line at byte ${pos}: ${JSON.stringify(lines[0])}`);
    const headers = new Map<string, string[]>();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) return stream(`not a header line: ${JSON.stringify(line)}`);
      const name = line.slice(0, colon).toLowerCase();
      headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
    }
    pos = headEnd + 4;
    const code = Number(status[1]);
    if (code === 101) {
      responses.push({ status: code, headers, body: Buffer.alloc(0), complete: true });
      return stream(undefined, b.subarray(pos));
    }
    if (code < 200) continue;
    const index = responses.length;
    const te = headers.get('transfer-encoding');
    const cl = headers.get('content-length');
    let body: Buffer;
    let complete = true;
    if (isHead(index) || code === 204 || code === 304) {
      body = Buffer.alloc(0);
    } else if (te && te.join(',').toLowerCase().trim().endsWith('chunked')) {
      const parts: Buffer[] = [];
      for (;;) {
        const eol = b.indexOf('\r\n', pos, 'latin1');
        if (eol < 0) { complete = false; pos = b.length; break; }
        const size = parseInt(b.toString('latin1', pos, eol).split(';')[0]!, 16);
        if (Number.isNaN(size)) return stream(`chunk size at byte ${pos}`);
        pos = eol + 2;
        if (size === 0) {
          const end = b.indexOf('\r\n\r\n', pos - 2, 'latin1');
          if (end < 0) { complete = false; pos = b.length; } else pos = end + 4;
          break;
        }
        if (pos + size + 2 > b.length) { parts.push(b.subarray(pos)); complete = false; pos = b.length; break; }
        parts.push(b.subarray(pos, pos + size));
        pos += size + 2;
      }
      body = Buffer.concat(parts);
    } else if (cl) {
      const n = Number(cl[0]);
      body = b.subarray(pos, Math.min(b.length, pos + n));
      complete = body.length === n;
      pos += body.length;
    } else { // delimited by the close
      body = b.subarray(pos);
      pos = b.length;
    }
    responses.push({ status: code, headers, body, complete });
  }
  return stream();
}
