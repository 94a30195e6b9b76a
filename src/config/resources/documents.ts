// A resource file's text → its documents, each with its position in the file. YAML files may hold
// several documents (`---`); a JSON file holds one document, or a list whose elements are documents.
// Empty documents (blank, comments only, a stray `---`) are skipped but keep their place in the
// numbering, so `file[2]` is the third `---` section as the operator counts them.
import { yaml } from '../yaml.js';

export interface SourceDocument {
  /** 0-based position in the file. */
  readonly index: number;
  readonly value: unknown;
}

export type DocumentsResult =
  | { readonly ok: true; readonly documents: readonly SourceDocument[] }
  /** The file does not parse: nothing in it can be trusted, so the caller keeps what it had. */
  | { readonly ok: false; readonly index: number; readonly message: string };

export const RESOURCE_EXTENSIONS: readonly string[] = ['.yaml', '.yml', '.json'];

/** True for the file names the loader reads. */
export function isResourceFile(name: string): boolean {
  const lower = name.toLowerCase();
  return RESOURCE_EXTENSIONS.some((ext) => lower.endsWith(ext));
}

function parseJson(text: string): DocumentsResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, index: 0, message: `not valid JSON: ${(err as Error).message}` };
  }
  const values = Array.isArray(value) ? value : [value];
  const documents = values.flatMap((v, index) => (v === null ? [] : [{ index, value: v }]));
  return { ok: true, documents };
}

function parseYaml(text: string): DocumentsResult {
  const documents: SourceDocument[] = [];
  const docs = yaml().parseAllDocuments(text, { prettyErrors: true });
  for (const [index, doc] of docs.entries()) {
    const error = doc.errors[0];
    if (error) return { ok: false, index, message: `not valid YAML: ${oneLine(error.message)}` };
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      // Unresolved aliases and alias bombs surface here rather than in doc.errors.
      return { ok: false, index, message: `not valid YAML: ${oneLine((err as Error).message)}` };
    }
    if (value !== null && value !== undefined) documents.push({ index, value });
  }
  return { ok: true, documents };
}

/** The parser's message without the source excerpt it appends (a log line is one line). */
function oneLine(message: string): string {
  return message.split('\n')[0]!.replace(/:$/, '');
}

/** Parses a resource file; `.json` files as JSON, everything else as (multi-document) YAML. */
export function parseDocuments(file: string, text: string): DocumentsResult {
  if (file.toLowerCase().endsWith('.json')) {
    // An empty JSON file is treated like an empty YAML file: no documents.
    return text.trim() === '' ? { ok: true, documents: [] } : parseJson(text);
  }
  return parseYaml(text);
}
