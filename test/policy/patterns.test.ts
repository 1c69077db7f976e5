import { describe, expect, it } from 'vitest';
import { permissionCovers, singularOf } from '../../src/policy/index.js';
import { compileAgentMatcher, compileTypedMatcher } from '../../src/policy/patterns.js';

describe('kinds and permissions', () => {
  it('singularOf follows English plural endings', () => {
    expect(['refunds', 'policies', 'boxes', 'classes', 'watches', 'databases', 'exports', 'data'].map(singularOf))
      .toEqual(['refund', 'policy', 'box', 'class', 'watch', 'database', 'export', 'data']);
  });
  it('a permission covers its action on objects of the singular kind', () => {
    expect(permissionCovers('create:refunds', 'create:refunds', 'refund:r1')).toBe(true);
    expect(permissionCovers('create:refunds', 'create:refunds', 'deployment:r1')).toBe(false);
    expect(permissionCovers('read:refunds', 'create:refunds', 'refund:r1')).toBe(false);
    expect(permissionCovers('*:refunds', 'delete:refunds', 'refund:r1')).toBe(true);
    expect(permissionCovers('create:*', 'create:policies', 'policy:p1')).toBe(true);
    expect(permissionCovers('create:refunds', 'create:refunds', 'refund')).toBe(false);
    expect(permissionCovers('create:people', 'create:people', 'person:1')).toBe(false);
    expect(permissionCovers('create:people', 'create:people', 'person:1', { people: 'person' })).toBe(true);
  });
  it('patterns: * matches a whole value or one segment', () => {
    expect(compileTypedMatcher('agent:*')('agent:spiffe://h/agent/a')).toBe(true);
    expect(compileTypedMatcher('refund:*')('refund:a/b')).toBe(true);
    expect(compileTypedMatcher('refund:*')('refunds:a')).toBe(false);
    const m = compileTypedMatcher('agent:spiffe://h/agent/*');
    expect(m('agent:spiffe://h/agent/a')).toBe(true);
    expect(m('agent:spiffe://h/agent/a/b')).toBe(false);
    expect(m('agent:spiffe://h/agent/')).toBe(false);
    expect(compileTypedMatcher('*:r1')('deployment:r1')).toBe(true);
    expect(compileAgentMatcher('*')('anything')).toBe(true);
    expect(compileAgentMatcher('spiffe://*/agent/a')('spiffe://g/agent/a')).toBe(true);
  });
});
