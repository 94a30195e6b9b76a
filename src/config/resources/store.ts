// The set of resource files → one ResourceSnapshot, keeping the last good configuration in force:
// - a file that does not parse keeps every resource it had (the edit is rejected whole);
// - a resource that does not validate is rejected, and the version of it (same kind/namespace/name)
//   this file had before stays in force;
// - valid resources replace what the file had; a deleted file takes its resources with it;
// - the same kind/namespace/name twice: the first in file order (path, then document) wins, the
//   later one is rejected.
// Pure: the watcher feeds it file texts; it does no I/O.
import type {
  AuthorizationPolicy, DestinationRule, Gateway, PeerAuthentication, Rejection, RequestAuthentication, ResourceSnapshot,
  ResourceWarning, ServiceEntry, Sidecar, Telemetry, VirtualService, WorkloadEntry,
} from './types.js';
import { parseDocuments } from './documents.js';
import { isResourceKind, resourceKey, validateDocument, type ValidatedResource } from './validate.js';

interface Entry {
  readonly key: string;
  readonly value: ValidatedResource;
  /** Stable text of the resource, to tell a real change from a re-read of the same content. */
  readonly fingerprint: string;
  /** Fields accepted with a warning. */
  readonly warnings: readonly ResourceWarning[];
}

interface FileState {
  /** The text last seen (even when it did not parse), so an unchanged re-read is a no-op. */
  readonly text: string;
  /** The resources this file holds in force, in document order. */
  readonly entries: readonly Entry[];
}

/** Rejections are counted under the resource kind, or `unknown` when the document names none we know. */
export const UNKNOWN_KIND = 'unknown';

function fingerprint(value: ValidatedResource): string {
  // RegExps serialise as {}, but their source is beside them in the StringMatch.
  return JSON.stringify(value.resource);
}

interface Lists {
  gateways: Gateway[];
  virtualServices: VirtualService[];
  serviceEntries: ServiceEntry[];
  destinationRules: DestinationRule[];
  workloadEntries: WorkloadEntry[];
  requestAuthentications: RequestAuthentication[];
  authorizationPolicies: AuthorizationPolicy[];
  peerAuthentications: PeerAuthentication[];
  sidecars: Sidecar[];
  telemetries: Telemetry[];
}

function add(lists: Lists, v: ValidatedResource): void {
  switch (v.kind) {
    case 'Gateway': lists.gateways.push(v.resource); break;
    case 'VirtualService': lists.virtualServices.push(v.resource); break;
    case 'ServiceEntry': lists.serviceEntries.push(v.resource); break;
    case 'DestinationRule': lists.destinationRules.push(v.resource); break;
    case 'WorkloadEntry': lists.workloadEntries.push(v.resource); break;
    case 'RequestAuthentication': lists.requestAuthentications.push(v.resource); break;
    case 'AuthorizationPolicy': lists.authorizationPolicies.push(v.resource); break;
    case 'PeerAuthentication': lists.peerAuthentications.push(v.resource); break;
    case 'Sidecar': lists.sidecars.push(v.resource); break;
    case 'Telemetry': lists.telemetries.push(v.resource); break;
  }
}

const EMPTY: ResourceSnapshot = Object.freeze({
  version: 0,
  gateways: Object.freeze([]),
  virtualServices: Object.freeze([]),
  serviceEntries: Object.freeze([]),
  destinationRules: Object.freeze([]),
  workloadEntries: Object.freeze([]),
  requestAuthentications: Object.freeze([]),
  authorizationPolicies: Object.freeze([]),
  peerAuthentications: Object.freeze([]),
  sidecars: Object.freeze([]),
  telemetries: Object.freeze([]),
});

export class ResourceStore {
  readonly #defaultNamespace: string;
  readonly #files = new Map<string, FileState>();
  readonly #rejectCounts = new Map<string, number>();
  #snapshot: ResourceSnapshot = EMPTY;
  #fingerprints: readonly string[] = [];
  /** Duplicates already reported, so one that persists is logged once, not at every reload. */
  #duplicates = new Set<string>();
  readonly #onWarning: ((w: ResourceWarning) => void) | undefined;
  #warnings: readonly ResourceWarning[] = [];

  /** `onWarning`: called once for each warning of a resource as it is accepted (a new or changed resource). */
  constructor(opts: { defaultNamespace: string; onWarning?: (w: ResourceWarning) => void }) {
    this.#defaultNamespace = opts.defaultNamespace;
    this.#onWarning = opts.onWarning;
  }

  /** The warnings of the resources in force (for /config_dump). */
  warnings(): readonly ResourceWarning[] {
    return this.#warnings;
  }

  /** Rejections so far, per kind (`unknown` for documents of no known kind, or files that do not parse). */
  get rejectCounts(): ReadonlyMap<string, number> {
    return this.#rejectCounts;
  }

