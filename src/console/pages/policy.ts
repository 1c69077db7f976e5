import { basename, join } from 'node:path';
import type { Request, Response, Router } from 'express';
import { PolicyLoadError, toJsonRule } from '../../policy-service.js';
import type { AppContext } from '../../context.js';
import { errors } from '../../errors.js';
import { DiffRefused, DiffTooLarge, diffPolicySets, fieldDescText, type Change, type DiffResult } from '../../policy/diff.js';
import { formatDiagnostic, loadPolicySet, type PolicySet } from '../../policy/index.js';
import type { JsonRule, SourceFile } from '../../policy/types.js';
import { audited } from '../audit.js';
import { formValues, ticked } from '../forms.js';
import {
  badge,
  button,
  checkbox,
  code,
  details,
  errorList,
  escapeHtml as e,
  input,
  link,
  notice,
  postForm,
  pre,
  section,
  seg,
  select,
  table,
  textarea,
  when,
  type Html,
} from '../html.js';
import { done, filesOf, personOf, render } from './common.js';
import { iso } from '../../clock.js';

const DECISION_KIND: Record<string, string> = { allow: 'ok', deny: 'bad', approval_required: 'warn' };
const decision = (d: string): Html => badge(d, DECISION_KIND[d] ?? '');
const shortVersion = (v: string) => (v.length > 40 ? `${v.slice(0, 40)}…` : v);

/** The files in force, shown by name: they live in GATEHOUSE_POLICY_DIR. */
const fileName = (path: string) => (path.startsWith('api:') ? path : basename(path));

interface PolicyPageState {
  reloadErrors?: string[];
  draftErrors?: string[];
  status?: number;
}

async function policyPage(ctx: AppContext, req: Request, res: Response, st: PolicyPageState = {}): Promise<void> {
  const person = personOf(res);
  const set = await ctx.policy.current();
  const files = await ctx.policy.files();
  const live = new Map((await ctx.store.rules.live()).map((r) => [`api:rule/${r.id}`, r]));
  const sourceName = (path: string): Html => {
    const rule = live.get(path);
    return rule ? `${link(`/console/rules/${seg(rule.id)}`, rule.name)} <small>(live rule)</small>` : code(fileName(path));
  };
  const sources = table(
    ['Source', 'Policy', 'Version', 'Content hash'],
    set.sources.map((s) => [sourceName(s.path), e(s.policy ?? ''), s.version === undefined ? '' : e(s.version), code(s.hash.slice(0, 16))]),
    { empty: 'No policy files and no live rules: every granted action is allowed within its limits.' },
  );
  const fileList = files.map((f) => details(fileName(f.path), pre(f.text, 'policy-text'))).join('\n');
  const history = await ctx.store.policyVersions.list(200);
  const options = history.map((h) => [h.version, `${shortVersion(h.version)} · ${iso(h.first_seen).replace('T', ' ').slice(0, 19)} UTC`] as const);
  const compare = history.length >= 2
    ? `<form method="get" action="/console/policy/diff" class="stack">
<div class="grid">
${select({ name: 'from', id: 'diff-from', label: 'Before', options, value: history[1]!.version })}
${select({ name: 'to', id: 'diff-to', label: 'After', options, value: history[0]!.version })}
</div>
${button('Compare versions', { kind: 'plain', id: 'compare-versions' })}
</form>`
    : '<p class="empty">Only one version has been in force so far.</p>';
  const historyTable = table(
    ['Version', 'In force from'],
    history.slice(0, 20).map((h) => [code(h.version), when(iso(h.first_seen))]),
  );
  const draft = postForm(
    '/console/policy/diff',
    person,
    `${errorList(st.draftErrors ?? [])}
<div class="field"><label for="draft-files">Draft policy files</label>
<input id="draft-files" name="files" type="file" accept=".policy" multiple aria-describedby="draft-files-hint">
<p class="hint" id="draft-files-hint">Each replaces the file of the same name in force; the others stay.</p></div>
<p class="or">or paste one file:</p>
${input({ name: 'draft_name', label: 'File name', value: 'draft.policy' })}
${textarea({ name: 'draft_text', label: 'Policy text', rows: 8, mono: true, placeholder: 'policy "refunds" version 4\n\nrule "block-large-refunds" { ... }' })}
${checkbox({ name: 'whole', label: 'The draft is the whole set of files (files not in it are removed)' })}
${button('Show what changes', { id: 'diff-draft' })}`,
    { multipart: true, id: 'draft-form' },
  );
  render(ctx, req, res, st.status ?? 200, {
    title: 'Policy',
    section: 'policy',
    lead: `In force: ${code(set.version)}`,
    body: `${section('In force', `${sources}
${fileList ? `<h3>Files</h3>${fileList}` : ''}
${errorList(st.reloadErrors ?? [])}
${postForm('/console/policy/reload', person, `<p>Reload reads the policy directory again; with errors, the policy in force stays.</p>${button('Reload the policy files', { kind: 'plain', id: 'policy-reload' })}`)}`)}
${section('Compare two versions', `${compare}${details('Versions seen', historyTable)}`)}
${section('Review a draft', draft)}`,
  });
}

