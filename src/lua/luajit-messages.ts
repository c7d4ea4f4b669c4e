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
