// What the in-process micro-benchmarks share (bench-parser.mjs, bench-traffic-path.mjs).

/**
 * ns per call of `run` over `ms` milliseconds: run(1000) makes 1000 calls and answers what they
 * produced (summed, so that nothing is optimized away); `check` is given that sum and the calls made.
 */
export function nsPerCall(run, ms, check) {
  let n = 0;
  let sink = 0;
  const start = process.hrtime.bigint();
  const until = start + BigInt(ms) * 1_000_000n;
  let now = start;
  while (now < until) {
    sink += run(1000);
    n += 1000;
    now = process.hrtime.bigint();
  }
  check(sink, n);
  return Number(now - start) / n;
}

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
