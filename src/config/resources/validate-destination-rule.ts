// DestinationRule (networking.mesh.io): how connections from this workload to a host are originated.
// Only the TLS settings change what this agent does (which rule applies to a connection, and what
// plan it yields: src/security/mtls/destination-tls.ts); load balancing, pools and outlier
// detection tune machinery this agent does not have and are accepted and ignored.
import type { ClientTls, ClientTlsMode, DestinationRule, DestinationRulePortSetting, ResourceMeta } from './types.js';
import { isIpAddress } from './addresses.js';
import {
  checkFields, child, FieldError, int, item, obj, oneOf, optBool, optList, optObj, optStr, optStrList, show, str, stringMap,
  type FieldSet, type Obj,
} from './fields.js';
import { checkHostPattern, checkNamespace } from './names.js';
import { parseWorkloadSelector } from './selector.js';

export const CLIENT_TLS_MODES: readonly ClientTlsMode[] = ['DISABLE', 'SIMPLE', 'MUTUAL', 'ISTIO_MUTUAL'];

/** The mesh's own certificates are used with ISTIO_MUTUAL: any of these would be silently unused. */
const FILE_FIELDS = ['clientCertificate', 'privateKey', 'caCertificates', 'credentialName'] as const;

const TRAFFIC_POLICY_FIELDS: FieldSet = {
  supported: ['tls', 'portLevelSettings'],
  // Tuning of a load balancer, pool and ejection this agent does not have.
  ignored: ['loadBalancer', 'connectionPool', 'outlierDetection', 'retryBudget'],
  // Each changes what goes on the wire (a tunnel through another proxy, a PROXY header first):
  // connecting without them would reach the host by another path or confuse it.
  unsupported: ['tunnel', 'proxyProtocol'],
};

function parseSni(raw: unknown, field: string): string | undefined {
  const sni = optStr(raw, field, { nonEmpty: true });
  if (sni === undefined) return undefined;
  const host = checkHostPattern(sni, field);
  if (host.startsWith('*') || isIpAddress(host)) throw new FieldError(field, `${show(sni)}: an SNI is a DNS name, not a pattern or an IP address`);
  return host;
}

function parseClientTls(raw: unknown, field: string): ClientTls {
  const o = obj(raw, field);
  checkFields(o, field, {
    supported: ['mode', 'clientCertificate', 'privateKey', 'caCertificates', 'credentialName', 'subjectAltNames', 'sni', 'insecureSkipVerify'],
    // A revocation list this agent would not check: revoked servers would be trusted.
    unsupported: ['caCrl'],
  });
  const at = (k: string): string => child(field, k);
  // Istio's enum default (its zero value).
  const mode = o['mode'] === undefined ? 'DISABLE' : oneOf(o['mode'], at('mode'), CLIENT_TLS_MODES);
  const clientCertificate = optStr(o['clientCertificate'], at('clientCertificate'), { nonEmpty: true });
  const privateKey = optStr(o['privateKey'], at('privateKey'), { nonEmpty: true });
  const caCertificates = optStr(o['caCertificates'], at('caCertificates'), { nonEmpty: true });
  const credentialName = optStr(o['credentialName'], at('credentialName'), { nonEmpty: true });
  const subjectAltNames = optStrList(o['subjectAltNames'], at('subjectAltNames'), { nonEmptyItems: true }) ?? [];
  const sni = parseSni(o['sni'], at('sni'));
  const insecureSkipVerify = optBool(o['insecureSkipVerify'], at('insecureSkipVerify')) ?? false;
  checkModeFields(o, field, mode, { credentialName, clientCertificate, privateKey, insecureSkipVerify });
  return {
    mode,
    ...(clientCertificate !== undefined ? { clientCertificate } : {}),
    ...(privateKey !== undefined ? { privateKey } : {}),
    ...(caCertificates !== undefined ? { caCertificates } : {}),
    ...(credentialName !== undefined ? { credentialName } : {}),
    subjectAltNames,
    ...(sni !== undefined ? { sni } : {}),
    insecureSkipVerify,
  };
}

/** The combinations Istio refuses, and those it would quietly not use. */
function checkModeFields(o: Obj, field: string, mode: ClientTlsMode,
  v: { credentialName?: string | undefined; clientCertificate?: string | undefined; privateKey?: string | undefined; insecureSkipVerify: boolean }): void {
  const at = (k: string): string => child(field, k);
  if (mode === 'ISTIO_MUTUAL') {
    const extra = FILE_FIELDS.find((k) => o[k] !== undefined);
    if (extra !== undefined) throw new FieldError(at(extra), 'must be empty with mode ISTIO_MUTUAL (it uses the mesh certificates of this workload)');
    if (v.insecureSkipVerify) throw new FieldError(at('insecureSkipVerify'), 'cannot be used with mode ISTIO_MUTUAL (the peer\'s mesh certificate is always verified)');
    return;
  }
  if (mode !== 'SIMPLE' && mode !== 'MUTUAL') return;
  if (v.credentialName !== undefined) {
    const extra = (['clientCertificate', 'privateKey', 'caCertificates'] as const).find((k) => o[k] !== undefined);
    if (extra !== undefined) throw new FieldError(at(extra), 'give either credentialName or certificate files, not both');
  }
  if (mode === 'MUTUAL' && v.credentialName === undefined) {
    if (v.clientCertificate === undefined) throw new FieldError(at('clientCertificate'), 'required with mode MUTUAL (or credentialName)');
    if (v.privateKey === undefined) throw new FieldError(at('privateKey'), 'required with mode MUTUAL (or credentialName)');
  }
  if (mode === 'SIMPLE') {
    const client = (['clientCertificate', 'privateKey'] as const).find((k) => o[k] !== undefined);
    if (client !== undefined) throw new FieldError(at(client), 'mode SIMPLE presents no client certificate; use MUTUAL to present one');
  }
  if (v.insecureSkipVerify) {
    // What verifies the server contradicts skipping its verification (Istio refuses these too).
    const verifying = mode === 'SIMPLE' ? ['caCertificates', 'credentialName', 'subjectAltNames'] : ['caCertificates', 'subjectAltNames'];
    const extra = verifying.find((k) => o[k] !== undefined);
    if (extra !== undefined) throw new FieldError(at(extra), 'verifies the server, which insecureSkipVerify: true turns off; give one or the other');
  }
}

