// PeerAuthentication (security.mesh.io): whether this workload's inbound connections must, may or
// must not carry mesh mTLS. Which policy wins for a port is src/security/mtls/peer-authentication.ts.
import type { PeerAuthentication, PeerAuthenticationMode, ResourceMeta } from './types.js';
import { checkFields, child, FieldError, item, obj, oneOf, optObj, show } from './fields.js';
import { parseWorkloadSelector } from './selector.js';

export const PEER_AUTHENTICATION_MODES: readonly PeerAuthenticationMode[] = ['UNSET', 'DISABLE', 'PERMISSIVE', 'STRICT'];

/** `{mode: X}`; absent or `{}`: UNSET (inherit). */
function parseMtls(raw: unknown, field: string): PeerAuthenticationMode {
  const o = optObj(raw, field);
  if (o === undefined) return 'UNSET';
  checkFields(o, field, { supported: ['mode'] });
  return o['mode'] === undefined ? 'UNSET' : oneOf(o['mode'], child(field, 'mode'), PEER_AUTHENTICATION_MODES);
}

/** A YAML map key is a string: `8080` is a port, `08080`, `http` or `0` are not. */
function parsePortKey(key: string, field: string): number {
  const n = /^[1-9][0-9]{0,4}$/.test(key) ? Number(key) : NaN;
  if (!(n >= 1 && n <= 65535)) throw new FieldError(field, `${show(key)} is not a port number (1 to 65535)`);
  return n;
}

export function validatePeerAuthentication(spec: unknown, meta: ResourceMeta): PeerAuthentication {
  // `spec: {}` (or none) is a valid policy: UNSET everywhere.
  const s = spec === undefined || spec === null ? {} : obj(spec, 'spec');
  checkFields(s, 'spec', { supported: ['selector', 'mtls', 'portLevelMtls'] });
  const selector = parseWorkloadSelector(s['selector'], 'spec.selector');
  const mode = parseMtls(s['mtls'], 'spec.mtls');
  const portLevelMtls: { port: number; mode: PeerAuthenticationMode }[] = [];
  const raw = optObj(s['portLevelMtls'], 'spec.portLevelMtls');
  if (raw !== undefined && Object.keys(raw).length > 0) {
    // Istio refuses port-level modes on namespace- and mesh-wide policies: ports belong to workloads.
    if (selector === undefined || Object.keys(selector).length === 0) {
      throw new FieldError('spec.portLevelMtls', 'needs a selector with matchLabels (port-level modes are only allowed on a '
        + 'policy that selects workloads, not on a namespace-wide or mesh-wide one)');
    }
    for (const [key, value] of Object.entries(raw)) {
      const at = item('spec.portLevelMtls', key);
      portLevelMtls.push({ port: parsePortKey(key, at), mode: parseMtls(value ?? {}, at) });
    }
  }
  return { meta, ...(selector !== undefined ? { selector } : {}), mode, portLevelMtls };
}
