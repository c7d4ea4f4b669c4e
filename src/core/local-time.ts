/**
 * Local time as nginx prints it in `$time_local` (`26/Nov/2026:17:15:00
 * +0000`, also the access log's) and `$time_iso8601`, for http and stream.
 */

function pad(n: number, w = 2): string {
  return String(n).padStart(w, '0');
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function tzOffset(d: Date, colon: boolean): string {
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  const a = Math.abs(off);
  return `${sign}${pad(Math.floor(a / 60))}${colon ? ':' : ''}${pad(a % 60)}`;
}

let localSec = -1;
let localText = '';
let isoText = '';

/** $time_local and $time_iso8601 change once a second: formatted once a second. */
function refreshTimes(): void {
  const now = Date.now();
  const sec = Math.floor(now / 1000);
  if (sec === localSec) return;
  localSec = sec;
  const d = new Date(sec * 1000);
  localText = timeLocal(d);
  isoText = timeIso8601(d);
}

export function timeLocal(d = new Date()): string {
  return `${pad(d.getDate())}/${MONTHS[d.getMonth()]}/${d.getFullYear()}:${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${tzOffset(d, false)}`;
}

export function timeIso8601(d = new Date()): string {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${tzOffset(d, true)}`;
}

/** `$time_local` now (formatted once a second). */
export function currentTimeLocal(): string {
  refreshTimes();
  return localText;
}

/** `$time_iso8601` now (formatted once a second). */
export function currentTimeIso8601(): string {
  refreshTimes();
  return isoText;
}
