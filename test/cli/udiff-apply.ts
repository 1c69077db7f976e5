// A strict unified-diff applier for tests: every context and removed line must match the
// original exactly where the hunk header says, and the header's counts must be right.

export function applyUnifiedDiff(original: string, diff: string): string {
  const src = toLines(original);
  const out: { text: string; eol: boolean }[] = [];
  const lines = diff.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  let i = 0;
  while (i < lines.length && !lines[i]!.startsWith('@@')) i++;
  let pos = 0; // next unread line of the original
  while (i < lines.length) {
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$/.exec(lines[i]!);
    if (!m) throw new Error(`bad hunk header: ${lines[i]}`);
    const aLen = m[2] === undefined ? 1 : Number(m[2]);
    const bLen = m[4] === undefined ? 1 : Number(m[4]);
    const aStart = aLen === 0 ? Number(m[1]) : Number(m[1]) - 1;
    if (aStart < pos) throw new Error('hunks overlap or go backwards');
    while (pos < aStart) out.push(src[pos++]!);
    if (out.length !== (bLen === 0 ? Number(m[3]) : Number(m[3]) - 1)) throw new Error(`hunk ${lines[i]} starts at the wrong line of the result`);
    i++;
    let a = 0;
    let b = 0;
    while (i < lines.length && !lines[i]!.startsWith('@@')) {
      const l = lines[i]!;
      const noEol = lines[i + 1] === '\\ No newline at end of file';
      const kind = l[0];
      const text = l.slice(1);
      if (kind === ' ' || kind === '-') {
        const have = src[pos];
        if (!have || have.text !== text || have.eol === noEol) throw new Error(`line ${pos + 1} does not match: ${JSON.stringify(l)}`);
        pos++;
        a++;
        if (kind === ' ') { out.push(have); b++; }
      } else if (kind === '+') {
        out.push({ text, eol: !noEol });
        b++;
      } else throw new Error(`bad diff line: ${JSON.stringify(l)}`);
      i += noEol ? 2 : 1;
    }
    if (a !== aLen || b !== bLen) throw new Error(`hunk counts wrong: -${a} +${b}, header says -${aLen} +${bLen}`);
  }
  while (pos < src.length) out.push(src[pos++]!);
  return out.map((l) => l.text + (l.eol ? '\n' : '')).join('');
}

function toLines(s: string): { text: string; eol: boolean }[] {
  if (s === '') return [];
  const parts = s.split('\n');
  const last = parts.pop()!;
  const lines = parts.map((text) => ({ text, eol: true }));
  if (last !== '') lines.push({ text: last, eol: false });
  return lines;
}
