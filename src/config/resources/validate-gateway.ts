// Gateway (networking.mesh.io): which ports the gateway workload listens on, with which protocol
// and certificates, and which hosts (from which namespaces' VirtualServices) each port serves.
import type { Gateway, GatewayServer, GatewayServerHost, GatewayTls, ResourceMeta, ServerProtocol } from './types.js';
import { isIpAddress } from './addresses.js';
import {
  checkFields, child, FieldError, IGNORE_WARNINGS, int, item, list, obj, oneOf, optBool, optObj, optStr, optStrList, show, str, stringMap,
  type Obj, type Warn,
} from './fields.js';
import { checkHostPattern, checkNamespace } from './names.js';
import { cipherProblem, rangeProblem, TLS_PROTOCOL_VERSIONS, versionProblem, type TlsProtocolVersion } from './tls-parameters.js';

export const SERVER_PROTOCOLS: readonly ServerProtocol[] = ['HTTP', 'HTTPS', 'HTTP2', 'GRPC', 'TCP', 'TLS', 'MONGO', 'MYSQL', 'REDIS'];
const TLS_MODES: readonly GatewayTls['mode'][] = ['PASSTHROUGH', 'SIMPLE', 'MUTUAL', 'AUTO_PASSTHROUGH', 'ISTIO_MUTUAL', 'OPTIONAL_MUTUAL'];

/** `host` → any namespace; `./host` → the Gateway's namespace; `ns/host` (or `*\/host`) as written. */
function parseServerHost(raw: unknown, field: string, gatewayNamespace: string): GatewayServerHost {
  const text = str(raw, field, { nonEmpty: true });
  const slash = text.indexOf('/');
  if (slash < 0) return { namespace: '*', host: checkHostPattern(text, field) };
  const ns = text.slice(0, slash);
  const host = checkHostPattern(text.slice(slash + 1), field);
  if (ns === '.') return { namespace: gatewayNamespace, host };
  if (ns === '*') return { namespace: '*', host };
  return { namespace: checkNamespace(ns, field), host };
}

/** Fields that check client certificates: a server that asks for none (SIMPLE) would ignore them. */
const CLIENT_CERTIFICATE_FIELDS = ['caCertificates', 'caCrl', 'subjectAltNames', 'verifyCertificateSpki', 'verifyCertificateHash'];

function optVersion(o: Obj, field: string, key: 'minProtocolVersion' | 'maxProtocolVersion'): TlsProtocolVersion | undefined {
  if (o[key] === undefined) return undefined;
  const f = child(field, key);
  const v = oneOf(o[key], f, TLS_PROTOCOL_VERSIONS, { fold: true });
  const problem = versionProblem(v);
  if (problem !== undefined) throw new FieldError(f, problem);
  return v;
}

function optCipherSuites(o: Obj, field: string): string[] | undefined {
  const f = child(field, 'cipherSuites');
  const names = optStrList(o['cipherSuites'], f, { nonEmptyItems: true });
  names?.forEach((name, i) => {
    const problem = cipherProblem(name);
    if (problem !== undefined) throw new FieldError(item(f, i), problem);
  });
  return names;
}

const HTTP_PROTOCOLS: readonly ServerProtocol[] = ['HTTP', 'HTTP2', 'GRPC'];

/** What only a server that terminates TLS reads: a PASSTHROUGH one relays the client's TLS untouched. */
const TERMINATION_FIELDS = ['serverCertificate', 'privateKey', 'caCertificates', 'credentialName', 'minProtocolVersion', 'maxProtocolVersion',
  'cipherSuites', 'subjectAltNames', 'verifyCertificateSpki', 'verifyCertificateHash', 'caCrl'];

