/**
 * nginx's HTTP date parser (ngx_parse_http_time in src/core/ngx_parse_time.c):
 * RFC 1123, RFC 850 and asctime forms, as strictly as nginx reads them. Used
 * by conditional requests, range, gzip, headers and the upstream cache.
 */

const MDAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function digit(s: string, i: number): number {
  const c = s.charCodeAt(i) - 48;
  return c >= 0 && c <= 9 ? c : -1;
}

function twoDigits(s: string, i: number): number {
  const a = digit(s, i);
  const b = digit(s, i + 1);
  return a < 0 || b < 0 ? -1 : a * 10 + b;
}

/**
 * Seconds since the epoch for an HTTP date in RFC 1123, RFC 850 or asctime
 * form, or -1 (ngx_parse_http_time, equally strict).
 */
export function parseHttpTime(value: string): number {
  const end = value.length;
  let fmt: 'rfc822' | 'rfc850' | 'isoc' | '' = '';
  let p = 0;
  for (; p < end; p++) {
    if (value[p] === ',') break;
    if (value[p] === ' ') { fmt = 'isoc'; break; }
  }
  for (p++; p < end; p++) if (value[p] !== ' ') break;
  if (end - p < 18) return -1;
  let day = 0;
  let year = 0;
  if (fmt !== 'isoc') {
    day = twoDigits(value, p);
    if (day < 0) return -1;
    p += 2;
    if (value[p] === ' ') {
      if (end - p < 18) return -1;
      fmt = 'rfc822';
    } else if (value[p] === '-') fmt = 'rfc850';
    else return -1;
    p++;
  }
  let month: number;
  switch (value[p]) {
    case 'J': month = value[p + 1] === 'a' ? 0 : value[p + 2] === 'n' ? 5 : 6; break;
    case 'F': month = 1; break;
    case 'M': month = value[p + 2] === 'r' ? 2 : 4; break;
    case 'A': month = value[p + 1] === 'p' ? 3 : 7; break;
    case 'S': month = 8; break;
    case 'O': month = 9; break;
    case 'N': month = 10; break;
    case 'D': month = 11; break;
    default: return -1;
  }
  p += 3;
  if ((fmt === 'rfc822' && value[p] !== ' ') || (fmt === 'rfc850' && value[p] !== '-')) return -1;
  p++;
  if (fmt === 'rfc822') {
    const hi = twoDigits(value, p);
    const lo = twoDigits(value, p + 2);
    if (hi < 0 || lo < 0) return -1;
    year = hi * 100 + lo;
    p += 4;
  } else if (fmt === 'rfc850') {
    year = twoDigits(value, p);
    if (year < 0) return -1;
    year += year < 70 ? 2000 : 1900;
    p += 2;
  }
  if (fmt === 'isoc') {
    if (value[p] === ' ') p++;
    const d = digit(value, p++);
    if (d < 0) return -1;
    day = d;
    if (value[p] !== ' ') {
      const d2 = digit(value, p++);
      if (d2 < 0) return -1;
      day = day * 10 + d2;
    }
    if (end - p < 14) return -1;
  }
  if (value[p++] !== ' ') return -1;
  const hour = twoDigits(value, p);
  if (hour < 0) return -1;
  p += 2;
  if (value[p++] !== ':') return -1;
  const min = twoDigits(value, p);
  if (min < 0) return -1;
  p += 2;
  if (value[p++] !== ':') return -1;
  const sec = twoDigits(value, p);
  if (sec < 0) return -1;
  if (fmt === 'isoc') {
    p += 2;
    if (value[p++] !== ' ') return -1;
    const hi = twoDigits(value, p);
    const lo = twoDigits(value, p + 2);
    if (hi < 0 || lo < 0) return -1;
    year = hi * 100 + lo;
  }
  if (hour > 23 || min > 59 || sec > 59) return -1;
  if (day === 29 && month === 1) {
    if ((year & 3) || (year % 100 === 0 && year % 400 !== 0)) return -1;
  } else if (day > MDAYS[month]) return -1;
  // Gauss' formula, with the year starting on March 1
  if (--month <= 0) { month += 12; year -= 1; }
  const days = 365 * year + Math.floor(year / 4) - Math.floor(year / 100) + Math.floor(year / 400)
    + Math.floor(367 * month / 12) - 30 + day - 1 - 719527 + 31 + 28;
  return days * 86400 + hour * 3600 + min * 60 + sec;
}

/** Marks that a filter replaced the body (412, 416): content handlers may skip producing theirs. */

const WEEK = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const pad = (n: number) => String(n).padStart(2, '0');

/** nginx's ngx_http_cookie_time: `Thu, 18-Nov-10 11:27:35 GMT` (a 4-digit year after 2037). */
export function cookieTime(sec: number): string {
  const d = new Date(sec * 1000);
  const y = d.getUTCFullYear();
  return `${WEEK[d.getUTCDay()]}, ${pad(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${y < 2038 ? pad(y % 100) : y} `
    + `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} GMT`;
}
