/**
 * Decoding a request body as APISIX does (lua-cjson): the error texts are
 * cjson's (`Expected object key string but found invalid token at
 * character 2`), rebuilt from V8's JSON.parse messages.
 */
const V8_TO_CJSON: Array<[RegExp, string]> = [
  [/^Expected property name or '}'/, 'Expected object key string but found invalid token'],
  [/^Expected ',' or '}' after property value/, 'Expected comma or object end but found invalid token'],
  [/^Expected ',' or ']' after array element/, 'Expected comma or array end but found invalid token'],
  [/^Expected ':' after property name/, 'Expected colon but found invalid token'],
  [/^Unexpected non-whitespace character after JSON/, 'Expected the end but found invalid token'],
];

/**
 * cjson takes control characters (a newline, a tab) inside a string as
 * they are; JSON.parse refuses them. They are escaped first, only inside
 * strings, so a proto's multi-line `content` decodes as in APISIX.
 */
function escapeControlsInStrings(text: string): string {
  if (!/[\u0000-\u001f]/.test(text)) return text;
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') { out += c + (text[i + 1] ?? ''); i++; continue; }
      if (c === '"') inString = false;
      const code = c.charCodeAt(0);
      out += code < 0x20 ? `\\u${code.toString(16).padStart(4, '0')}` : c;
      continue;
    }
    if (c === '"') inString = true;
    out += c;
  }
  return out;
}

export function decodeJson(text: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(text) };
  } catch (e) {
    const escaped = escapeControlsInStrings(text);
    if (escaped !== text) {
      try { return { value: JSON.parse(escaped) }; } catch { /* the original's error below */ }
    }
    const msg = (e as Error).message;
    const pos = /at position (\d+)/.exec(msg);
    const at = pos ? Number(pos[1]) + 1 : text.length + 1;
    if (/Unexpected end of JSON input|Unterminated string/.test(msg)) return { error: `Expected value but found T_END at character ${at}` };
    const known = V8_TO_CJSON.find(([re]) => re.test(msg));
    return { error: `${known ? known[1] : 'Expected value but found invalid token'} at character ${at}` };
  }
}
