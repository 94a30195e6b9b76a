// jose (key import, signature checks) is loaded with the first key to import: a workload without a
// RequestAuthentication never needs it, and loading it costs about 60 ms of CPU at start and heap after.
type Jose = typeof import('jose');
let loading: Promise<Jose> | undefined;

export function jose(): Promise<Jose> {
  return (loading ??= import('jose'));
}