  /** The files the store holds, sorted as they are applied. */
  files(): string[] {
    return [...this.#files.keys()].sort(byPath);
  }

  snapshot(): ResourceSnapshot {
    return this.#snapshot;
  }

  /**
   * Applies a file's new text (`undefined`: the file was deleted) and returns this change's
   * rejections, already counted. The snapshot's version increases when the change took effect.
   */
  update(file: string, text: string | undefined): Rejection[] {
    const prev = this.#files.get(file);
    if (text === undefined) {
      if (prev === undefined) return [];
      this.#files.delete(file);
      return this.#count(this.#rebuild());
    }
    if (prev?.text === text) return [];
    const parsed = parseDocuments(file, text);
    if (!parsed.ok) {
      this.#files.set(file, { text, entries: prev?.entries ?? [] });
      const kept = prev?.entries.length ? `; the ${prev.entries.length} resource(s) it held before stay in force` : '';
      return this.#count([{ file, index: parsed.index, field: '', message: parsed.message + kept }]);
    }
    const rejections: Rejection[] = [];
    const results = parsed.documents.map((d) => validateDocument(d.value, { file, index: d.index, defaultNamespace: this.#defaultNamespace }));
    const validKeys = new Set(results.flatMap((r) => (r.ok ? [r.key] : [])));
    const entries: Entry[] = [];
    const carried = new Set<string>();
    const fresh: ResourceWarning[] = [];
    for (const r of results) {
      if (r.ok) {
        const entry = { key: r.key, value: r.value, fingerprint: fingerprint(r.value), warnings: r.warnings };
        // A resource re-read unchanged (another document of the file changed) is not warned about again.
        if (!prev?.entries.some((e) => e.key === entry.key && e.fingerprint === entry.fingerprint)) fresh.push(...r.warnings);
        entries.push(entry);
        continue;
      }
      const old = r.key === undefined || validKeys.has(r.key) || carried.has(r.key) ? undefined : prev?.entries.find((e) => e.key === r.key);
      if (old !== undefined) {
        carried.add(old.key);
        entries.push(old);
        rejections.push({ ...r.rejection, message: `${r.rejection.message} (the previous version stays in force)` });
      } else {
        rejections.push(r.rejection);
      }
    }
    this.#files.set(file, { text, entries });
    rejections.push(...this.#rebuild());
    for (const w of fresh) this.#onWarning?.(w);
    return this.#count(rejections);
  }

  /** Records a file that could not be read; what it held before stays in force. */
  readFailed(file: string, err: Error): Rejection {
    const [r] = this.#count([{ file, index: 0, field: '', message: `cannot be read: ${err.message}; what it held before stays in force` }]);
    return r!;
  }

  #count(rejections: Rejection[]): Rejection[] {
    for (const r of rejections) {
      const kind = isResourceKind(r.kind) ? r.kind : UNKNOWN_KIND;
      this.#rejectCounts.set(kind, (this.#rejectCounts.get(kind) ?? 0) + 1);
    }
    return rejections;
  }

  /** Recomputes the snapshot from the files; returns rejections for duplicates not reported before. */
  #rebuild(): Rejection[] {
    const winners = new Map<string, Entry>();
    const lists: Lists = {
      gateways: [], virtualServices: [], serviceEntries: [], destinationRules: [], workloadEntries: [], requestAuthentications: [],
      authorizationPolicies: [], peerAuthentications: [], sidecars: [], telemetries: [],
    };
    const warnings: ResourceWarning[] = [];
    const prints: string[] = [];
    const duplicates = new Set<string>();
    const fresh: Rejection[] = [];
    for (const file of this.files()) {
      for (const e of this.#files.get(file)!.entries) {
        const first = winners.get(e.key);
        if (first === undefined) {
          winners.set(e.key, e);
          add(lists, e.value);
          warnings.push(...e.warnings);
          prints.push(e.fingerprint);
          continue;
        }
        const { meta } = e.value.resource;
        const dupId = `${meta.origin.file}[${meta.origin.index}] ${e.key}`;
        duplicates.add(dupId);
        if (this.#duplicates.has(dupId)) continue;
        const at = first.value.resource.meta.origin;
        fresh.push({
          file: meta.origin.file, index: meta.origin.index, kind: meta.kind, name: meta.name, namespace: meta.namespace,
          field: 'metadata.name',
          message: `${resourceKey(meta.kind, meta.namespace, meta.name)} is already defined by ${at.file}[${at.index}]${otherGroup(first.value.resource.meta.apiVersion, meta.apiVersion)}, which comes first in file order and stays in force; this one is ignored`,
        });
      }
    }
    this.#duplicates = duplicates;
    this.#warnings = Object.freeze(warnings);
    const changed = prints.length !== this.#fingerprints.length || prints.some((p, i) => p !== this.#fingerprints[i]);
    if (changed) {
      this.#fingerprints = prints;
      this.#snapshot = Object.freeze({
        version: this.#snapshot.version + 1,
        gateways: Object.freeze(lists.gateways),
        virtualServices: Object.freeze(lists.virtualServices),
        serviceEntries: Object.freeze(lists.serviceEntries),
        destinationRules: Object.freeze(lists.destinationRules),
        workloadEntries: Object.freeze(lists.workloadEntries),
        requestAuthentications: Object.freeze(lists.requestAuthentications),
        authorizationPolicies: Object.freeze(lists.authorizationPolicies),
        peerAuthentications: Object.freeze(lists.peerAuthentications),
        sidecars: Object.freeze(lists.sidecars),
        telemetries: Object.freeze(lists.telemetries),
      });
    }
    return fresh;
  }
}

/** A duplicate under the other group (Istio's and the spec's) is the same resource: say so, it is easy to miss. */
function otherGroup(winner: string, loser: string): string {
  const group = (apiVersion: string): string => apiVersion.split('/')[0]!;
  return group(winner) === group(loser) ? '' : ` (as ${winner}; ${loser} names the same resource: the group does not make it another one)`;
}

/** Plain code-unit order: the same on every machine, whatever the locale. */
export function byPath(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
