// TLS termination for one HTTPS port of the gateway, as Envoy does it: the ClientHello is read
// first (client-hello.ts, Envoy's TLS inspector), its server name chooses the Gateway server (exact,
// longest `*.suffix`, then a `*` server; no SNI: only a `*` server), and the connection is refused
// before any TLS work when none fits. The chosen server's own context (certificate, versions,
// ciphers) makes the TLS socket, since OpenSSL fixes versions and ciphers when a connection is
// made. Beyond Node's defaults: one deadline from accept to the end of the handshake (a client that
// sends nothing or half a ClientHello holds nothing past it), a connection whose client
// renegotiates is closed (BoringSSL, under Envoy, never allows it), and every way this can end is
// counted.
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import type { SecureContext, TLSSocket } from 'node:tls'; // the module: on first use (process.getBuiltinModule)
import { scope } from '../log/logger.js';
import type { DirectionStats } from '../proxy/stats.js';
import { adoptTlsReads } from '../proxy/read-buffers.js';
import { MAX_HELLO_CHUNKS, readClientHello } from '../proxy/tls/client-hello.js';
import { serverForName, sniIndex, type TlsServerPlan } from './listener-plan.js';
import { complianceOverride, compliantTls } from '../security/compliance.js';
import type { DomainIndex } from '../routing/hosts.js';

const log = scope('default');

const NO_BYTES = Buffer.alloc(0);

export interface TlsTerminationOptions {
  readonly port: number;
  readonly servers: readonly TlsServerPlan[];
  readonly stats: DirectionStats;
  /** From accept to the end of the handshake (MESH_TLS_HANDSHAKE_TIMEOUT); 0: no deadline. */
  readonly handshakeTimeoutMs: number;
  /** A connection whose handshake completed, with the server (serverKey) its SNI chose. */
  readonly onSecure: (socket: TLSSocket, server: string) => void;
  /** COMPLIANCE_POLICY, laid over each server's versions and suites (security/compliance.ts). */
  readonly compliancePolicy?: string;
}

interface LoadedServer {
  readonly hosts: readonly string[];
  readonly server: string;
  readonly context: SecureContext;
}

/** Every server whose certificate loads; one that does not is logged and its names are refused. */
function loadServers(port: number, servers: readonly TlsServerPlan[], policy: string): LoadedServer[] {
  return servers.flatMap((s) => {
    const overridden = complianceOverride(policy, s.settings);
    if (overridden !== undefined) log.warn(`gateway: port ${port}: server ${s.server} (${s.hosts.join(', ')}): ${overridden}`);
    try {
      const context = process.getBuiltinModule('node:tls').createSecureContext(
        compliantTls(policy, { cert: readFileSync(s.cert), key: readFileSync(s.key), ...s.settings }));
      return [{ hosts: s.hosts, server: s.server, context }];
    } catch (err) {
      log.error(`gateway: port ${port}: server ${s.server} (${s.hosts.join(', ')}) is not served: `
        + `cannot load ${s.cert} / ${s.key}: ${(err as Error).message}`);
      return [];
    }
  });
}

export class TlsTermination {
  private readonly index: DomainIndex<LoadedServer>;

  constructor(private readonly o: TlsTerminationOptions) {
    this.index = sniIndex(loadServers(o.port, o.servers, o.compliancePolicy ?? ''));
  }

