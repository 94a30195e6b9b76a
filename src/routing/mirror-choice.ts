// Which of a rule's mirrors copy this request: each mirror draws on its own, per request, with its
// percentage (Envoy's runtime fraction per shadow policy). Pure: the random source is given.
import type { HttpMirror } from '../config/resources/types.js';

/**
 * The mirrors that copy this request (undefined when none does: nothing is allocated for the common
 * case of a rule whose draw fails). A 100% mirror takes no draw; 0% never copies.
 */
export function chooseMirrors(mirrors: readonly HttpMirror[], random: () => number = Math.random): HttpMirror[] | undefined {
  let chosen: HttpMirror[] | undefined;
  for (const m of mirrors) {
    if (m.percent >= 100 || (m.percent > 0 && random() * 100 < m.percent)) (chosen ??= []).push(m);
  }
  return chosen;
}
