// The differential test of the HTTP/1 path (issue 15): wherever the proxy and the application could
// read the same bytes differently (framing, paths, headers, upgrades), the application must have
// seen exactly what the proxy judged. Seeded, generated and mutated client connections
// (test/helpers/request-corpus.ts) and named smuggling shapes (smuggling-cases.ts) go through the
// sidecar inbound, the sidecar outbound and the ingress gateway, real processes in namespaces, to a
// node:http app that records every request (test/fixtures/recorder-app.mjs); a strict reference
// reader (strict-http.ts) says what the client sent, and the oracle (differential-oracle.ts) holds
// the app's records and the client's responses to it.
//   DIFFERENTIAL_CASES  generated connections over the three paths (default 3000; `make differential`: 60000)
//   DIFFERENTIAL_SEED   the corpus (default: a fresh one, printed); a failure prints the line that replays it
//   DIFFERENTIAL_ONLY   comma-separated case ids to run alone (c17,conn_content_length)
//   DIFFERENTIAL_FINDINGS  a file to write every finding to (JSON lines: path, case, kind, detail, label, bytes)
//   PILOT_AGENT_BIN     another build of the agent to test (its bin/pilot-agent)
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { attribute, judge, referenceDisagreements, type AppRecord, type CaseTally, type ClientOutcome, type Finding } from '../../helpers/differential-oracle.js';
import { AGENT, startGatewayPath, startSidecarPaths, type DifferentialPath, type PathName } from '../../helpers/differential-paths.js';
import { netnsSkip } from '../../helpers/pod-netns.js';
import { generateCorpus, type CorpusCase } from '../../helpers/request-corpus.js';
import { smugglingCases } from '../../helpers/smuggling-cases.js';
import { envCount } from '../../helpers/env-count.js';

const env = process.env;


const TOTAL = envCount('DIFFERENTIAL_CASES', 3000);
const SEED = envCount('DIFFERENTIAL_SEED', randomInt(1, 2 ** 31));
const ONLY = env['DIFFERENTIAL_ONLY'] ? new Set(env['DIFFERENTIAL_ONLY'].split(',')) : undefined;
const FINDINGS_FILE = env['DIFFERENTIAL_FINDINGS'];
/** Connections per client process (and per judgement). */
const BATCH = 2_000;
/** After the client is done: time for the app's last records (a request cut by the client's close). */
const SETTLE_MS = 300;
const PATHS: readonly PathName[] = ['inbound', 'outbound', 'gateway'];

const selected = (c: CorpusCase): boolean => ONLY === undefined || ONLY.has(c.id);
const corpus = generateCorpus(SEED, 0, TOTAL).filter(selected);
const named = smugglingCases().filter(selected);
const replay = (ids: readonly string[]): string =>
  `DIFFERENTIAL_SEED=${SEED} DIFFERENTIAL_CASES=${TOTAL} DIFFERENTIAL_ONLY=${ids.join(',')} node --test --test-reporter=spec dist/test/integration/proxy/differential.test.js`;
const show = (b: Buffer): string => JSON.stringify(b.toString('latin1'));

console.log(`differential: seed ${SEED}, ${corpus.length} generated + ${named.length} named connections per run, agent ${AGENT}`);

interface Verdict {
  readonly findings: Finding[];
  readonly tallies: Map<string, CaseTally>;
  /** What each connection's client received. */
  readonly received: Map<string, Buffer>;
}

/** A batch's app records by case, and by seq with their case; the ones no connection of the batch sent are findings. */
function sortRecords(records: readonly AppRecord[], outcomes: Map<string, ClientOutcome>, batch: readonly CorpusCase[], judged: ReadonlySet<string>, findings: Finding[]):
  { byCase: Map<string, AppRecord[]>; bySeq: Map<number, { caseId: string | undefined; rec: AppRecord }> } {
  const byCase = new Map<string, AppRecord[]>();
  const bySeq = new Map<number, { caseId: string | undefined; rec: AppRecord }>();
  const ids = new Set(batch.map((c) => c.id));
  const owners = attribute(records, outcomes.values());
  for (const rec of records) {
    const caseId = owners.get(rec.seq);
    bySeq.set(rec.seq, { caseId, rec });
    if (caseId !== undefined && ids.has(caseId)) byCase.set(caseId, [...(byCase.get(caseId) ?? []), rec]);
    // node:http refusing a piece of a TCP relay whose 400 reached no one: no marker, no client to tie it
    // to; or a request of an earlier batch the proxy cut after its client left.
    else if ((caseId === undefined && rec.kind === 'error') || (rec.kind === 'aborted' && judged.has(caseId!))) continue;
    else findings.push({ caseId: caseId ?? '?', kind: 'unattributed', detail: `the app recorded ${JSON.stringify(rec)}, which no connection of this batch sent` });
  }
  return { byCase, bySeq };
}

/** Runs `cases` through `path` in batches and judges each connection. */
async function runThrough(path: DifferentialPath, cases: readonly CorpusCase[]): Promise<Verdict> {
  const findings: Finding[] = [];
  const tallies = new Map<string, CaseTally>();
  const received = new Map<string, Buffer>();
  const judged = new Set<string>();
  for (let i = 0; i < cases.length; i += BATCH) {
    const batch = cases.slice(i, i + BATCH);
    const outcomes = await path.send(batch);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const { byCase, bySeq } = sortRecords(await path.recorder.take(), outcomes, batch, judged, findings);
    for (const c of batch) {
      const outcome: ClientOutcome = outcomes.get(c.id) ?? { id: c.id, received: Buffer.alloc(0), end: 'error', endedAt: Date.now(), error: 'no outcome from the client' };
      const { findings: f, tally } = judge(c, byCase.get(c.id) ?? [], outcome, bySeq);
      findings.push(...f);
      tallies.set(c.id, tally);
      received.set(c.id, outcome.received);
      judged.add(c.id);
    }
  }
  return { findings, tallies, received };
}

