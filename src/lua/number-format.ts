/**
 * Lua numbers as LuaJIT prints them: "%.14g" for every float, so an integral float has no
 * ".0" (`5`, `1e+15`); NaN is `nan` whatever its sign (checked against Debian's LuaJIT 2.1).
 * Lua 5.4 itself appends ".0" to integral floats; the host uses this wherever it formats.
 */
export function formatLuaNumber(x: number): string {
  if (Number.isInteger(x) && Math.abs(x) < 1e15) return Object.is(x, -0) ? '-0' : String(x);
  if (!Number.isFinite(x)) {
    if (x === Infinity) return 'inf';
    return x === -Infinity ? '-inf' : 'nan';
  }
  return format14g(x);
}

/** C's printf("%.14g", x) for a finite, non-zero x. */
function format14g(x: number): string {
  const exponential = x.toExponential(13); // d.ddddddddddddde±x: the %e form, 14 significant digits
  const e = exponential.indexOf('e');
  const exp = Number(exponential.slice(e + 1));
  if (exp < -4 || exp >= 14) {
    const mantissa = stripZeros(exponential.slice(0, e));
    const sign = exp < 0 ? '-' : '+';
    const digits = String(Math.abs(exp)).padStart(2, '0');
    return `${mantissa}e${sign}${digits}`;
  }
  return stripZeros(x.toFixed(13 - exp));
}

function stripZeros(s: string): string {
  if (!s.includes('.')) return s;
  let end = s.length;
  while (s.charCodeAt(end - 1) === 48) end--;
  if (s.charCodeAt(end - 1) === 46) end--;
  return s.slice(0, end);
}
