import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';

/** AES-256-GCM for secrets the service must read back: private signing keys, TOTP secrets. */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('secret box key must be 32 bytes');
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
    },
    open(sealed) {
      const [v, iv, tag, body] = sealed.split('.');
      if (v !== 'v1' || !iv || !tag || body === undefined) throw new Error('sealed value is malformed');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}

/**
 * The encryption key: derived from GATEHOUSE_SECRET when set, else a random key kept in
 * a file beside the database (mode 0600). `warn` is told when the file is in use.
 */
export function resolveSecretKey(secret: string | undefined, keyFile: string, warn: (msg: string) => void): Buffer {
  if (secret) return createHash('sha256').update(`gatehouse-secret-box:${secret}`).digest();
  if (!existsSync(keyFile)) {
    writeFileSync(keyFile, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
  }
  chmodSync(keyFile, 0o600);
  warn(`GATEHOUSE_SECRET is not set: private keys are encrypted with the key file ${keyFile}; keep it with the database`);
  const key = Buffer.from(readFileSync(keyFile, 'utf8').trim(), 'base64url');
  if (key.length !== 32) throw new Error(`key file ${keyFile} is malformed`);
  return key;
}
