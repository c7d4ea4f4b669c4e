/**
 * nginx's ngx_decode_base64 and ngx_decode_base64url (what Lua's
 * ngx.decode_base64 and ngx.base64.decode_base64url run): the text up to the
 * first `=` must be of the alphabet and not 1 past a multiple of 4; what
 * follows the `=` is ignored. Node's decoder skips bad characters instead.
 */
export function ngxDecodeBase64(s: string, url = false): Buffer | undefined {
  const eq = s.indexOf('=');
  const body = eq < 0 ? s : s.slice(0, eq);
  if (!(url ? /^[A-Za-z0-9_-]*$/ : /^[A-Za-z0-9+/]*$/).test(body) || body.length % 4 === 1) return undefined;
  return Buffer.from(body, url ? 'base64url' : 'base64');
}
