// The YAML parser, loaded the first time there is YAML to read: a sidecar with no mesh config file
// and no resources never needs it, and loading it costs about 50 ms of CPU at start and heap after.
import { createRequire } from 'node:module';

type Yaml = typeof import('yaml');
let loaded: Yaml | undefined;

export function yaml(): Yaml {
  return (loaded ??= createRequire(import.meta.url)('yaml') as Yaml);
}
