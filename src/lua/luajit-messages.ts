/**
 * Lua 5.4's runtime-error and traceback wording rewritten as LuaJIT (OpenResty) words it, for
 * the messages the host reports (a hook that failed). Errors Lua code catches itself (pcall) keep
 * 5.4's wording: the VM makes them, not the host (docs/lua.md lists this).
 *   5.4:    attempt to index a nil value (local 't')      traceback: in local 'inner'
 *   LuaJIT: attempt to index local 't' (a nil value)      traceback: in function 'inner'
 */
const VARIABLE_ERROR = /attempt to (index|call|perform arithmetic on|concatenate|get length of) a (\w+) value \((local|global|upvalue|field|method) '([^']*)'\)/;

export function luajitMessage(message: string): string {
  return message.replace(VARIABLE_ERROR, "attempt to $1 $3 '$4' (a $2 value)");
}

export function luajitTraceback(traceback: string): string {
  return traceback.replace(/in (?:local|upvalue|field|method|global) '([^']*)'/g, "in function '$1'");
}

/** A bad escape in a string literal: 5.4 quotes the string read so far with the escape (`near '"(\d'`). */
const BAD_ESCAPE = /(invalid escape sequence|hexadecimal digit expected|decimal escape too large|missing '\{' in \\u\{xxxx\}|missing '\}' in \\u\{xxxx\}|UTF-8 value too large) near '(.*)\\[^\\]*'$/s;

/**
 * A compile error as LuaJIT words it: every bad escape is `invalid escape sequence`, quoting the
 * string only up to the backslash (`near '"('`), and the end of input is quoted (`near '<eof>'`).
 */
export function luajitSyntaxMessage(message: string): string {
  return message.replace(BAD_ESCAPE, "invalid escape sequence near '$2'").replace(/near <eof>$/, "near '<eof>'");
}
