// Validators for the CI formats. SARIF: the official 2.1.0 schema through ajv, and beside it a
// structural check of what that schema requires of the parts Gatehouse writes (the objects, required properties, property types and enumerations of
// the OASIS SARIF 2.1.0 JSON schema for a log, run, tool, rule (reportingDescriptor), result,
// location, physical location, artifact location and region (each object's properties limited to
// those the schema defines, as its `additionalProperties: false` does). JUnit: Ant's report format
// (what CI reporters read): element order, required attributes and their types, checked here
// and by libxml2 (xmllint-wasm) against every XML Schema in test/fixtures/junit.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validateXML } from 'xmllint-wasm';
import { projectRoot } from '../../src/paths.js';
import { createRequire } from 'node:module';
import { DOMParser, type Element } from '@xmldom/xmldom';
import ajvDraft04 from 'ajv-draft-04';
import ajvFormats from 'ajv-formats';
import type { ValidateFunction } from 'ajv';

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

interface Shape { required: string[]; props: Record<string, (v: unknown, at: string, errs: string[]) => void> }

const str = (v: unknown, at: string, errs: string[]) => { if (typeof v !== 'string') errs.push(`${at}: not a string`); };
const uri = (v: unknown, at: string, errs: string[]) => {
  if (typeof v !== 'string') return errs.push(`${at}: not a string`);
  try { new URL(v, 'file:///base/'); } catch { errs.push(`${at}: not a URI reference`); }
};
const int = (min: number) => (v: unknown, at: string, errs: string[]) => { if (!Number.isInteger(v) || (v as number) < min) errs.push(`${at}: not an integer >= ${min}`); };
const oneOf = (...xs: string[]) => (v: unknown, at: string, errs: string[]) => { if (!xs.includes(v as string)) errs.push(`${at}: ${JSON.stringify(v)} not one of ${xs.join(', ')}`); };
const object = (shape: Shape) => (v: unknown, at: string, errs: string[]) => checkShape(shape, v, at, errs);
const array = (each: Shape['props'][string], minItems = 0) => (v: unknown, at: string, errs: string[]) => {
  if (!Array.isArray(v)) return errs.push(`${at}: not an array`);
  if (v.length < minItems) errs.push(`${at}: fewer than ${minItems} items`);
  v.forEach((x, i) => each(x, `${at}[${i}]`, errs));
};
const uniqueStrings = (v: unknown, at: string, errs: string[]) => {
  array(str)(v, at, errs);
  if (Array.isArray(v) && new Set(v).size !== v.length) errs.push(`${at}: items not unique`);
};

function checkShape(shape: Shape, v: unknown, at: string, errs: string[]): void {
  if (!isObj(v)) { errs.push(`${at}: not an object`); return; }
  for (const r of shape.required) if (!(r in v)) errs.push(`${at}: missing ${r}`);
  for (const [k, x] of Object.entries(v)) {
    const check = shape.props[k];
    if (!check) errs.push(`${at}: property ${k} is not in the schema`);
    else check(x, `${at}.${k}`, errs);
  }
}

const message: Shape = { required: [], props: { text: str, markdown: str, id: str, arguments: array(str) } };
const messageWithTextOrId = (v: unknown, at: string, errs: string[]) => {
  checkShape(message, v, at, errs);
  if (isObj(v) && !('text' in v) && !('id' in v)) errs.push(`${at}: a message needs text or id`);
};
const level = oneOf('none', 'note', 'warning', 'error');
const region: Shape = {
  required: [],
  props: { startLine: int(1), startColumn: int(1), endLine: int(1), endColumn: int(1), charOffset: int(-1), charLength: int(0), byteOffset: int(-1), byteLength: int(0), snippet: object({ required: [], props: { text: str } }), message: messageWithTextOrId, sourceLanguage: str },
};
const artifactLocation: Shape = { required: [], props: { uri, uriBaseId: str, index: int(-1), description: messageWithTextOrId } };
const physicalLocation: Shape = { required: [], props: { artifactLocation: object(artifactLocation), region: object(region), contextRegion: object(region) } };
const location: Shape = { required: [], props: { id: int(-1), physicalLocation: object(physicalLocation), message: messageWithTextOrId } };
const reportingConfiguration: Shape = { required: [], props: { enabled: (v, at, e) => { if (typeof v !== 'boolean') e.push(`${at}: not a boolean`); }, level, rank: (v, at, e) => { if (typeof v !== 'number' || v < -1 || v > 100) e.push(`${at}: rank out of range`); } } };
const multiformat: Shape = { required: ['text'], props: { text: str, markdown: str } };
const reportingDescriptor: Shape = {
  required: ['id'],
  props: { id: str, name: str, shortDescription: object(multiformat), fullDescription: object(multiformat), helpUri: uri, help: object(multiformat), defaultConfiguration: object(reportingConfiguration) },
};
const driver: Shape = { required: ['name'], props: { name: str, version: str, semanticVersion: str, informationUri: uri, rules: array(object(reportingDescriptor)) } };
const result: Shape = {
  required: ['message'],
  props: { ruleId: str, ruleIndex: int(-1), level, kind: oneOf('notApplicable', 'pass', 'fail', 'review', 'open', 'informational'), message: messageWithTextOrId, locations: array(object(location)) },
};
const run: Shape = {
  required: ['tool'],
  props: { tool: object({ required: ['driver'], props: { driver: object(driver) } }), results: array(object(result)), columnKind: oneOf('utf16CodeUnits', 'unicodeCodePoints') },
};
const sarifLog: Shape = {
  required: ['version', 'runs'],
  props: { $schema: uri, version: oneOf('2.1.0'), runs: array(object(run)) },
};

