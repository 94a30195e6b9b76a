import assert from 'node:assert/strict';
import { it } from 'node:test';
import { isResourceFile, parseDocuments } from '../../../src/config/resources/documents.js';

it('splits multi-document YAML, skipping empty documents but keeping their numbers', () => {
  const r = parseDocuments('a.yaml', '# leading comment\na: 1\n---\n---\n# only a comment\n---\nb: 2\n---\n');
  assert.ok(r.ok);
  assert.deepEqual(r.documents, [{ index: 0, value: { a: 1 } }, { index: 3, value: { b: 2 } }]);
  const lead = parseDocuments('a.yml', '---\na: 1\n');
  assert.ok(lead.ok);
  assert.deepEqual(lead.documents, [{ index: 0, value: { a: 1 } }]);
  const empty = parseDocuments('a.yaml', '');
  assert.ok(empty.ok && empty.documents.length === 0);
});

it('reads JSON: one document, or a list of documents', () => {
  const one = parseDocuments('a.json', '{"kind": "Gateway"}');
  assert.ok(one.ok);
  assert.deepEqual(one.documents, [{ index: 0, value: { kind: 'Gateway' } }]);
  const many = parseDocuments('a.JSON', '[{"a": 1}, null, {"b": 2}]');
  assert.ok(many.ok);
  assert.deepEqual(many.documents, [{ index: 0, value: { a: 1 } }, { index: 2, value: { b: 2 } }]);
});

it('reports a syntax error as one line with the document index and position', () => {
  const cases: [string, string, number, RegExp][] = [
    ['a.yaml', 'a: 1\n---\nb: [\n', 1, /^not valid YAML: .*line \d+, column \d+$/],
    ['a.yaml', 'a: 1\na: 2\n', 0, /^not valid YAML: Map keys must be unique at line 2, column 1$/],
    ['a.yaml', 'a: *missing\n', 0, /^not valid YAML: .*alias/i],
    ['a.json', '{"a": 1,}', 0, /^not valid JSON: /],
  ];
  for (const [file, text, index, message] of cases) {
    const r = parseDocuments(file, text);
    assert.ok(!r.ok, text);
    assert.equal(r.index, index, text);
    assert.match(r.message, message);
    assert.ok(!r.message.includes('\n'), `one line: ${r.message}`);
  }
});

it('reads *.yaml, *.yml and *.json files only', () => {
  assert.deepEqual(['a.yaml', 'b.YML', 'c.json', 'd.txt', 'e.yaml~', 'yaml'].map(isResourceFile), [true, true, true, false, false, false]);
});
