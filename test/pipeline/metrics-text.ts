/** One sample of the Prometheus text format: `name{label="value",...} number`. */
export interface Sample { name: string; labels: Record<string, string>; value: number }

export interface ParsedMetrics {
  samples: Sample[];
  /** metric family name → its TYPE line */
  types: Map<string, string>;
  /** the value of the one sample with these labels (others ignored), or undefined */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** the sum over every sample whose labels include these */
  sum(name: string, labels?: Record<string, string>): number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parses the exposition format strictly: any line that is neither a comment nor a sample fails. */
export function parseMetrics(text: string): ParsedMetrics {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const t = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      if (t) types.set(t[1]!, t[2]!);
      else if (!/^# HELP \S+ /.test(line)) throw new Error(`not a comment of the format: ${line}`);
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_x, c: string) => (c === 'n' ? '\n' : c));
    // Go's ParseFloat, which Prometheus uses, takes NaN in any case (prom-client writes `Nan`).
    const value = m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : /^nan$/i.test(m[3]!) ? NaN : Number(m[3]);
    if (Number.isNaN(value) && !/^nan$/i.test(m[3]!)) throw new Error(`not a number: ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  const matches = (s: Sample, name: string, labels: Record<string, string>) =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);
  return {
    samples,
    types,
    value: (name, labels = {}) => samples.find((s) => matches(s, name, labels))?.value,
    sum: (name, labels = {}) => samples.filter((s) => matches(s, name, labels)).reduce((a, s) => a + s.value, 0),
  };
}
