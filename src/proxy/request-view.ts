// What a RequestDecider sees of a request: the parts of node:http's IncomingMessage that deciders
// read (method, url, headers, rawHeaders, httpVersion, socket), built from the request as it will
// be forwarded (http1/message.ts): the normalized url, Host carrying the authority, hop-by-hop lines
// out. `headers` is made on first use: the sidecar's default decider never asks for it. It is not
// a stream: the body goes to the upstream, not to the decider.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { headersObject } from './http1/headers.js';
import type { BodySource } from './held-body.js';

export class RequestView {
  /** The whole body has arrived. */
  complete = false;
  /**
   * The decision being made for this request (gateway/decisions.ts), kept on it: a field of the
   * class, so setting it does not change the object's shape per request.
   */
  decisionDraft: unknown = undefined;
  /** Traffic management: what the request's attempts did (set by the engine at its end, for the decision log). */
  trail: readonly string[] | undefined = undefined;
  /** Traffic management: the endpoint of the request's last attempt (`10.0.0.1:8080`), for its decision record. */
  endpoint: string | undefined = undefined;
  /** Traffic management: the cluster and route names a decider sent it to (fields of the class: no shape change per request). */
  routedCluster: string | undefined = undefined;
  routedRoute: string | undefined = undefined;
  /** A route's fault injection delayed it (DI), set by the outbound decider. */
  faultDelayed = false;
  /**
   * Istio's metadata exchange: the peer sidecar's `x-envoy-peer-metadata` as it came (inbound: the
   * request's, from a verified mutual TLS client only; outbound: the mesh upstream's response's), and
   * the upstream's verified principal (outbound mutual TLS). The standard metrics' peer labels.
   */
  peerMetadata: string | undefined = undefined;
  upstreamPrincipal: string | undefined = undefined;
  /** The engine's exchange, for a decider that must see the body before it decides (held-body.ts). */
  body: BodySource | undefined = undefined;
  private headersCache: IncomingHttpHeaders | undefined;

  constructor(
    readonly method: string,
    readonly url: string,
    readonly httpVersionMajor: number,
    readonly httpVersionMinor: number,
    readonly rawHeaders: string[],
    readonly socket: Socket,
    /** The request's authority (Host / :authority, or the absolute URI's): what routing reads without building `headers`. */
    readonly authority: string = '',
  ) {}

  get headers(): IncomingHttpHeaders {
    return (this.headersCache ??= headersObject(this.rawHeaders));
  }

  get httpVersion(): string {
    return `${this.httpVersionMajor}.${this.httpVersionMinor}`;
  }

  /** node:http's old name for `socket`. */
  get connection(): Socket {
    return this.socket;
  }

  /**
   * Whether a header `lowerName` is present, read from the lines without building `headers` (which
   * the common path never needs). Lengths are compared first: most lines never get lower-cased.
   */
  has(lowerName: string): boolean {
    const raw = this.rawHeaders;
    const n = lowerName.length;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === n && (name === lowerName || name.toLowerCase() === lowerName)) return true;
    }
    return false;
  }

  /** The first value of header `lowerName`, read from the lines (as `has`); undefined when absent. */
  value(lowerName: string): string | undefined {
    const raw = this.rawHeaders;
    const n = lowerName.length;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === n && (name === lowerName || name.toLowerCase() === lowerName)) return raw[i + 1];
    }
    return undefined;
  }

  /** For the RequestDecider contract, typed on IncomingMessage (deciders read only the fields above). */
  asIncomingMessage(): IncomingMessage {
    return this as unknown as IncomingMessage;
  }
}

/** Whether `req` carries a header `lowerName`: from a RequestView's lines, else node's `headers`. */
export function hasHeader(req: IncomingMessage, lowerName: string): boolean {
  return req instanceof RequestView ? req.has(lowerName) : req.headers[lowerName] !== undefined;
}

/** The request's authority: the proxy's request views carry it (parsed already); another IncomingMessage its Host. */
export function authorityOf(req: IncomingMessage): string {
  const a = (req as { authority?: string }).authority;
  return a !== undefined && a !== '' ? a : req.headers.host ?? '';
}
