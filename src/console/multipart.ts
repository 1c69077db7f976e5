/** One part of a multipart/form-data body (RFC 7578). */
export interface Part {
  name: string;
  filename?: string;
  data: Buffer;
}

const MAX_PARTS = 64;

/**
 * Parses a multipart/form-data body held in memory (the caller caps its size). Returns null
 * when the body is not well formed: a missing boundary, a part without a name, a missing end.
 */
export function parseMultipart(body: Buffer, contentType: string): Part[] | null {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary) return null;
  const delimiter = Buffer.from(`--${boundary}`);
  const next = Buffer.from(`\r\n--${boundary}`);
  let at = body.indexOf(delimiter);
  if (at === -1) return null;
  at += delimiter.length;
  const parts: Part[] = [];
  for (;;) {
    if (body.subarray(at, at + 2).toString('latin1') === '--') return parts;
    if (body.subarray(at, at + 2).toString('latin1') !== '\r\n') return null;
    at += 2;
    const headerEnd = body.indexOf('\r\n\r\n', at, 'latin1');
    if (headerEnd === -1) return null;
    const headers = body.subarray(at, headerEnd).toString('utf8').split('\r\n');
    const disposition = headers.find((h) => /^content-disposition\s*:/i.test(h));
    const name = disposition && /(?:^|;)\s*name="([^"]*)"/i.exec(disposition.replace(/^[^:]*:\s*/, ''))?.[1];
    if (name === undefined) return null;
    const filename = disposition && /(?:^|;)\s*filename="([^"]*)"/i.exec(disposition.replace(/^[^:]*:\s*/, ''))?.[1];
    const dataStart = headerEnd + 4;
    const end = body.indexOf(next, dataStart);
    if (end === -1) return null;
    parts.push({ name, ...(filename !== undefined ? { filename } : {}), data: body.subarray(dataStart, end) });
    if (parts.length > MAX_PARTS) return null;
    at = end + next.length;
  }
}