/** A report of findings: counts by kind, then the first few with their bytes and what came back. */
function report(path: PathName, what: string, findings: readonly Finding[], cases: readonly CorpusCase[], verdict: Verdict, output: string): string {
  const byId = new Map(cases.map((c) => [c.id, c]));
  const kinds = new Map<string, number>();
  for (const f of findings) kinds.set(f.kind, (kinds.get(f.kind) ?? 0) + 1);
  const ids = [...new Set(findings.map((f) => f.caseId))];
  const lines = [
    `${path}, ${what}: ${findings.length} findings in ${ids.length} connections (seed ${SEED})`,
    `by kind: ${[...kinds].map(([k, n]) => `${k} ${n}`).join(', ')}`,
    `replay: ${replay(ids.slice(0, 20))}`,
  ];
  for (const id of ids.slice(0, 8)) {
    const c = byId.get(id);
    lines.push('', `${id}: ${c?.label ?? '(not a case of this run)'}`);
    for (const f of findings.filter((x) => x.caseId === id).slice(0, 4)) lines.push(`  [${f.kind}] ${f.detail}`);
    if (c) lines.push(`  sent: ${show(c.bytes)}${c.splits.length > 0 ? ` in pieces at ${c.splits.join(',')}` : ''}${c.halfClose ? '' : ', left open'}`);
    lines.push(`  received: ${show((verdict.received.get(id) ?? Buffer.alloc(0)).subarray(0, 800))}`);
  }
  if (/\b(error|fatal)\b/i.test(output)) lines.push('', `proxy output (tail): ${output.slice(-2000)}`);
  return lines.join('\n');
}

function summary(tallies: Iterable<CaseTally>): string {
  let read = 0, seen = 0, refused = 0, switched = 0, n = 0;
  for (const t of tallies) {
    n++;
    read += t.read;
    seen += t.seen;
    refused += t.refusedByProxy;
    switched += t.switched ? 1 : 0;
  }
  return `${n} connections: ${read} requests read strictly, ${seen} reached the app, ${refused} answered by the proxy itself, ${switched} switched`;
}

describe('the differential corpus and its reference reader', () => {
  it(`the strict reader reads every generated request as the generator meant it (seed ${SEED})`, () => {
    const bad = corpus.flatMap((c) => referenceDisagreements(c).map((d) => `${c.id}: ${d}\n  ${c.label}\n  ${show(c.bytes)}`));
    assert.equal(bad.length, 0, `${bad.length} disagreements; replay: ${replay([])}\n${bad.slice(0, 10).join('\n')}`);
  });

  it('draws every fate: served, refused, stopped at; mutated connections too', { skip: ONLY !== undefined || TOTAL < 300 ? 'a small or filtered corpus' : false }, () => {
    const fates = new Set(corpus.flatMap((c) => c.intended?.map((r) => r.fate) ?? []));
    assert.deepEqual([...fates].sort(), ['refused', 'served', 'stop']);
    assert.ok(corpus.some((c) => c.intended === undefined), 'mutated connections');
    assert.ok(corpus.some((c) => c.switching), 'connections to the app that switches');
  });
});

describe('differential: the application sees exactly what the proxy judged', { skip: netnsSkip }, () => {
  const paths = new Map<PathName, DifferentialPath>();
  const closers: (() => void)[] = [];

  before(async () => {
    const sidecar = await startSidecarPaths();
    closers.push(sidecar.close);
    const gateway = await startGatewayPath();
    closers.push(gateway.close);
    paths.set('inbound', sidecar.inbound).set('outbound', sidecar.outbound).set('gateway', gateway.gateway);
  });
  after(() => {
    for (const close of closers) close();
  });

  PATHS.forEach((name, k) => describe(name, () => {
    const generated = corpus.filter((_, i) => i % PATHS.length === k);
    let verdict: Verdict;
    let ms = 0;

    before(async () => {
      const started = Date.now();
      const cases = [...named, ...generated];
      verdict = await runThrough(paths.get(name)!, cases);
      ms = Date.now() - started;
      if (FINDINGS_FILE) {
        const byId = new Map(cases.map((c) => [c.id, c]));
        appendFileSync(FINDINGS_FILE, verdict.findings.map((f) => `${JSON.stringify({
          path: name, seed: SEED, ...f, label: byId.get(f.caseId)?.label, bytes: byId.get(f.caseId)?.bytes.toString('latin1'),
          received: verdict.received.get(f.caseId)?.toString('latin1'),
        })}\n`).join(''));
      }
    });

    for (const c of named) {
      it(`${c.id}: ${c.label}`, () => {
        const findings = verdict.findings.filter((f) => f.caseId === c.id);
        assert.equal(findings.length, 0, report(name, c.id, findings, named, verdict, paths.get(name)!.proxyOutput()));
      });
    }

    it(`${generated.length} generated connections (seed ${SEED})`, (t) => {
      const ids = new Set(generated.map((c) => c.id));
      t.diagnostic(`${summary(generated.map((c) => verdict.tallies.get(c.id)!).filter(Boolean))}; ${ms} ms with the named ones`);
      const findings = verdict.findings.filter((f) => ids.has(f.caseId) || !named.some((c) => c.id === f.caseId));
      assert.equal(findings.length, 0, report(name, 'generated connections', findings, generated, verdict, paths.get(name)!.proxyOutput()));
    });
  }));
});
