// `policy test --format junit`: the results as JUnit XML, the shape CI servers read (Jenkins,
// GitLab, GitHub test reporters): one <testsuite> per file the tests come from, one <testcase>
// per test block, a <failure> with what was expected and what came out for each failing test.
// Written to the schema most readers check against (Ant's format as the widely used JUnit.xsd
// states it): no attributes on <testsuites>; each suite with its id, package, name, timestamp,
// hostname and counts, a <properties>, its test cases, then <system-out> and <system-err>; each
// case with name, classname and time only (the test's line goes in the failure text).

/** One test's result as the CLI has it. */
export interface JunitCase {
  name: string;
  /** The file the test block is in (its suite), or null for a test without a location. */
  file: string | null;
  line: number | null;
  passed: boolean;
  expected: string;
  /** The decision and reason that came out, for a test that makes one. */
  actual?: string;
  failures: string[];
}

/** The characters XML 1.0 allows, escaped for an attribute or text. */
export function xmlEscape(s: string): string {
  return s
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/** Suites by file, in the order first met; `broken` adds an errored suite per group that did not load. */
export function junitXml(cases: JunitCase[], broken: { name: string; message: string }[] = [], timestamp = new Date()): string {
  const suites = new Map<string, JunitCase[]>();
  for (const c of cases) {
    const key = c.file ?? '(no file)';
    const list = suites.get(key) ?? [];
    list.push(c);
    suites.set(key, list);
  }
  const ts = timestamp.toISOString().replace(/\.\d{3}Z$/, '');
  let id = 0;
  const out = ['<?xml version="1.0" encoding="UTF-8"?>', '<testsuites>'];
  const suite = (name: string, tests: number, failures: number, errors: number) => [
    `  <testsuite id="${id++}" package="policies" name="${xmlEscape(name)}" timestamp="${ts}" hostname="localhost" tests="${tests}" failures="${failures}" errors="${errors}" time="0">`,
    `    <properties>`,
    `      <property name="file" value="${xmlEscape(name)}"/>`,
    `    </properties>`,
  ];
  const endSuite = ['    <system-out/>', '    <system-err/>', '  </testsuite>'];
  for (const [file, list] of suites) {
    const failed = list.filter((c) => !c.passed).length;
    out.push(...suite(file, list.length, failed, 0));
    for (const c of list) {
      const attrs = `name="${xmlEscape(c.name)}" classname="${xmlEscape(file)}" time="0"`;
      if (c.passed) { out.push(`    <testcase ${attrs}/>`); continue; }
      const at = c.file ? [`at: ${c.file}${c.line !== null ? `:${c.line}` : ''}`] : [];
      const body = [`expected: ${c.expected}`, ...(c.actual !== undefined ? [`actual: ${c.actual}`] : []), ...at, ...c.failures].join('\n');
      out.push(`    <testcase ${attrs}>`);
      out.push(`      <failure message="${xmlEscape(c.failures.join('; '))}" type="${c.actual !== undefined ? 'decision' : 'assertion'}">${xmlEscape(body)}</failure>`);
      out.push('    </testcase>');
    }
    out.push(...endSuite);
  }
  for (const b of broken) {
    out.push(...suite(b.name, 1, 0, 1));
    out.push(`    <testcase name="load policies" classname="${xmlEscape(b.name)}" time="0">`);
    out.push(`      <error message="the policies do not load" type="policy_error">${xmlEscape(b.message)}</error>`);
    out.push('    </testcase>');
    out.push(...endSuite);
  }
  out.push('</testsuites>');
  return out.join('\n') + '\n';
}
