import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';

describe('id_jag_audiences in the project file', () => {
  it('are applied at start, and replaced when the file changes them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-idjag-project-'));
    const file = join(dir, 'project.json');
    const project = (audiences: unknown[]) => JSON.stringify({
      applications: [{ name: 'Wiki', type: 'web', client_id: 'wiki', redirect_uris: ['https://wiki.example/cb'], id_jag_audiences: audiences }],
    });
    writeFileSync(file, project([{ audience: 'https://chat.example', client_id: 'wiki-at-chat' }]));
    let server = await startTestServer({ dir, env: { GATEHOUSE_PROJECT_FILE: file } });
    try {
      expect((await server.admin('GET', '/applications/wiki')).body.id_jag_audiences).toEqual([{ audience: 'https://chat.example', client_id: 'wiki-at-chat' }]);
    } finally {
      await server.stop();
    }
    writeFileSync(file, project([{ audience: 'https://tools.example' }]));
    server = await startTestServer({ dir, env: { GATEHOUSE_PROJECT_FILE: file } });
    try {
      expect((await server.admin('GET', '/applications/wiki')).body.id_jag_audiences).toEqual([{ audience: 'https://tools.example', client_id: null }]);
    } finally {
      await server.stop();
    }
  });
});
