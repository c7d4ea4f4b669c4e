/**
 * strftime(3) in the C locale, for SSI's `config timefmt` and the
 * $date_local / $date_gmt variables.
 */

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

interface Tm {
  year: number;
  mon: number;
  mday: number;
  hour: number;
  min: number;
  sec: number;
  wday: number;
  yday: number;
  /** Minutes east of UTC. */
  offset: number;
  zone: string;
}

function pad(n: number, width = 2, fill = '0'): string {
  return String(n).padStart(width, fill);
}

function localZone(d: Date): string {
  const name = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(d).find((p) => p.type === 'timeZoneName')?.value;
  return name ?? 'UTC';
}

function tmOf(d: Date, gmt: boolean): Tm {
  const year = gmt ? d.getUTCFullYear() : d.getFullYear();
  const mon = gmt ? d.getUTCMonth() : d.getMonth();
  const mday = gmt ? d.getUTCDate() : d.getDate();
  const yday = Math.round((Date.UTC(year, mon, mday) - Date.UTC(year, 0, 1)) / 86400000);
  return {
    year, mon, mday, yday,
    hour: gmt ? d.getUTCHours() : d.getHours(),
    min: gmt ? d.getUTCMinutes() : d.getMinutes(),
    sec: gmt ? d.getUTCSeconds() : d.getSeconds(),
    wday: gmt ? d.getUTCDay() : d.getDay(),
    offset: gmt ? 0 : -d.getTimezoneOffset(),
    zone: gmt ? 'GMT' : localZone(d),
  };
}

function conversion(c: string, tm: Tm, d: Date): string | undefined {
  switch (c) {
    case 'a': return DAYS[tm.wday].slice(0, 3);
    case 'A': return DAYS[tm.wday];
    case 'b': case 'h': return MONTHS[tm.mon].slice(0, 3);
    case 'B': return MONTHS[tm.mon];
    case 'c': return `${DAYS[tm.wday].slice(0, 3)} ${MONTHS[tm.mon].slice(0, 3)} ${pad(tm.mday, 2, ' ')} ${pad(tm.hour)}:${pad(tm.min)}:${pad(tm.sec)} ${tm.year}`;
    case 'C': return pad(Math.floor(tm.year / 100));
    case 'd': return pad(tm.mday);
    case 'D': return `${pad(tm.mon + 1)}/${pad(tm.mday)}/${pad(tm.year % 100)}`;
    case 'e': return pad(tm.mday, 2, ' ');
    case 'F': return `${tm.year}-${pad(tm.mon + 1)}-${pad(tm.mday)}`;
    case 'H': return pad(tm.hour);
    case 'I': return pad(tm.hour % 12 || 12);
    case 'j': return pad(tm.yday + 1, 3);
    case 'k': return pad(tm.hour, 2, ' ');
    case 'l': return pad(tm.hour % 12 || 12, 2, ' ');
    case 'm': return pad(tm.mon + 1);
    case 'M': return pad(tm.min);
    case 'n': return '\n';
    case 'p': return tm.hour < 12 ? 'AM' : 'PM';
    case 'r': return `${pad(tm.hour % 12 || 12)}:${pad(tm.min)}:${pad(tm.sec)} ${tm.hour < 12 ? 'AM' : 'PM'}`;
    case 'R': return `${pad(tm.hour)}:${pad(tm.min)}`;
    case 's': return String(Math.floor(d.getTime() / 1000));
    case 'S': return pad(tm.sec);
    case 't': return '\t';
    case 'T': return `${pad(tm.hour)}:${pad(tm.min)}:${pad(tm.sec)}`;
    case 'u': return String(tm.wday || 7);
    case 'w': return String(tm.wday);
    case 'x': return `${pad(tm.mon + 1)}/${pad(tm.mday)}/${pad(tm.year % 100)}`;
    case 'X': return `${pad(tm.hour)}:${pad(tm.min)}:${pad(tm.sec)}`;
    case 'y': return pad(tm.year % 100);
    case 'Y': return String(tm.year);
    case 'z': {
      const o = Math.abs(tm.offset);
      return `${tm.offset < 0 ? '-' : '+'}${pad(Math.floor(o / 60))}${pad(o % 60)}`;
    }
    case 'Z': return tm.zone;
    case '%': return '%';
    default: return undefined;
  }
}

/** Formats `d` (UTC with `gmt`, else local time) as strftime(3) does in the C locale. */
export function strftime(format: string, d: Date, gmt: boolean): string {
  const tm = tmOf(d, gmt);
  let out = '';
  for (let i = 0; i < format.length; i++) {
    const ch = format[i];
    if (ch !== '%' || i + 1 >= format.length) { out += ch; continue; }
    let c = format[++i];
    // glibc's flags and E/O modifiers change nothing in the C locale
    while ((c === 'E' || c === 'O') && i + 1 < format.length) c = format[++i];
    const v = conversion(c, tm, d);
    out += v ?? `%${c}`;
  }
  return out;
}