function parseTls(raw: unknown, field: string, protocol: ServerProtocol, warn: Warn): GatewayTls | undefined {
  const o = optObj(raw, field);
  const terminates = protocol === 'HTTPS' || protocol === 'TLS';
  if (o === undefined) {
    if (terminates) throw new FieldError(field, `required for a ${protocol} server`);
    return undefined;
  }
  checkFields(o, field, {
    supported: ['httpsRedirect', 'mode', 'serverCertificate', 'privateKey', 'caCertificates', 'credentialName',
      'minProtocolVersion', 'maxProtocolVersion', 'cipherSuites'],
    // Only servers this gateway does not serve (MUTUAL, passthrough) may carry these: checked below.
    ignored: ['subjectAltNames', 'verifyCertificateSpki', 'verifyCertificateHash', 'caCrl'],
    // Several certificates per server (RSA + ECDSA): a server would present one only.
    unsupported: ['credentialNames', 'tlsCertificates'],
  });
  const httpsRedirect = optBool(o['httpsRedirect'], child(field, 'httpsRedirect')) ?? false;
  if (!terminates) {
    // A plain-text server can only ask for the redirect to HTTPS (Istio's rule).
    const extra = Object.keys(o).find((k) => k !== 'httpsRedirect');
    if (extra !== undefined) throw new FieldError(child(field, extra), `a ${protocol} server takes only tls.httpsRedirect`);
    if (httpsRedirect && !HTTP_PROTOCOLS.includes(protocol)) {
      warn(child(field, 'httpsRedirect'), `has no effect on a ${protocol} server: its connections are relayed as TCP, there is no HTTP request to redirect (Istio ignores it too)`);
    }
  }
  // Istio's enum default: a server that names no mode passes TLS through untouched.
  const mode = o['mode'] === undefined ? 'PASSTHROUGH' : oneOf(o['mode'], child(field, 'mode'), TLS_MODES, { fold: true });
  if (terminates && mode === 'PASSTHROUGH') {
    if (httpsRedirect) warn(child(field, 'httpsRedirect'), 'has no effect on a PASSTHROUGH server: its TLS is relayed, there is no HTTP request to redirect (Istio ignores it too)');
    for (const k of TERMINATION_FIELDS) {
      if (o[k] !== undefined) warn(child(field, k), 'has no effect with mode PASSTHROUGH: the client\'s TLS is relayed to the destination untouched, never terminated here (Istio ignores it too)');
    }
  }
  if (terminates && mode === 'AUTO_PASSTHROUGH') {
    // Istio's east-west mode: an SNI that spells a cluster name (outbound_.PORT_.SUBSET_.HOST) picks that cluster.
    throw new FieldError(child(field, 'mode'), 'AUTO_PASSTHROUGH is not supported yet (its SNI-named clusters are an east-west gateway\'s); '
      + 'use PASSTHROUGH with VirtualService tls routes, which this gateway serves');
  }
  const serverCertificate = optStr(o['serverCertificate'], child(field, 'serverCertificate'), { nonEmpty: true });
  const privateKey = optStr(o['privateKey'], child(field, 'privateKey'), { nonEmpty: true });
  const caCertificates = optStr(o['caCertificates'], child(field, 'caCertificates'), { nonEmpty: true });
  const credentialName = optStr(o['credentialName'], child(field, 'credentialName'), { nonEmpty: true });
  if (terminates && (mode === 'SIMPLE' || mode === 'MUTUAL' || mode === 'OPTIONAL_MUTUAL') && credentialName === undefined) {
    if (serverCertificate === undefined) throw new FieldError(child(field, 'serverCertificate'), `required with mode ${mode} (or credentialName)`);
    if (privateKey === undefined) throw new FieldError(child(field, 'privateKey'), `required with mode ${mode} (or credentialName)`);
    if (mode !== 'SIMPLE' && caCertificates === undefined) throw new FieldError(child(field, 'caCertificates'), `required with mode ${mode} (or credentialName)`);
  }
  if (credentialName !== undefined && (serverCertificate !== undefined || privateKey !== undefined)) {
    // Istio would use the credential and ignore the files without a word.
    throw new FieldError(child(field, 'credentialName'), 'give either credentialName or serverCertificate and privateKey, not both');
  }
  let usedCaCertificates = caCertificates;
  if (mode === 'SIMPLE' && caCertificates !== undefined) {
    // Istio accepts it and loads nothing from it (a SIMPLE server asks for no client certificate).
    warn(child(field, 'caCertificates'), 'has no effect with mode SIMPLE, as in Istio: the server asks for no client certificate, so nothing is verified against it');
    usedCaCertificates = undefined;
  }
  if (mode === 'SIMPLE') {
    const clientField = CLIENT_CERTIFICATE_FIELDS.find((k) => k !== 'caCertificates' && o[k] !== undefined);
    if (clientField !== undefined) {
      throw new FieldError(child(field, clientField), 'checks client certificates, which mode SIMPLE never asks for '
        + '(MUTUAL and OPTIONAL_MUTUAL servers are not served by this gateway)');
    }
  }
  const minProtocolVersion = optVersion(o, field, 'minProtocolVersion');
  const maxProtocolVersion = optVersion(o, field, 'maxProtocolVersion');
  const range = rangeProblem(minProtocolVersion, maxProtocolVersion);
  if (range !== undefined) throw new FieldError(child(field, 'maxProtocolVersion'), range);
  const cipherSuites = optCipherSuites(o, field);
  return {
    mode,
    httpsRedirect,
    ...(serverCertificate !== undefined ? { serverCertificate } : {}),
    ...(privateKey !== undefined ? { privateKey } : {}),
    ...(usedCaCertificates !== undefined ? { caCertificates: usedCaCertificates } : {}),
    ...(credentialName !== undefined ? { credentialName } : {}),
    ...(minProtocolVersion !== undefined ? { minProtocolVersion } : {}),
    ...(maxProtocolVersion !== undefined ? { maxProtocolVersion } : {}),
    ...(cipherSuites !== undefined ? { cipherSuites } : {}),
  };
}

