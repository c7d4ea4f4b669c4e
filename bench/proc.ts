/**
 * Process measurements from /proc: CPU time (user+sys) and resident memory
 * of a server and all its processes (nginx's master and workers; Gatehouse's
 * one process with its worker threads).
 */
import fs from 'node:fs';
import { execFileSync } from 'node:child_process';

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** The pid and every descendant pid. */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      const kids = fs.readFileSync(`/proc/${out[i]}/task/${out[i]}/children`, 'latin1').trim();
      if (kids) out.push(...kids.split(/\s+/).map(Number));
    } catch { /* gone */ }
  }
  return out;
}

/**
 * User+system CPU of the process tree, in microseconds: the nanosecond run
 * times of every thread (/proc/PID/task/TID/schedstat) where the kernel keeps
 * them — a 100 MiB transfer takes a tenth of a second, ten clock ticks —
 * else clock ticks from /proc/PID/stat.
 */
export function cpuMicros(pid: number): number {
  let micros = 0;
  for (const p of processTree(pid)) {
    let tasks: string[] = [];
    try { tasks = fs.readdirSync(`/proc/${p}/task`); } catch { /* gone */ }
    let fromSchedstat = tasks.length > 0;
    let sum = 0;
    for (const t of tasks) {
      try {
        sum += Number(fs.readFileSync(`/proc/${p}/task/${t}/schedstat`, 'latin1').split(' ')[0]) / 1000;
      } catch { fromSchedstat = false; break; }
    }
    if (fromSchedstat && Number.isFinite(sum)) { micros += sum; continue; }
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      micros += ((Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND) * 1e6;
    } catch { /* gone */ }
  }
  return micros;
}

/** Resident set size of the process tree, in bytes. */
export function rssBytes(pid: number): number {
  let kb = 0;
  for (const p of processTree(pid)) {
    try {
      const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p}/status`, 'latin1'));
      if (m) kb += Number(m[1]);
    } catch { /* gone */ }
  }
  return kb * 1024;
}

/** Samples RSS every `everyMs` until stopped; returns the peak seen. */
export function rssSampler(pid: number, everyMs = 20): { stop(): number } {
  let peak = rssBytes(pid);
  const t = setInterval(() => { peak = Math.max(peak, rssBytes(pid)); }, everyMs);
  return { stop() { clearInterval(t); return Math.max(peak, rssBytes(pid)); } };
}
