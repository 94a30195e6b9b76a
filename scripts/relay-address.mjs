// `[HOST:]PORT` as the bench relays take their addresses (the host 127.0.0.1 when left out), or undefined.
export function relayAddress(text) {
  const m = /^(?:(.+):)?(\d+)$/.exec(text ?? '');
  return m ? { host: m[1] ?? '127.0.0.1', port: Number(m[2]) } : undefined;
}
