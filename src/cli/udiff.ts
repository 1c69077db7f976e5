// A unified diff of two texts (`diff -u`, three lines of context), for `policy fmt --diff`.
// Lines are matched with Myers' algorithm after the common head and tail are set aside; past
// MAX_EDITS the rest is shown as one replaced block, still a correct diff, only not minimal.

const CONTEXT = 3;
const MAX_EDITS = 2000;
const NO_EOL = '\\ No newline at end of file';

interface Lines { keys: string[]; text: string[] }

function splitLines(s: string): Lines {
  if (s === '') return { keys: [], text: [] };
  const text = s.split('\n');
  const finalNewline = text[text.length - 1] === '';
  if (finalNewline) text.pop();
  // A last line without its newline differs from the same line with one, as in diff(1).
  const keys = text.map((t, i) => (!finalNewline && i === text.length - 1 ? t + '\u0000' : t));
  return { keys, text };
}

type Op = { kind: ' ' | '-' | '+'; a: number; b: number };

/** The edit script turning a into b: kept, deleted and inserted lines with their indexes. */
function editScript(a: string[], b: string[]): Op[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const ops: Op[] = [];
  for (let i = 0; i < head; i++) ops.push({ kind: ' ', a: i, b: i });
  // One by one: a file of a few hundred thousand lines is more arguments than a call may take.
  for (const op of myers(a, b, head, a.length - tail, head, b.length - tail)) ops.push(op);
  for (let k = tail; k > 0; k--) ops.push({ kind: ' ', a: a.length - k, b: b.length - k });
  return ops;
}

function myers(a: string[], b: string[], a0: number, a1: number, b0: number, b1: number): Op[] {
  const n = a1 - a0;
  const m = b1 - b0;
  const max = Math.min(n + m, MAX_EDITS);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  // trace[d]: the diagonals -d-1..d+1 as they stood before round d (index k + d + 1).
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max && found < 0; d++) {
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? v[offset + k + 1]! : v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[a0 + x] === b[b0 + y]) { x++; y++; }
      v[offset + k] = x;
      if (x >= n && y >= m) { found = d; break; }
    }
  }
  if (found < 0) {
    // Too many edits to search: replace the whole middle.
    const ops: Op[] = [];
    for (let i = a0; i < a1; i++) ops.push({ kind: '-', a: i, b: b0 });
    for (let j = b0; j < b1; j++) ops.push({ kind: '+', a: a1, b: j });
    return ops;
  }
  // Walk the trace back from (n, m).
  const ops: Op[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const pv = trace[d]!;
    const k = x - y;
    const down = k === -d || (k !== d && pv[k - 1 + d + 1]! < pv[k + 1 + d + 1]!);
    const pk = down ? k + 1 : k - 1;
    const px = pv[pk + d + 1]!;
    const py = px - pk;
    while (x > px + (down ? 0 : 1) && y > py + (down ? 1 : 0)) { x--; y--; ops.push({ kind: ' ', a: a0 + x, b: b0 + y }); }
    if (down) { y--; ops.push({ kind: '+', a: a0 + x, b: b0 + y }); } else { x--; ops.push({ kind: '-', a: a0 + x, b: b0 + y }); }
  }
  while (x > 0 && y > 0) { x--; y--; ops.push({ kind: ' ', a: a0 + x, b: b0 + y }); }
  return ops.reverse();
}

/** `--- <from>` / `+++ <to>` and the hunks; '' when the texts are equal. */
export function unifiedDiff(before: string, after: string, fromName: string, toName: string): string {
  if (before === after) return '';
  const A = splitLines(before);
  const B = splitLines(after);
  const ops = editScript(A.keys, B.keys);
  const out = [`--- ${fromName}`, `+++ ${toName}`];
  let i = 0;
  while (i < ops.length) {
    // The next change, and the hunk around it: changes closer than 2×CONTEXT share a hunk.
    while (i < ops.length && ops[i]!.kind === ' ') i++;
    if (i >= ops.length) break;
    const start = Math.max(0, i - CONTEXT);
    let end = i;
    let lastChange = i;
    while (end < ops.length && (ops[end]!.kind !== ' ' || end - lastChange <= 2 * CONTEXT + 1)) {
      if (ops[end]!.kind !== ' ') lastChange = end;
      end++;
    }
    end = Math.min(ops.length, lastChange + 1 + CONTEXT);
    const hunk = ops.slice(start, end);
    const aStart = hunk[0]!.a;
    const bStart = hunk[0]!.b;
    const aLen = hunk.filter((o) => o.kind !== '+').length;
    const bLen = hunk.filter((o) => o.kind !== '-').length;
    out.push(`@@ -${range(aStart, aLen)} +${range(bStart, bLen)} @@`);
    for (const o of hunk) {
      const fromA = o.kind !== '+';
      const lines = fromA ? A : B;
      const idx = fromA ? o.a : o.b;
      out.push(o.kind + lines.text[idx]);
      if (lines.keys[idx]!.endsWith('\u0000')) out.push(NO_EOL);
    }
    i = end;
  }
  return out.join('\n') + '\n';
}

/** `start,len` with diff(1)'s conventions: 1-based; an empty range names the line before it. */
function range(start: number, len: number): string {
  const first = len === 0 ? start : start + 1;
  return len === 1 ? String(first) : `${first},${len}`;
}