/** What a SARIF 2.1.0 log breaks of the schema (empty when valid), with the rule references checked too. */
// The official SARIF 2.1.0 schema (OASIS, as published on SchemaStore; bundled with Microsoft's
// jest-sarif), in JSON Schema draft 4, checked by ajv.
const require = createRequire(import.meta.url);
const officialSchema = JSON.parse(readFileSync(require.resolve('@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json'), 'utf8')) as Json;
let validateOfficial: ValidateFunction | undefined;

/** Problems of a SARIF log against the official schema, as `<instance path>: <message>`. */
export function officialSarifErrors(log: unknown): string[] {
  if (!validateOfficial) {
    // CommonJS modules: their class and function are the default export's `default`.
    const Ajv = (ajvDraft04 as unknown as { default: typeof ajvDraft04 }).default ?? ajvDraft04;
    const addFormats = (ajvFormats as unknown as { default: typeof ajvFormats }).default ?? ajvFormats;
    // The schema's language-tag pattern is written for JavaScript's non-unicode regular expressions.
    const ajv = new (Ajv as unknown as new (o: object) => import('ajv').default)({ allErrors: true, strict: false, unicodeRegExp: false });
    (addFormats as unknown as (a: unknown) => void)(ajv);
    validateOfficial = ajv.compile(officialSchema);
  }
  const validate = validateOfficial;
  return validate(log) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '$'}: ${e.message}`);
}

export function sarifErrors(log: unknown): string[] {
  const errs: string[] = officialSarifErrors(log);
  checkShape(sarifLog, log, '$', errs);
  if (errs.length || !isObj(log)) return errs;
  for (const [i, r] of (log.runs as Json[]).entries()) {
    const rules = ((r.tool as Json).driver as Json).rules as Json[] | undefined ?? [];
    uniqueStrings(rules.map((x) => x.id), `$.runs[${i}].tool.driver.rules[*].id`, errs);
    for (const [j, res] of ((r.results as Json[] | undefined) ?? []).entries()) {
      if (typeof res.ruleIndex === 'number' && rules[res.ruleIndex]?.id !== res.ruleId) errs.push(`$.runs[${i}].results[${j}]: ruleIndex does not point at ruleId`);
    }
  }
  return errs;
}

const INT = /^-?\d+$/;
const DECIMAL = /^-?\d+(\.\d+)?$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/;

function elements(e: Element): Element[] {
  const out: Element[] = [];
  for (let n = e.firstChild; n; n = n.nextSibling) if (n.nodeType === 1) out.push(n as unknown as Element);
  return out;
}

function attrs(e: Element, at: string, spec: Record<string, RegExp | null>, required: string[], errs: string[]): void {
  for (const r of required) if (!e.hasAttribute(r)) errs.push(`${at}: missing attribute ${r}`);
  for (let i = 0; i < e.attributes.length; i++) {
    const a = e.attributes.item(i)!;
    if (!(a.name in spec)) { errs.push(`${at}: attribute ${a.name} is not in the schema`); continue; }
    const re = spec[a.name];
    if (re && !re.test(a.value)) errs.push(`${at}: attribute ${a.name}="${a.value}" does not match ${re}`);
  }
}

/** What a JUnit XML report breaks of JUnit.xsd (empty when valid), and the counts that do not add up. */
export function junitErrors(xml: string): string[] {
  const errs: string[] = [];
  const doc = new DOMParser({ onError: (level, msg) => { if (level !== 'warning') errs.push(`XML: ${msg}`); } }).parseFromString(xml, 'text/xml');
  const root = doc.documentElement;
  if (!root || root.tagName !== 'testsuites') return [...errs, 'root element is not <testsuites>'];
  if (root.attributes.length) errs.push('<testsuites> takes no attributes');
  elements(root).forEach((suite, si) => {
    const at = `testsuite[${si}]`;
    if (suite.tagName !== 'testsuite') return errs.push(`${at}: <${suite.tagName}> in <testsuites>`);
    attrs(suite, at, { id: INT, package: null, name: /\S/, timestamp: TIMESTAMP, hostname: /\S/, tests: INT, failures: INT, errors: INT, time: DECIMAL },
      ['id', 'package', 'name', 'timestamp', 'hostname', 'tests', 'failures', 'errors', 'time'], errs);
    const kids = elements(suite);
    const names = kids.map((k) => k.tagName);
    const cases = kids.filter((k) => k.tagName === 'testcase');
    const expected = ['properties', ...cases.map(() => 'testcase'), 'system-out', 'system-err'];
    if (names.join() !== expected.join()) errs.push(`${at}: children ${names.join(', ')}; the schema wants properties, testcase*, system-out, system-err`);
    for (const p of kids.filter((k) => k.tagName === 'properties').flatMap(elements)) {
      if (p.tagName !== 'property') errs.push(`${at}: <${p.tagName}> in <properties>`);
      else attrs(p, `${at}.property`, { name: /\S/, value: null }, ['name', 'value'], errs);
    }
    let failures = 0;
    let errors = 0;
    cases.forEach((c, ci) => {
      const cat = `${at}.testcase[${ci}]`;
      attrs(c, cat, { name: /\S/, classname: /\S/, time: DECIMAL }, ['name', 'classname', 'time'], errs);
      const inner = elements(c);
      if (inner.length > 1) errs.push(`${cat}: more than one of error, failure`);
      for (const f of inner) {
        if (f.tagName !== 'failure' && f.tagName !== 'error') { errs.push(`${cat}: <${f.tagName}> in <testcase>`); continue; }
        attrs(f, `${cat}.${f.tagName}`, { message: null, type: null }, ['type'], errs);
        if (elements(f).length) errs.push(`${cat}.${f.tagName}: holds elements, the schema wants text`);
        if (f.tagName === 'failure') failures++; else errors++;
      }
    });
    if (Number(suite.getAttribute('tests')) !== cases.length) errs.push(`${at}: tests="${suite.getAttribute('tests')}" but ${cases.length} testcases`);
    if (Number(suite.getAttribute('failures')) !== failures) errs.push(`${at}: failures="${suite.getAttribute('failures')}" but ${failures} failures`);
    if (Number(suite.getAttribute('errors')) !== errors) errs.push(`${at}: errors="${suite.getAttribute('errors')}" but ${errors} errors`);
  });
  return errs;
}

/** The test cases of a report: suite name, case name, and the failure text (undefined when passed). */
export function junitCases(xml: string): { suite: string; name: string; failure?: string; message?: string }[] {
  const doc = new DOMParser().parseFromString(xml, 'text/xml');
  return elements(doc.documentElement!).flatMap((s) => elements(s).filter((c) => c.tagName === 'testcase').map((c) => {
    const f = elements(c)[0];
    return { suite: s.getAttribute('name')!, name: c.getAttribute('name')!, ...(f ? { failure: f.textContent ?? '', message: f.getAttribute('message') ?? '' } : {}) };
  }));
}

/** The XML Schemas a JUnit report must satisfy: every `.xsd` in test/fixtures/junit. */
export const JUNIT_SCHEMAS = readdirSync(join(projectRoot, 'test', 'fixtures', 'junit')).filter((f) => f.endsWith('.xsd')).sort()
  .map((f) => ({ fileName: f, contents: readFileSync(join(projectRoot, 'test', 'fixtures', 'junit', f), 'utf8') }));

/** What libxml2 finds wrong with a JUnit report against each schema (empty when valid against all). */
export async function junitSchemaErrors(xml: string): Promise<string[]> {
  const out: string[] = [];
  for (const schema of JUNIT_SCHEMAS) {
    const r = await validateXML({ xml: [{ fileName: 'report.xml', contents: xml }], schema: [schema] });
    if (!r.valid) out.push(...r.errors.map((e) => `${schema.fileName}: ${e.rawMessage}`));
  }
  return out;
}
