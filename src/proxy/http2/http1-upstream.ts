// The HTTP/1.1 leg of an HTTP/2 request, for destinations that do not speak HTTP/2 (found by
// upstream-sessions.ts): node:http's client with a keep-alive agent whose connections are opened the
// listener's way (plain, passthrough source, TPROXY, or TLS by the request's plan). The response is
// read by node:http's parser; what reaches the client is re-framed by HTTP/2, so no byte of the
// upstream's framing is relayed.
import { Agent, request, type ClientRequest, type OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { DirectionStats } from '../stats.js';
import { connectTls, type UpstreamTls } from '../tls/origination.js';
import { connectUpstream, trackUpstream, type UpstreamMode } from '../upstream.js';
import type { UpstreamTarget } from './upstream-sessions.js';

interface LegOptions {
  readonly host?: string | null | undefined;
  readonly port?: number | string | null | undefined;
  readonly localAddress?: string | undefined;
  readonly upstreamTls?: UpstreamTls | undefined;
}

class LegAgent extends Agent {
  constructor(private readonly mode: UpstreamMode, private readonly stats: DirectionStats) {
    super({ keepAlive: true, maxFreeSockets: 64, scheduling: 'lifo' });
  }

  override createConnection(options: LegOptions): Duplex {
    const dst = { address: options.host ?? '', port: Number(options.port) };
    const t = options.upstreamTls;
    const socket = t ? connectTls(dst, { ...t, alpn: t.mesh ? t.alpn : ['http/1.1'] }, this.stats) : connectUpstream(this.mode, dst, options.localAddress);
    return trackUpstream(socket, this.stats);
  }

  // Pooled per TLS plan too: a plaintext connection must never carry a request meant for TLS.
  override getName(options: LegOptions): string {
    return `${super.getName(options as Parameters<Agent['getName']>[0])}:${options.upstreamTls?.key ?? ''}`;
  }
}

export class Http1Upstream {
  private readonly agent: LegAgent;

  constructor(mode: UpstreamMode, stats: DirectionStats) {
    this.agent = new LegAgent(mode, stats);
  }

  request(t: UpstreamTarget, method: string, path: string, headers: OutgoingHttpHeaders): ClientRequest {
    return request({
      agent: this.agent, host: t.address, port: t.port, method, path, headers, setHost: false,
      ...(t.source !== undefined ? { localAddress: t.source } : {}),
      upstreamTls: t.tls,
    } as unknown as Parameters<typeof request>[0]);
  }

  /** Keep-alive connections not carrying a request close now. */
  closeIdle(): void {
    for (const list of Object.values(this.agent.freeSockets)) for (const socket of list ?? []) socket.destroy();
  }
}
