/**
 * USR1: everything that writes to a log file registers here and reopens its
 * files by path, so logrotate's rename + USR1 moves writes to the new file.
 */
import { reopenErrorLogs } from './error-log.ts';

const hooks: Array<() => void> = [];

export function onReopen(fn: () => void): void {
  hooks.push(fn);
}

export function reopenAll(): void {
  reopenErrorLogs();
  for (const fn of hooks) fn();
}
