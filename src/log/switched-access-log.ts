// One direction's access log as the configuration in force says it (the mesh config's accessLogFile,
// or a Telemetry turning the log on or off for CLIENT or SERVER), switched at run time without
// rebuilding the listeners that hold it. The engines read `on` once when a request or connection
// begins and build no record while it is false: a workload whose log is off pays that one read.
import type { AccessLogSink, AccessRecord } from './access-record.js';

export class SwitchedAccessLog implements AccessLogSink {
  on = false;
  private sink: AccessLogSink | undefined = undefined;

  /** `responseHeaders`: what the format reads (every sink a switch takes has the mesh config's format). */
  constructor(readonly responseHeaders: readonly string[]) {}

  /** The sink in force from now on (undefined: off). A request already begun writes to it, or nowhere. */
  set(sink: AccessLogSink | undefined): void {
    this.sink = sink;
    this.on = sink !== undefined;
  }

  write(record: AccessRecord): void {
    this.sink?.write(record);
  }
}
