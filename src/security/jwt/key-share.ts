// Worker threads (--concurrency) each keep their own key sets; a key set one of them fetches is
// offered to the others, so a rotation seen by one worker is known to all — and still known when
// the JWKS server goes down afterwards. Carried by a BroadcastChannel (every thread of the process,
// never the sender); unref'd, so it never keeps a process alive.
import { BroadcastChannel } from 'node:worker_threads';

interface SharedKeySet {
  readonly url: string;
  readonly text: string;
}

type Listener = (shared: SharedKeySet) => void;

let channel: BroadcastChannel | undefined;
const listeners = new Set<Listener>();

function open(): BroadcastChannel {
  if (!channel) {
    channel = new BroadcastChannel('pilot-agent:jwks');
    (channel as unknown as { unref(): void }).unref();
    channel.onmessage = (event: unknown) => {
      const data = (event as { data: SharedKeySet }).data;
      for (const listener of listeners) listener(data);
    };
  }
  return channel;
}

/** Offers a freshly fetched key set document to the other threads. */
export function shareKeySet(url: string, text: string): void {
  open().postMessage({ url, text } satisfies SharedKeySet);
}

/** Calls `listener` with the key sets other threads fetched; returns the unsubscribe. */
export function onSharedKeySet(listener: Listener): () => void {
  open();
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0 && channel) {
      channel.close();
      channel = undefined;
    }
  };
}
