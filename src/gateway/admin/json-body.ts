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

export function decodeJson(text: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(text) };
  } catch (e) {
    const msg = (e as Error).message;
    const pos = /at position (\d+)/.exec(msg);
    const at = pos ? Number(pos[1]) + 1 : text.length + 1;
    if (/Unexpected end of JSON input|Unterminated string/.test(msg)) return { error: `Expected value but found T_END at character ${at}` };
    const known = V8_TO_CJSON.find(([re]) => re.test(msg));
    return { error: `${known ? known[1] : 'Expected value but found invalid token'} at character ${at}` };
  }
}
