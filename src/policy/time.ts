// The clock facts of `time.*`: hour, minute, weekday and date of an instant in an
// IANA time zone (daylight saving included, as the zone database says), and the
// epoch. Formatting a date in a zone is slow, so the facts are computed only when
// a rule reads them and kept per zone for the minute they belong to: every other
// decision in that minute reuses them.

export interface LocalTime {
  hour: number;
  minute: number;
  /** `mon` … `sun` */
  weekday: string;
  /** `YYYY-MM-DD` */
  date: string;
}

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export const TIME_FIELDS = ['hour', 'minute', 'weekday', 'date', 'epoch'] as const;
export type TimeField = (typeof TIME_FIELDS)[number];

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', weekday: 'short',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** Is this a time zone name the zone database knows (`Europe/Berlin`, `UTC`)? */
export function isTimeZone(zone: string): boolean {
  if (!zone) return false;
  try {
    formatter(zone);
    return true;
  } catch {
    return false;
  }
}

/** The local time of an instant (milliseconds since the epoch) in a zone, computed afresh. */
export function localTime(now: number, zone: string): LocalTime {
  const parts = formatter(zone).formatToParts(new Date(now));
  let year = '', month = '', day = '', hour = 0, minute = 0, weekday = '';
  for (const p of parts) {
    switch (p.type) {
      case 'year': year = p.value; break;
      case 'month': month = p.value; break;
      case 'day': day = p.value; break;
      case 'hour': hour = Number(p.value) % 24; break;
      case 'minute': minute = Number(p.value); break;
      case 'weekday': weekday = p.value.slice(0, 3).toLowerCase(); break;
    }
  }
  // Years before 1000 or after 9999 are not written with four digits: keep `YYYY-MM-DD` comparable.
  return { hour, minute, weekday, date: `${year.padStart(4, '0')}-${month}-${day}` };
}

const cache = new Map<string, { minute: number; facts: LocalTime }>();
const CACHE_ZONES = 256;

/**
 * The local time of `now` in `zone`, cached per zone and minute. Null when the clock is not
 * a usable number (then every `time.*` value is missing, and rules fail closed).
 */
export function timeFacts(now: number, zone: string): LocalTime | null {
  if (typeof now !== 'number' || !Number.isFinite(now) || Math.abs(now) > 8.64e15) return null;
  const minute = Math.floor(now / 60_000);
  const hit = cache.get(zone);
  if (hit && hit.minute === minute) return hit.facts;
  const facts = localTime(now, zone);
  if (!hit && cache.size >= CACHE_ZONES) cache.clear();
  cache.set(zone, { minute, facts });
  return facts;
}

/** `time.epoch`: whole seconds since the epoch. */
export function epochSeconds(now: number): number | null {
  if (typeof now !== 'number' || !Number.isFinite(now) || Math.abs(now) > 8.64e15) return null;
  return Math.floor(now / 1000);
}

/** Is `s` a real calendar date written `YYYY-MM-DD`? */
export function isIsoDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return d.getUTCFullYear() === Number(m[1]) && d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3]);
}
