/**
 * The TLS files of one configuration load: certificates, keys, client and
 * trusted CAs, CRLs, DH parameters, ticket keys, stapling files — for http
 * and stream servers and for TLS to upstreams. As nginx ≥ 1.27.2 (its SSL
 * object cache, ngx_ssl_cache_fetch on the cycle's cache), a path named by
 * several directives or server blocks is read once per load. The master
 * reads it (Cycle.readAuxiliary); workers get the same bytes through the
 * cycle's file snapshot, so a FIFO or a file changed meanwhile gives every
 * worker what the master checked. Certificates named by variables are read
 * at handshake or request time instead (diskFiles), as in nginx.
 */
import fs from 'node:fs';
import type { Cycle } from '../core/cycle.ts';

export interface TlsFiles {
  /** The file as latin1 text (a DER file keeps its bytes); throws the fs error. */
  text(path: string): string;
  /** The file's bytes. */
  bytes(path: string): Buffer;
}

/** Straight from the disk, every time (what is read after the configuration load). */
export const diskFiles: TlsFiles = {
  text: (path) => fs.readFileSync(path, 'latin1'),
  bytes: (path) => fs.readFileSync(path),
};

class LoadFiles implements TlsFiles {
  private readonly cycle: Cycle;
  private readonly buffers = new Map<string, Buffer>();

  constructor(cycle: Cycle) {
    this.cycle = cycle;
  }

  text(path: string): string {
    return this.cycle.readAuxiliary(path);
  }

  bytes(path: string): Buffer {
    let b = this.buffers.get(path);
    if (!b) {
      b = Buffer.from(this.text(path), 'latin1');
      this.buffers.set(path, b);
    }
    return b;
  }
}

const byCycle = new WeakMap<Cycle, TlsFiles>();

/** The TLS files of the load of `cycle`. */
export function tlsFiles(cycle: Cycle): TlsFiles {
  let f = byCycle.get(cycle);
  if (!f) byCycle.set(cycle, (f = new LoadFiles(cycle)));
  return f;
}

/**
 * Reads `path` now, in the master, so workers find it in the snapshot when
 * they load it later (TLS to upstreams loads on first use); a file that
 * cannot be read is reported where it is loaded.
 */
export function preload(files: TlsFiles, path: string): void {
  try {
    files.text(path);
  } catch {
    // reported on use, with nginx's message
  }
}