function parsePortSettings(raw: unknown, field: string): DestinationRulePortSetting[] {
  const seen = new Set<number>();
  return optList(raw, field).map((p, i) => {
    const at = item(field, i);
    const o = obj(p, at);
    checkFields(o, at, { supported: ['port', 'tls'], ignored: ['loadBalancer', 'connectionPool', 'outlierDetection'] });
    const portField = child(at, 'port');
    const po = obj(o['port'], portField);
    checkFields(po, portField, { supported: ['number'] });
    const port = int(po['number'], child(portField, 'number'), 1, 65535);
    // Two settings for one port: which one applies would be a guess.
    if (seen.has(port)) throw new FieldError(child(portField, 'number'), `port ${port} already has a setting earlier in ${field}`);
    seen.add(port);
    const tls = o['tls'] === undefined ? undefined : parseClientTls(o['tls'], child(at, 'tls'));
    return { port, ...(tls !== undefined ? { tls } : {}) };
  });
}

function parseTrafficPolicy(raw: unknown, field: string): { tls?: ClientTls; portLevelTls: DestinationRulePortSetting[] } {
  const o = optObj(raw, field);
  if (o === undefined) return { portLevelTls: [] };
  checkFields(o, field, TRAFFIC_POLICY_FIELDS);
  const tls = o['tls'] === undefined ? undefined : parseClientTls(o['tls'], child(field, 'tls'));
  const portLevelTls = parsePortSettings(o['portLevelSettings'], child(field, 'portLevelSettings')).filter((p) => p.tls !== undefined);
  return { ...(tls !== undefined ? { tls } : {}), portLevelTls };
}

/** A subset's policy is checked like the rule's, but its TLS needs subset routing: refused, naming the field. */
function parseSubset(raw: unknown, field: string): DestinationRule['subsets'][number] {
  const o = obj(raw, field);
  checkFields(o, field, { supported: ['name', 'labels', 'trafficPolicy'] });
  const name = checkNamespace(str(o['name'], child(field, 'name'), { nonEmpty: true }), child(field, 'name'));
  const labels = o['labels'] === undefined ? {} : stringMap(o['labels'], child(field, 'labels'));
  const policyField = child(field, 'trafficPolicy');
  const policy = optObj(o['trafficPolicy'], policyField);
  if (policy !== undefined) {
    const tlsField = policy['tls'] !== undefined ? child(policyField, 'tls')
      : optList(policy['portLevelSettings'], child(policyField, 'portLevelSettings'))
        .map((p, i) => (p !== null && typeof p === 'object' && (p as Obj)['tls'] !== undefined ? `${item(child(policyField, 'portLevelSettings'), i)}.tls` : undefined))
        .find((f) => f !== undefined);
    if (tlsField !== undefined) {
      throw new FieldError(tlsField, 'is not supported by this agent: a subset\'s own TLS settings apply only to traffic routed to '
        + 'the subset, and this agent does not route by subset (put tls on the rule\'s trafficPolicy)');
    }
    parseTrafficPolicy(policy, policyField);
  }
  return { name, labels };
}

function parseExportTo(raw: unknown, field: string, namespace: string): string[] {
  const values = optStrList(raw, field, { nonEmptyItems: true }) ?? [];
  if (values.length === 0) return ['*'];
  const out = values.map((v, i) => (v === '.' ? namespace : v === '*' ? '*' : checkNamespace(v, item(field, i))));
  if (out.includes('*') && out.length > 1) throw new FieldError(field, `${show(values)}: "*" already exports to every namespace; give it alone`);
  return [...new Set(out)];
}

export function validateDestinationRule(spec: unknown, meta: ResourceMeta): DestinationRule {
  const s = obj(spec, 'spec');
  checkFields(s, 'spec', { supported: ['host', 'trafficPolicy', 'subsets', 'exportTo', 'workloadSelector'] });
  const host = checkHostPattern(str(s['host'], 'spec.host', { nonEmpty: true }), 'spec.host');
  const { tls, portLevelTls } = parseTrafficPolicy(s['trafficPolicy'], 'spec.trafficPolicy');
  const names = new Set<string>();
  const subsets = optList(s['subsets'], 'spec.subsets').map((raw, i) => {
    const subset = parseSubset(raw, item('spec.subsets', i));
    if (names.has(subset.name)) throw new FieldError(`${item('spec.subsets', i)}.name`, `${show(subset.name)} is already the name of an earlier subset`);
    names.add(subset.name);
    return subset;
  });
  const exportTo = parseExportTo(s['exportTo'], 'spec.exportTo', meta.namespace);
  const workloadSelector = parseWorkloadSelector(s['workloadSelector'], 'spec.workloadSelector');
  return {
    meta, host, ...(tls !== undefined ? { tls } : {}), portLevelTls, subsets, exportTo,
    ...(workloadSelector !== undefined ? { workloadSelector } : {}),
  };
}
