// An access log that can be turned off at run time (a Telemetry resource's `disabled: true`) without
// rebuilding the listeners that hold it. Made only where an access log is configured, so a workload
// without one pays nothing; with one, a flag is read per line.
import type { AccessLogSink, AccessRecord } from './access-record.js';

export class SwitchedAccessLog implements AccessLogSink {
  on = true;

  constructor(private readonly inner: AccessLogSink) {}

  get responseHeaders(): readonly string[] {
    return this.inner.responseHeaders;
  }

  write(record: AccessRecord): void {
    if (this.on) this.inner.write(record);
  }
}
