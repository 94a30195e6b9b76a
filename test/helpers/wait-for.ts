// Polls a condition until it holds or a deadline passes; the failure names what was awaited.
import { setTimeout as sleep } from 'node:timers/promises';

export async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 5000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
