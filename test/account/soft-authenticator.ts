import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoBase64URL, isoCBOR } from '@simplewebauthn/server/helpers';

/**
 * A WebAuthn authenticator in software (ES256, attestation `none`) for tests that talk HTTP
 * without a browser: it answers the options the server sends exactly as a browser would
 * forward a real authenticator's answer, and lets a test set the signature counter (clones).
 */
export class SoftAuthenticator {
  readonly credentialId = randomBytes(32);
  private readonly key: { privateKey: KeyObject; publicKey: KeyObject };
  userHandle?: string;
  counter = 0;

  constructor(
    readonly origin: string,
    readonly opts: { userVerified?: boolean; backupEligible?: boolean } = {},
  ) {
    this.key = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  }

  get id(): string {
    return isoBase64URL.fromBuffer(this.credentialId);
  }

  private flags(extra = 0): number {
    const UP = 0x01, UV = 0x04, BE = 0x08, BS = 0x10;
    return UP | (this.opts.userVerified ? UV : 0) | (this.opts.backupEligible ? BE | BS : 0) | extra;
  }

  private authData(rpId: string, flags: number, attested?: Uint8Array): Buffer {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(this.counter);
    const rpIdHash = createHash('sha256').update(rpId).digest();
    return Buffer.concat([rpIdHash, Buffer.from([flags]), counter, ...(attested ? [attested] : [])]);
  }

  private clientData(type: 'webauthn.create' | 'webauthn.get', challenge: string): string {
    return isoBase64URL.fromBuffer(Buffer.from(JSON.stringify({ type, challenge, origin: this.origin, crossOrigin: false })));
  }

  /** The answer to registration options (`navigator.credentials.create`), as the browser library posts it. */
  register(options: { challenge: string; rp: { id?: string }; user: { id: string } }): Record<string, unknown> {
    const rpId = options.rp.id!;
    this.userHandle = options.user.id;
    const jwk = this.key.publicKey.export({ format: 'jwk' });
    const cose = new Map<number, number | Uint8Array>([
      [1, 2], // kty: EC2
      [3, -7], // alg: ES256
      [-1, 1], // crv: P-256
      [-2, isoBase64URL.toBuffer(jwk.x!)],
      [-3, isoBase64URL.toBuffer(jwk.y!)],
    ]);
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(this.credentialId.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, this.credentialId, Buffer.from(isoCBOR.encode(cose))]);
    const authData = this.authData(rpId, this.flags(0x40), attested);
    const attestationObject = isoCBOR.encode(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', authData]]) as never);
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      response: {
        clientDataJSON: this.clientData('webauthn.create', options.challenge),
        attestationObject: isoBase64URL.fromBuffer(attestationObject),
        transports: ['internal'],
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }

  /** The answer to sign-in options (`navigator.credentials.get`); the counter goes up by one unless `counter` is given. */
  assert(options: { challenge: string; rpId?: string }, counter = this.counter + 1): Record<string, unknown> {
    this.counter = counter;
    const authData = this.authData(options.rpId!, this.flags());
    const clientDataJSON = this.clientData('webauthn.get', options.challenge);
    const signed = Buffer.concat([authData, createHash('sha256').update(isoBase64URL.toBuffer(clientDataJSON)).digest()]);
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      response: {
        clientDataJSON,
        authenticatorData: isoBase64URL.fromBuffer(new Uint8Array(authData)),
        signature: isoBase64URL.fromBuffer(sign('sha256', signed, this.key.privateKey)),
        ...(this.userHandle ? { userHandle: this.userHandle } : {}),
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }
}
