import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-config-'));
const base = { GATEHOUSE_POLICY_DIR: dir };

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env, dir);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('configuration', () => {
  it('defaults are the documented ones', () => {
    const c = loadConfig(base, dir);
    expect(c.port).toBe(3000);
    expect(c.issuer).toBe('http://localhost:3000');
    expect(c.dbFile).toBe(join(dir, 'data', 'gatehouse.db'));
    expect(c.logLevel).toBe('info');
    expect(c.adminToken).toBeUndefined();
  });

  it('the issuer follows PORT when not given', () => {
    expect(loadConfig({ ...base, PORT: '8080' }, dir).issuer).toBe('http://localhost:8080');
    const c = loadConfig({ ...base, GATEHOUSE_ISSUER: 'https://id.example.com' }, dir);
    expect(c.issuer).toBe('https://id.example.com');
    expect(c.issuerHost).toBe('id.example.com');
  });

  it.each([
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ GATEHOUSE_ISSUER: 'not a url' }, 'GATEHOUSE_ISSUER'],
    [{ GATEHOUSE_ISSUER: 'https://id.example.com/' }, 'GATEHOUSE_ISSUER'],
    [{ GATEHOUSE_ISSUER: 'ftp://id.example.com' }, 'GATEHOUSE_ISSUER'],
    [{ GATEHOUSE_POLICY_DIR: '/no/such/dir' }, 'GATEHOUSE_POLICY_DIR'],
    [{ GATEHOUSE_PROJECT_FILE: '/no/such/file.json' }, 'GATEHOUSE_PROJECT_FILE'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
  ])('a bad value (%j) is one line naming %s', (env, variable) => {
    const err = errorOf({ ...base, ...env });
    expect(err.variable).toBe(variable);
    expect(err.message.startsWith(`${variable}: `)).toBe(true);
    expect(err.message).not.toContain('\n');
  });
});