  /** Takes an accepted TCP connection (already counted and admitted) through to a TLS session. */
  accept(raw: Socket): void {
    let tls: TLSSocket | undefined;
    const deadline = this.o.handshakeTimeoutMs > 0 ? setTimeout(() => this.timedOut(raw, tls), this.o.handshakeTimeoutMs).unref() : undefined;
    let head: Buffer = NO_BYTES;
    let chunks = 0;
    raw.once('close', () => clearTimeout(deadline));
    const stop = (): void => {
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.pause();
    };
    // A client that closes before its ClientHello (a port check): nothing to count.
    const onEnd = (): void => {
      stop();
      raw.destroy();
    };
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const hello = readClientHello(head);
      if (hello.kind === 'incomplete' && ++chunks < MAX_HELLO_CHUNKS) return;
      stop();
      if (hello.kind !== 'hello') {
        this.failed(raw, hello.kind === 'invalid' ? hello.reason : 'a ClientHello in too many pieces');
        return;
      }
      const chosen = serverForName(this.index, hello.serverName);
      if (!chosen) {
        this.o.stats.tlsNoServerMatch++;
        log.debug(`gateway: port ${this.o.port}: no server for SNI ${hello.serverName === undefined ? '(none)' : JSON.stringify(hello.serverName)}; connection refused`);
        raw.destroy();
        return;
      }
      raw.unshift(head); // the TLS socket reads what is buffered first
      tls = this.handshake(raw, chosen, deadline);
    };
    raw.on('data', onData);
    raw.on('end', onEnd);
  }

  /**
   * The TLS socket, made here rather than by a tls.Server: the server's context is chosen per
   * connection, and the deadline and the counts are this connection's.
   */
  private handshake(raw: Socket, chosen: LoadedServer, deadline: NodeJS.Timeout | undefined): TLSSocket {
    const stats = this.o.stats;
    // ALPN as Istio's gateways offer it on HTTPS servers: HTTP/2 first, HTTP/1.1 for the rest.
    const tls = new (process.getBuiltinModule('node:tls').TLSSocket)(raw, { isServer: true, secureContext: chosen.context, ALPNProtocols: ['h2', 'http/1.1'] });
    adoptTlsReads(tls);
    // The TLS socket's end is the connection's: when it closes (a reset the HTTP/2 session saw
    // first, a refusal), the TCP socket under it closes too, and with it the connection's count.
    tls.once('close', () => raw.destroy());
    let handshakes = 0;
    tls.on('error', (err: NodeJS.ErrnoException) => {
      if (handshakes === 0) this.failed(raw, err.message, tls);
      // After the handshake the HTTP connection handles the error; a TLS one is counted as such.
      else if (err.code?.startsWith('ERR_SSL_')) stats.tlsErrors++;
    });
    tls.on('secure', () => {
      if (++handshakes > 1) {
        // The client renegotiated (TLS 1.2). Node would allow 3 per 10 minutes, each a handshake's
        // worth of CPU, and reports them only to a tls.Server's sockets; Envoy's BoringSSL allows
        // none. The connection closes at the first, so a client gets one more handshake at most.
        stats.tlsRenegotiations++;
        this.failed(raw, 'the client renegotiated', tls);
        return;
      }
      clearTimeout(deadline);
      // OpenSSL read the ClientHello too: the name it saw must choose the same server.
      const name = typeof tls.servername === 'string' ? tls.servername : undefined;
      if (serverForName(this.index, name) !== chosen) {
        this.failed(raw, `OpenSSL saw the server name ${JSON.stringify(name)}, not the one that chose ${chosen.server}`, tls);
        return;
      }
      stats.tlsHandshakes++;
      this.o.onSecure(tls, chosen.server);
    });
    return tls;
  }

  private timedOut(raw: Socket, tls: TLSSocket | undefined): void {
    if (raw.destroyed) return;
    this.o.stats.tlsHandshakeTimeouts++;
    this.failed(raw, `handshake not complete within ${this.o.handshakeTimeoutMs}ms`, tls);
  }

  /** A TLS connection that ends for a TLS reason: counted, logged at debug, closed. */
  private failed(raw: Socket, reason: string, tls?: TLSSocket): void {
    if (raw.destroyed && (!tls || tls.destroyed)) return;
    this.o.stats.tlsErrors++;
    this.o.stats.cxErrors++;
    log.debug(`gateway: port ${this.o.port}: TLS connection from ${raw.remoteAddress ?? '?'} closed: ${reason}`);
    tls?.destroy();
    raw.destroy();
  }
}
