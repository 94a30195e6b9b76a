// The process's open-file limit (RLIMIT_NOFILE, the soft one), read through libc (koffi, as
// socket-options.ts does): Node raises the soft limit to the hard one at start and exposes
// neither. The default maximum of downstream connections is derived from it (connection-budget.ts).
import { koffi } from '../native/koffi.js';

/** Linux's number for RLIMIT_NOFILE (the same on x86-64 and arm64). */
const RLIMIT_NOFILE = 7;
const RLIM_INFINITY = 0xffff_ffff_ffff_ffffn;

const libc = koffi.load('libc.so.6');
const getrlimit = libc.func('int getrlimit(int resource, _Out_ uint8_t *rlim)');

/** The soft limit on open file descriptors; undefined when unlimited or unreadable. */
export function fileDescriptorLimit(): number | undefined {
  const rlimit = Buffer.alloc(16); // struct rlimit { rlim_t rlim_cur, rlim_max } (64-bit)
  if ((getrlimit(RLIMIT_NOFILE, rlimit) as number) !== 0) return undefined;
  const soft = rlimit.readBigUInt64LE(0);
  return soft === RLIM_INFINITY ? undefined : Number(soft);
}
