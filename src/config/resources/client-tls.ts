// Istio's ClientTLSSettings (DestinationRule `tls`, at every level), checked as Istio checks them
// plus two rules of ours (see README). Shared by the rule, its port-level settings and its subsets.
import type { ClientTls, ClientTlsMode } from './types.js';
import { isIpAddress } from './addresses.js';
import { checkFields, child, FieldError, obj, oneOf, optBool, optStr, optStrList, show, type Obj } from './fields.js';
import { checkHostPattern } from './names.js';

export const CLIENT_TLS_MODES: readonly ClientTlsMode[] = ['DISABLE', 'SIMPLE', 'MUTUAL', 'ISTIO_MUTUAL'];

/** The mesh's own certificates are used with ISTIO_MUTUAL: any of these would be silently unused. */
const FILE_FIELDS = ['clientCertificate', 'privateKey', 'caCertificates', 'credentialName'] as const;

function parseSni(raw: unknown, field: string): string | undefined {
  const sni = optStr(raw, field, { nonEmpty: true });
  if (sni === undefined) return undefined;
  const host = checkHostPattern(sni, field);
  if (host.startsWith('*') || isIpAddress(host)) throw new FieldError(field, `${show(sni)}: an SNI is a DNS name, not a pattern or an IP address`);
  return host;
}

export function parseClientTls(raw: unknown, field: string): ClientTls {
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
