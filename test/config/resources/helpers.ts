// Turning operator-written YAML into validation results, for the validator tests.
import assert from 'node:assert/strict';
import { parseDocuments } from '../../../src/config/resources/documents.js';
import type { Rejection, ResourceWarning } from '../../../src/config/resources/types.js';
import { formatRejection, validateDocument, type ValidatedResource, type ValidationResult } from '../../../src/config/resources/validate.js';

export const FILE = 'etc/mesh/resources/test.yaml';

/** Validates the first document of a YAML text (the agent's namespace: `default`). */
export function validateYaml(yaml: string, defaultNamespace = 'default'): ValidationResult {
  const parsed = parseDocuments(FILE, yaml);
  assert.ok(parsed.ok, `the test YAML does not parse: ${parsed.ok ? '' : parsed.message}`);
  const [doc] = parsed.documents;
  assert.ok(doc, 'the test YAML has no document');
  return validateDocument(doc.value, { file: FILE, index: doc.index, defaultNamespace });
}

export function accept(yaml: string): ValidatedResource {
  const r = validateYaml(yaml);
  assert.ok(r.ok, `expected the resource to validate, got: ${r.ok ? '' : formatRejection(r.rejection)}`);
  return r.value;
}

/** Validates and returns the resource with its warnings as `field: message` lines. */
export function acceptWarned(yaml: string): { value: ValidatedResource; warnings: string[] } {
  const r = validateYaml(yaml);
  assert.ok(r.ok, `expected the resource to validate, got: ${r.ok ? '' : formatRejection(r.rejection)}`);
  return { value: r.value, warnings: r.warnings.map((w: ResourceWarning) => `${w.field}: ${w.message}`) };
}

export function reject(yaml: string): Rejection {
  const r = validateYaml(yaml);
  assert.ok(!r.ok, `expected a rejection, the resource validated: ${JSON.stringify(r.ok ? r.value.resource : undefined)}`);
  return r.rejection;
}

/** A table case: a name, the YAML, and the expected field and message. */
export interface RejectCase {
  readonly name: string;
  readonly yaml: string;
  readonly field: string;
  readonly message: RegExp;
}

export function assertRejections(cases: readonly RejectCase[]): void {
  for (const c of cases) {
    const r = reject(c.yaml);
    assert.equal(r.field, c.field, `${c.name}: field (${formatRejection(r)})`);
    assert.match(r.message, c.message, `${c.name}: message (${formatRejection(r)})`);
  }
}

/** Indents a YAML block under a key. */
export function indent(text: string, by = 2): string {
  return text.split('\n').map((l) => (l === '' ? l : ' '.repeat(by) + l)).join('\n');
}