/** `bind`: the listener's address (Istio's `x.x.x.x`; an IPv6 address too); Unix domain sockets are not served yet. */
function parseBind(raw: unknown, field: string): string | undefined {
  const text = optStr(raw, field);
  if (text === undefined || text === '') return undefined;
  if (text.startsWith('unix://')) {
    throw new FieldError(field, `is not supported yet for a Unix domain socket (${show(text)}): this gateway listens on IP addresses only`);
  }
  if (!isIpAddress(text)) throw new FieldError(field, `${show(text)} is not an IP address (the address the server's listener binds)`);
  return text.toLowerCase();
}

function parseServer(raw: unknown, field: string, gatewayNamespace: string, warn: Warn): GatewayServer {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['port', 'hosts', 'tls', 'name', 'bind'],
    istioIgnores: { defaultEndpoint: 'has no effect: Istio does not implement it (its API says "NOT IMPLEMENTED"); requests go where the VirtualServices bound to the Gateway send them' },
  }, warn);
  const portField = child(field, 'port');
  const p = obj(o['port'], portField);
  checkFields(p, portField, {
    supported: ['number', 'protocol', 'name'],
    istioIgnores: { targetPort: 'has no effect on a Gateway, as in Istio: the gateway listens on port.number itself' },
  }, warn);
  const protocol = oneOf(p['protocol'], child(portField, 'protocol'), SERVER_PROTOCOLS, { fold: true });
  const port = {
    number: int(p['number'], child(portField, 'number'), 1, 65535),
    name: optStr(p['name'], child(portField, 'name')) ?? '',
    protocol,
  };
  const hostsField = child(field, 'hosts');
  const hosts = list(o['hosts'], hostsField, { nonEmpty: true }).map((h, i) => parseServerHost(h, item(hostsField, i), gatewayNamespace));
  const tls = parseTls(o['tls'], child(field, 'tls'), protocol, warn);
  const name = optStr(o['name'], child(field, 'name'));
  const bind = parseBind(o['bind'], child(field, 'bind'));
  return { port, hosts, ...(tls !== undefined ? { tls } : {}), ...(name !== undefined ? { name } : {}), ...(bind !== undefined ? { bind } : {}) };
}

export function validateGateway(spec: unknown, meta: ResourceMeta, warn: Warn = IGNORE_WARNINGS): Gateway {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', { supported: ['selector', 'servers'] });
  if (s['selector'] === undefined) throw new FieldError('spec.selector', 'required (a mapping of labels; {} selects every gateway workload)');
  const selector = stringMap(s['selector'], 'spec.selector');
  const servers = list(s['servers'], 'spec.servers', { nonEmpty: true }).map((v, i) => parseServer(v, item('spec.servers', i), meta.namespace, warn));
  return { meta, selector, servers };
}
