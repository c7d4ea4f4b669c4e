/**
 * Socket and temporary-file reads land in new buffers outside V8's heap, freed only when a
 * collection finds them dead, and V8 does not count them towards its next
 * young-generation collection. A proxy streaming a large body would keep
 * tens of MiB of dead read buffers until V8's external-memory limit forces a
 * full collection (nginx reuses a fixed set of buffers instead). So after
 * every READ_BUDGET bytes read, this asks for a minor collection, which
 * frees them; small requests reach the budget once in tens of thousands.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

const READ_BUDGET = 16 * 2 ** 20;

type Collect = (options: { type: 'minor' }) => void;

// V8's gc(), exposed to a throw-away context rather than to the global one. The flag is
// process-wide and worker threads start side by side, so it is left on: turning it off
// again raced with a sibling worker between its two calls (gc was then undefined there).
// Only contexts created later see it.
v8.setFlagsFromString('--expose-gc');
const exposed: unknown = vm.runInNewContext('typeof gc === "function" ? gc : undefined');
const collect: Collect = typeof exposed === 'function' ? (exposed as Collect) : () => {};

let left = READ_BUDGET;

/** Counts `n` bytes read into a new buffer (from a socket or a temporary file). */
export function countRead(n: number): void {
  left -= n;
  if (left > 0) return;
  left = READ_BUDGET;
  collect({ type: 'minor' });
}