function changeCard(c: Change, i: number): Html {
  const ex = c.except ?? {};
  const except = (what: string[] | undefined) => (what?.length ? ` <span class="except">except ${e(what.join(', '))}</span>` : '');
  const region = Object.entries(c.region).map(([f, d]) => `<li>${code(fieldDescText(f, d))}</li>`).join('');
  return `<article class="change" id="change-${i + 1}">
<h3>${code(c.relation)}${except(ex.relation)} on ${code(c.object)}${except(ex.object)}</h3>
<p class="who">by ${e(c.subjects.join(' '))}${c.no_person ? ' (no person)' : ''}${except(ex.subjects)}</p>
<p class="flip">${decision(c.before)} <span aria-hidden="true">→</span><span class="sr"> becomes </span> ${decision(c.after)}</p>
<p>when ${region ? `<ul class="region">${region}</ul>` : 'any context'}</p>
<p class="example-label">Example request</p>
${pre(JSON.stringify(c.example, null, 2), 'example')}
</article>`;
}

function diffBody(before: { label: Html }, after: { label: Html }, r: DiffResult): Html {
  const summary = r.changes.length
    ? notice(`${r.changes.length} region${r.changes.length === 1 ? '' : 's'} of the request space change decision.`, 'info')
    : notice('No request changes decision.', 'ok');
  const json = JSON.stringify(r.notes.length ? { changes: r.changes, notes: r.notes } : { changes: r.changes }, null, 2);
  return `<p class="sides">Before: ${before.label}<br>After: ${after.label}</p>
${summary}
${r.notes.map((n) => notice(`Note: ${n}`, 'info')).join('')}
<div class="changes">${r.changes.map(changeCard).join('\n')}</div>
${details('As JSON (gatehouse policy diff --json)', pre(json, 'json'))}
<p>${link('/console/policy', 'Back to the policy')}</p>`;
}

function compile(files: SourceFile[], rules: JsonRule[]): { set?: PolicySet; errors: string[] } {
  const { policySet, diagnostics } = loadPolicySet({ files, rules });
  const shown = diagnostics.map((d) => formatDiagnostic({ ...d, file: fileName(d.file) }));
  return policySet ? { set: policySet, errors: [] } : { errors: shown };
}

function runDiff(before: PolicySet, after: PolicySet): DiffResult {
  try {
    return diffPolicySets(before, after);
  } catch (err) {
    if (err instanceof DiffTooLarge) throw errors.invalidRequest(`the two versions are ${err.message}`);
    if (err instanceof DiffRefused) throw errors.invalidRequest(err.message);
    throw err;
  }
}

