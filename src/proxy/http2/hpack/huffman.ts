// HPACK's Huffman code (RFC 7541 5.2, Appendix B), decoding only. The code is canonical: given each
// symbol's code length, the codes are the consecutive integers in order of (length, symbol), so the
// table below holds only the 257 lengths (symbol 256 is EOS) and the codes are derived from them.
// Decoding runs a small state machine over 4-bit steps, built once on first use: a state is a node
// of the code tree, a step moves down four bits and emits at most one symbol (no code is shorter
// than 5 bits). A string is well formed when it ends at most 7 bits into a code, on the all-ones
// path (the padding is a prefix of EOS), and never decodes EOS itself.

/** Code length in bits of each symbol 0..256 (RFC 7541 Appendix B). */
const CODE_LENGTHS: readonly number[] = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];

const EOS = 256;

/** Each symbol's code (right-aligned) and length, derived from CODE_LENGTHS (the encoder side, for tests). */
export function huffmanCodes(): Array<{ code: number; bits: number }> {
  const order = CODE_LENGTHS.map((bits, symbol) => ({ symbol, bits })).sort((a, b) => a.bits - b.bits || a.symbol - b.symbol);
  const codes = new Array<{ code: number; bits: number }>(CODE_LENGTHS.length);
  let code = 0;
  let prev = order[0]!.bits;
  for (let i = 0; i < order.length; i++) {
    const { symbol, bits } = order[i]!;
    if (i > 0) code = (code + 1) * 2 ** (bits - prev); // a multiplication: codes reach 30 bits
    prev = bits;
    codes[symbol] = { code, bits };
  }
  return codes;
}

interface Machine {
  /** [state * 16 + nibble]: the state after the step. */
  readonly next: Uint16Array;
  /** [state * 16 + nibble]: the symbol the step completes, -1 none, EOS an error. */
  readonly emit: Int16Array;
  /** [state]: the string may end here (at most 7 bits into a code, all of them ones). */
  readonly accepting: Uint8Array;
}

let machine: Machine | undefined;

function build(): Machine {
  // The code tree: node 0 is the root; child[node * 2 + bit] is a node (> 0) or ~symbol for a leaf.
  const child = new Int32Array(512 * 2);
  let nodes = 1;
  const codes = huffmanCodes();
  for (let symbol = 0; symbol < codes.length; symbol++) {
    const { code, bits } = codes[symbol]!;
    let node = 0;
    for (let i = bits - 1; i >= 0; i--) {
      const bit = Math.floor(code / 2 ** i) % 2;
      const at = node * 2 + bit;
      if (i === 0) child[at] = ~symbol;
      else {
        if (child[at] === 0) child[at] = nodes++;
        node = child[at]!;
      }
    }
  }
  // Nodes on the all-ones path from the root, at depth 1..7 (and the root): where padding may stop.
  const accepting = new Uint8Array(nodes);
  accepting[0] = 1;
  for (let node = 0, depth = 0; depth < 7; depth++) {
    node = child[node * 2 + 1]!;
    accepting[node] = 1;
  }
  const next = new Uint16Array(nodes * 16);
  const emit = new Int16Array(nodes * 16).fill(-1);
  for (let state = 0; state < nodes; state++) {
    for (let nibble = 0; nibble < 16; nibble++) {
      let node = state;
      for (let b = 3; b >= 0; b--) {
        const c = child[node * 2 + ((nibble >> b) & 1)]!;
        if (c < 0) {
          emit[state * 16 + nibble] = ~c;
          node = 0;
        } else node = c;
      }
      next[state * 16 + nibble] = node;
    }
  }
  return { next, emit, accepting };
}

/** Why a Huffman string was refused. */
export type HuffmanFault = 'eos' | 'padding';

/**
 * Decodes `src[start, end)` into `out` from 0; returns the number of bytes written, or the fault.
 * `out` must hold at least (end - start) * 8 / 5 bytes (the shortest code is 5 bits).
 */
export function huffmanDecode(src: Buffer, start: number, end: number, out: Buffer): number | HuffmanFault {
  const m = (machine ??= build());
  const { next, emit } = m;
  let state = 0;
  let n = 0;
  for (let i = start; i < end; i++) {
    const byte = src[i]!;
    let at = state * 16 + (byte >> 4);
    let sym = emit[at]!;
    if (sym >= 0) {
      if (sym === EOS) return 'eos';
      out[n++] = sym;
    }
    state = next[at]!;
    at = state * 16 + (byte & 0xf);
    sym = emit[at]!;
    if (sym >= 0) {
      if (sym === EOS) return 'eos';
      out[n++] = sym;
    }
    state = next[at]!;
  }
  return m.accepting[state] === 1 ? n : 'padding';
}
