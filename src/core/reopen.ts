/**
 * USR1: everything that writes to a log file registers here and reopens its
 * files by path, so logrotate's rename + USR1 moves writes to the new file.
 * The master calls reopenAll() in its thread and tells every worker thread
 * to do the same; each thread reopens the descriptors it owns.
 */
import { mainErrorLog, reopenErrorLogs } from './error-log.ts';

/** A reopen hook: flushes what it holds to the old file, then reopens; returns messages for files that failed. */
export type ReopenHook = () => string[] | void;

const hooks = new Set<ReopenHook>();

/** Registers `fn` for USR1 in this thread; returns a function that unregisters it. */
export function onReopen(fn: ReopenHook): () => void {
  hooks.add(fn);
  return () => { hooks.delete(fn); };
}

export function reopenAll(): void {
  const failed: string[] = [];
  // access logs first: buffered lines go to the old file before it is let go
  for (const fn of hooks) {
    const f = fn();
    if (f) failed.push(...f);
  }
  failed.push(...reopenErrorLogs());
  // as nginx: a file that cannot be reopened keeps its old descriptor, and that is an emergency
  for (const msg of failed) mainErrorLog().emerg(msg);
}