/** The draft's files: the uploads (and the pasted file), each replacing the file of the same name. */
async function draftFiles(ctx: AppContext, req: Request, res: Response): Promise<{ files: SourceFile[]; problems: string[]; names: string[] }> {
  const v = formValues(req);
  const problems: string[] = [];
  const uploads: SourceFile[] = [];
  const dir = ctx.config.policyDir;
  const add = (name: string, text: string) => {
    const base = basename(name.replace(/\\/g, '/'));
    if (!/^[\w.-]{1,200}\.policy$/.test(base)) problems.push(`${name || '(no name)'}: only .policy files (letters, digits, . _ -) can be compared`);
    else uploads.push({ path: join(dir, base), text });
  };
  for (const f of filesOf(res)) add(f.filename ?? '', f.data.toString('utf8'));
  if ((v.draft_text ?? '').trim()) add((v.draft_name ?? '').trim() || 'draft.policy', v.draft_text!);
  if (!uploads.length && !problems.length) problems.push('choose a draft file or paste one');
  const names = uploads.map((u) => basename(u.path));
  const inForce = ticked(v, 'whole') ? [] : (await ctx.policy.files()).filter((f) => !names.includes(basename(f.path)));
  const files = [...inForce, ...uploads].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { files, problems, names };
}

export function policyPages(router: Router, ctx: AppContext): void {
  router.get('/policy', (req, res) => policyPage(ctx, req, res));

  router.post('/policy/reload', async (req, res) => {
    const before = (await ctx.policy.current()).version;
    try {
      const set = await ctx.policy.reloadFromDisk(audited(ctx, personOf(res), (after) => ({ action: 'policy.reload', target: 'policy', details: { before, after } })));
      done(ctx, res, set.version === before ? `Reloaded; the version in force is unchanged (${set.version}).` : `Reloaded: ${set.version} is in force.`, '/console/policy');
    } catch (err) {
      if (!(err instanceof PolicyLoadError)) throw err;
      const list = err.diagnostics.map((d) => formatDiagnostic({ ...d, file: fileName(d.file) }));
      await policyPage(ctx, req, res, { reloadErrors: [`The policy files have ${list.length} error(s); the policy in force is unchanged.`, ...list], status: 400 });
    }
  });

  router.get('/policy/diff', async (req, res) => {
    const q = req.query as Record<string, unknown>;
    const from = typeof q.from === 'string' ? await ctx.store.policyVersions.get<SourceFile, JsonRule>(q.from) : undefined;
    const to = typeof q.to === 'string' ? await ctx.store.policyVersions.get<SourceFile, JsonRule>(q.to) : undefined;
    if (!from || !to) throw errors.notFound('choose two versions that have been in force');
    const a = compile(from.files, from.rules);
    const b = compile(to.files, to.rules);
    if (!a.set || !b.set) throw errors.invalidRequest(`a stored version no longer compiles: ${[...a.errors, ...b.errors].join('; ')}`);
    const r = runDiff(a.set, b.set);
    render(ctx, req, res, 200, {
      title: 'Policy diff',
      section: 'policy',
      body: diffBody({ label: `${code(from.version)} (from ${when(iso(from.first_seen))})` }, { label: `${code(to.version)} (from ${when(iso(to.first_seen))})` }, r),
    });
  });

  router.post('/policy/diff', async (req, res) => {
    const { files, problems, names } = await draftFiles(ctx, req, res);
    if (problems.length) return policyPage(ctx, req, res, { draftErrors: problems, status: 400 });
    const liveRules = (await ctx.store.rules.live()).map(toJsonRule);
    const draft = compile(files, liveRules);
    if (!draft.set) return policyPage(ctx, req, res, { draftErrors: [`The draft has ${draft.errors.length} error(s):`, ...draft.errors], status: 400 });
    const current = await ctx.policy.current();
    const r = runDiff(current, draft.set);
    render(ctx, req, res, 200, {
      title: 'Policy diff',
      section: 'policy',
      body: diffBody({ label: `the policy in force, ${code(current.version)}` }, { label: `the draft (${e(names.join(', '))}), ${code(draft.set.version)}` }, r),
    });
  });
}
