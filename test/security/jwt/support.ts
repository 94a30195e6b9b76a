// Test support for the JWT tests: signing keys made with jose, a JWKS server on 127.0.0.1 port 0
// (HTTP, or HTTPS with test/fixtures/localhost.*), a rule with defaults, an adjustable clock.
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import type { JwtRule } from '../../../src/config/resources/types.js';
import { repoRoot } from '../../helpers/repo.js';

export interface SigningKey {
  readonly alg: 'RS256' | 'ES256';
  readonly kid: string;
  readonly privateKey: CryptoKey;
  /** The public JWK as a JWKS lists it. */
  readonly jwk: JWK;
}

export async function makeKey(alg: 'RS256' | 'ES256', kid: string): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { alg, kid, privateKey, jwk };
}

export function jwksOf(...keys: SigningKey[]): string {
  return JSON.stringify({ keys: keys.map((k) => k.jwk) });
}

/** Signs `payload` with `key`; `header` overrides the protected header (e.g. another kid). */
export async function sign(key: SigningKey, payload: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...header }).sign(key.privateKey);
}

export function b64(v: unknown): string {
  return Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
}

/** A rule with Istio's defaults (default token locations, token not forwarded). */
export function rule(over: Partial<JwtRule> & { issuer: string }): JwtRule {
  return {
    audiences: [],
    fromHeaders: [],
    fromParams: [],
    fromCookies: [],
    forwardOriginalToken: false,
    outputClaimToHeaders: [],
    ...over,
  };
}

/** A clock tests move by hand. */
export class Clock {
  constructor(public ms = Date.now()) {}
  readonly now = (): number => this.ms;
  get seconds(): number {
    return Math.floor(this.ms / 1000);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** A JWKS server: serves `body` at /jwks (or the status set, or a redirect), counts requests, can be stopped. */
export class JwksServer {
  body = '{"keys":[]}';
  status = 200;
  /** Answer every request with this redirect. */
  redirect: { readonly status: number; readonly location: string } | undefined;
  /** Never answer (for time-outs). */
  hang = false;
  /** The OpenID configuration document served at /.well-known/openid-configuration (default: jwks_uri = this server's /jwks). */
  openid: unknown;
  requests = 0;
  private server: http.Server | undefined;
  private port = 0;

  constructor(private readonly tls = false) {}

  get url(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}/jwks`;
  }

  /** The server as an issuer: discovery asks it for /.well-known/openid-configuration. */
  get issuer(): string {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** Listens on `port` (default: port 0 the first time, the same port when restarted). */
  async start(port = this.port): Promise<this> {
    const handler: http.RequestListener = (req, res) => {
      this.requests += 1;
      if (this.hang) return;
      if (this.redirect !== undefined) {
        res.writeHead(this.redirect.status, { location: this.redirect.location }).end();
        return;
      }
      if (req.url === '/.well-known/openid-configuration') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(this.openid ?? { issuer: this.issuer, jwks_uri: this.url }));
        return;
      }
      res.writeHead(this.status, { 'content-type': 'application/json' }).end(this.body);
    };
    this.server = this.tls
      ? https.createServer({
        cert: readFileSync(join(repoRoot, 'test/fixtures/localhost.crt')),
        key: readFileSync(join(repoRoot, 'test/fixtures/localhost.key')),
      }, handler)
      : http.createServer(handler);
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Down: the port refuses connections (keep-alive connections are cut too). */
  async stop(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    this.server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** A port on which nothing listens. */
export async function deadUrl(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}/jwks`;
}

export function fixture(name: string): string {
  return readFileSync(join(repoRoot, 'test/fixtures/jwt', name), 'utf8').trim();
}

/** Collects log lines. */
export function logSink(): { lines: string[]; log: (level: string, msg: string) => void } {
  const lines: string[] = [];
  return { lines, log: (level, msg) => lines.push(`${level}: ${msg}`) };
}
