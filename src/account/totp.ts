import QRCode from 'qrcode';
import { Secret, TOTP } from 'otpauth';
import type { AppContext } from '../context.js';
import type { User } from '../store/users.js';

/** How long a TOTP secret being set up waits for its confirmation code. */
export const TOTP_SETUP_TTL_SECONDS = 10 * 60;

/** A new TOTP secret: 160 random bits (RFC 4226's recommended length), base32. */
export const newTotpSecret = (): string => new Secret({ size: 20 }).base32;

/** The `otpauth://` URI an authenticator app reads from the QR code: SHA-1, 6 digits, 30 s. */
export function otpauthUri(ctx: AppContext, user: Pick<User, 'email'>, secretBase32: string): string {
  return new TOTP({
    issuer: `Gatehouse (${new URL(ctx.urls.issuer).host})`,
    label: user.email,
    secret: Secret.fromBase32(secretBase32),
    algorithm: 'SHA1',
    digits: 6,
    period: 30,
  }).toString();
}

/** The URI as a QR code, an SVG `data:` URI for an `<img>` (the pages' CSP allows `img-src data:`). */
export async function qrCodeDataUri(text: string): Promise<string> {
  const svg = await QRCode.toString(text, { type: 'svg', margin: 4, errorCorrectionLevel: 'M' });
  return `data:image/svg+xml;base64,${Buffer.from(svg, 'utf8').toString('base64')}`;
}

/** The secret in groups of four, easier to type into an app by hand. */
export const groupedSecret = (secretBase32: string): string => secretBase32.replace(/(.{4})(?=.)/g, '$1 ');
